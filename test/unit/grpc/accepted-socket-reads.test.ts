import * as net from 'node:net';
import { readIntoOneBuffer, READ_BUFFER_BYTES } from '../../../src/transport/accepted-socket';
import { frameMessage, GrpcServer } from '../../../src/transport/grpc-server';
import { createLogger } from '../../../src/platform/logger';
import { grpcFrame, messagesOf } from '../../support/raw-grpc';
import { FLAG, FRAME, grpcRequestBlock, rawFrame, rawPeer, type RawPeer } from '../../support/raw-h2-frames';
import { sleep, until } from '../../support/waiting';

/**
 * The gRPC server's connections all read into one buffer (src/transport/accepted-socket.ts), so the bytes of a read
 * are overwritten by the next: what the transport keeps past a read must be a copy. Each test here makes a later read
 * land on the bytes of an earlier one, on real sockets.
 */
const logger = createLogger('silent');
const ECHO = '/test.Echo/Unary';

async function echoServer(): Promise<{ server: GrpcServer; port: number }> {
  const server = new GrpcServer({ host: '127.0.0.1', port: 0 }, logger);
  server.addMethod(ECHO, { kind: 'unary', handle: (message, call) => call.respond(frameMessage(message)) });
  return { server, port: await server.listen() };
}

/** By stream: the body it was answered with, and whether its trailers (HEADERS with END_STREAM) came. */
function answersByStream(peer: RawPeer): Map<number, { body: Buffer; ended: boolean }> {
  const byStream = new Map<number, { body: Buffer; ended: boolean }>();
  for (const frame of peer.frames) {
    if (frame.streamId === 0) continue;
    const answer = byStream.get(frame.streamId) ?? { body: Buffer.alloc(0), ended: false };
    if (frame.type === FRAME.DATA) answer.body = Buffer.concat([answer.body, frame.payload]);
    if (frame.type === FRAME.HEADERS && frame.flags & FLAG.END_STREAM) answer.ended = true;
    byStream.set(frame.streamId, answer);
  }
  return byStream;
}

/** Whether a response body is exactly one message, `expected` (Buffer.equals: jest's toEqual walks a Buffer byte by byte). */
function answeredWith(body: Buffer | undefined, expected: Buffer): boolean {
  const messages = body === undefined ? [] : messagesOf(body);
  return messages.length === 1 && messages[0]!.equals(expected);
}

/** A message of `bytes` bytes, every byte `fill` but a 4-byte id at the front. */
function message(id: number, bytes: number, fill: number): Buffer {
  const out = Buffer.alloc(bytes, fill);
  out.writeUInt32BE(id, 0);
  return out;
}

describe('readIntoOneBuffer', () => {
  it('hands every read of every connection over in one buffer, reads and writes each connection, and leaves them uncounted by the net.Server', async () => {
    const reads: { connection: number; bytes: string; buffer: ArrayBufferLike; byteOffset: number }[] = [];
    const adopted: net.Socket[] = [];
    const server = net.createServer({ pauseOnConnect: true }, (accepted) => {
      const connection = adopted.length;
      const socket = readIntoOneBuffer(accepted, (bytes) => {
        reads.push({ connection, bytes: bytes.toString('latin1'), buffer: bytes.buffer, byteOffset: bytes.byteOffset });
        socket!.write(bytes);
      });
      adopted.push(socket!);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as net.AddressInfo).port;
    const clients = [net.connect(port, '127.0.0.1'), net.connect(port, '127.0.0.1')];
    const echoed: Buffer[][] = [[], []];
    clients.forEach((client, i) => client.on('data', (chunk: Buffer) => echoed[i]!.push(chunk)));
    const readBy = (connection: number) =>
      reads
        .filter((read) => read.connection === connection)
        .map((read) => read.bytes)
        .join('');
    try {
      await until(() => adopted.length === 2, 'both connections');
      const texts = ['first read', 'second', 'a third, longer than the others'];
      for (const text of texts) {
        for (const [i, client] of clients.entries()) {
          client.write(`${i}:${text}`);
          await until(() => readBy(i).endsWith(`${i}:${text}`), `the read of "${i}:${text}"`);
        }
      }
      for (const i of [0, 1]) expect(readBy(i)).toBe(texts.map((text) => `${i}:${text}`).join(''));
      expect(new Set(reads.map((read) => read.buffer)).size).toBe(1);
      expect(reads.every((read) => read.byteOffset === reads[0]!.byteOffset)).toBe(true);
      expect(reads[0]!.buffer.byteLength).toBeGreaterThanOrEqual(READ_BUFFER_BYTES);
      for (const i of [0, 1]) {
        const whole = texts.map((text) => `${i}:${text}`).join('');
        await until(() => Buffer.concat(echoed[i]!).length === whole.length, 'the echo');
        expect(Buffer.concat(echoed[i]!).toString('latin1')).toBe(whole);
      }
      // The connections are the adopter's to count: closing the listener does not wait for them.
      const count = await new Promise<number>((resolve, reject) =>
        server.getConnections((error, n) => (error ? reject(error) : resolve(n))),
      );
      expect(count).toBe(0);
      await new Promise<void>((resolve) => server.close(() => resolve()));
      expect(adopted.map((socket) => socket.destroyed)).toEqual([false, false]);
      const closed = new Promise((resolve) => adopted[0]!.once('close', resolve));
      clients[0]!.end();
      await closed;
    } finally {
      for (const client of clients) client.destroy();
      for (const socket of adopted) socket.destroy();
      server.close();
    }
  });

  it('gives back nothing for a connection already gone', async () => {
    const server = net.createServer({ pauseOnConnect: true }, (accepted) => {
      accepted.destroy();
      results.push(readIntoOneBuffer(accepted, () => undefined));
    });
    const results: (net.Socket | undefined)[] = [];
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const client = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
    client.on('error', () => undefined);
    try {
      await until(() => results.length === 1, 'the connection');
      expect(results[0]).toBeUndefined();
    } finally {
      client.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});

describe('the gRPC server on one read buffer', () => {
  let server: GrpcServer;
  let port: number;
  beforeEach(async () => ({ server, port } = await echoServer()));
  afterEach(async () => server.close());

  describe('keeps copies of what outlives a read', () => {
    it('a message whose END_STREAM comes in a later read, after another read overwrote its bytes', async () => {
      const peer = await rawPeer(port);
      try {
        const first = message(1, 2000, 0x61);
        // Read 1: the message, its stream still open.
        peer.send(rawFrame(FRAME.HEADERS, FLAG.END_HEADERS, 1, grpcRequestBlock(ECHO)), rawFrame(FRAME.DATA, 0, 1, grpcFrame(first)));
        await sleep(50);
        // Read 2: a whole call of its own, longer than read 1, so it lands on every byte read 1 left in the buffer.
        const second = message(3, 8000, 0x62);
        peer.send(
          rawFrame(FRAME.HEADERS, FLAG.END_HEADERS, 3, grpcRequestBlock(ECHO)),
          rawFrame(FRAME.DATA, FLAG.END_STREAM, 3, grpcFrame(second)),
        );
        await until(() => answersByStream(peer).get(3)?.ended === true, 'the answer on stream 3');
        // Read 3: stream 1's END_STREAM; only now is its call handled.
        peer.send(rawFrame(FRAME.DATA, FLAG.END_STREAM, 1));
        await until(() => answersByStream(peer).get(1)?.ended === true, 'the answer on stream 1');
        const answers = answersByStream(peer);
        expect(answeredWith(answers.get(1)?.body, first)).toBe(true);
        expect(answeredWith(answers.get(3)?.body, second)).toBe(true);
      } finally {
        peer.destroy();
      }
    });

    it('a message in DATA frames that arrive in separate reads', async () => {
      const peer = await rawPeer(port);
      try {
        const whole = message(5, 30_000, 0x63);
        const framed = grpcFrame(whole);
        const pieces = [framed.subarray(0, 9000), framed.subarray(9000, 18_000), framed.subarray(18_000)];
        peer.send(rawFrame(FRAME.HEADERS, FLAG.END_HEADERS, 1, grpcRequestBlock(ECHO)));
        for (const [index, piece] of pieces.entries()) {
          // Between the pieces, a read of other bytes: a whole call of its own, longer than each piece.
          if (index > 0) {
            peer.send(
              rawFrame(FRAME.HEADERS, FLAG.END_HEADERS, 1 + 2 * index, grpcRequestBlock(ECHO)),
              rawFrame(FRAME.DATA, FLAG.END_STREAM, 1 + 2 * index, grpcFrame(message(index, 12_000, 0x64 + index))),
            );
            await until(() => answersByStream(peer).get(1 + 2 * index)?.ended === true, 'the call between the pieces');
          }
          peer.send(rawFrame(FRAME.DATA, index === pieces.length - 1 ? FLAG.END_STREAM : 0, 1, piece));
          await sleep(30);
        }
        await until(() => answersByStream(peer).get(1)?.ended === true, 'the answer on stream 1');
        expect(answeredWith(answersByStream(peer).get(1)?.body, whole)).toBe(true);
      } finally {
        peer.destroy();
      }
    });
  });

  describe('writes answers a peer is slow to read', () => {
    it('sends every answer whole when the socket could not take them at once (the staged bytes Node still holds are not reused)', async () => {
      const peer = await rawPeer(port);
      try {
        // Windows large enough that only the socket, not flow control, holds the answers back.
        const settings = Buffer.alloc(6);
        settings.writeUInt16BE(0x4, 0);
        settings.writeUInt32BE(2 ** 31 - 1, 2);
        peer.send(rawFrame(FRAME.SETTINGS, 0, 0, settings), windowUpdate(0, 2 ** 31 - 1 - 65_535));
        await sleep(50);
        peer.socket.pause();
        const calls = 400;
        const sent = new Map<number, Buffer>();
        for (let i = 0; i < calls; i += 1) {
          const streamId = 1 + 2 * i;
          const body = message(i, 16_000, i % 251);
          sent.set(streamId, body);
          peer.send(
            rawFrame(FRAME.HEADERS, FLAG.END_HEADERS, streamId, grpcRequestBlock(ECHO)),
            rawFrame(FRAME.DATA, FLAG.END_STREAM, streamId, grpcFrame(body)),
          );
        }
        // 6.4 MB of answers, more than the loopback socket's buffers take while nothing reads them.
        await sleep(500);
        peer.socket.resume();
        await until(
          () => peer.frames.filter((frame) => frame.type === FRAME.HEADERS && frame.flags & FLAG.END_STREAM).length === calls,
          'every answer',
          20_000,
        );
        const answers = answersByStream(peer);
        const wrong = [...sent]
          .filter(([streamId, body]) => !answeredWith(answers.get(streamId)?.body, body))
          .map(([streamId]) => streamId);
        expect(wrong).toEqual([]);
      } finally {
        peer.destroy();
      }
    }, 30_000);
  });
});

function windowUpdate(streamId: number, increment: number): Buffer {
  const payload = Buffer.alloc(4);
  payload.writeUInt32BE(increment, 0);
  return rawFrame(FRAME.WINDOW_UPDATE, 0, streamId, payload);
}
