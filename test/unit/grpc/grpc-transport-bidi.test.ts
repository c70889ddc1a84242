import * as grpc from '@grpc/grpc-js';
import { prng } from '../../bench/traffic';
import { rawFrame as h2Frame } from '../../support/raw-h2-frames';
import * as http2 from 'node:http2';
import * as net from 'node:net';
import {
  frameMessage,
  GrpcServer,
  type BidiStreamingCall,
  type CallAbort,
  type GrpcServerSettings,
  type UnaryCall,
} from '../../../src/transport/grpc-server';
import { createLogger } from '../../../src/platform/logger';
import { connect, GRPC_HEADERS, grpcFrame, rawCall } from '../../support/raw-grpc';
import { sleep, until } from '../../support/waiting';

/**
 * Bidi-streaming calls on the gRPC transport (the shape of Envoy's
 * ext_proc Process): request messages handed over one by one however the
 * DATA frames cut them, half-close, client resets, the transport's own
 * refusals mid-stream, deadlines, REFUSED_STREAM, and what a drain (max age
 * or close()) does to a call that is still open. The official grpc-js
 * client where a real client shows it; raw node:http2 frames otherwise.
 */
const logger = createLogger('silent');
const BIDI = '/test.Echo/Bidi';

/** What the bidi test method saw of one call. */
interface Seen {
  call: BidiStreamingCall;
  messages: string[];
  halfClosed: number;
  aborted: CallAbort[];
  finished: number;
}

interface Started {
  server: GrpcServer;
  address: string;
  calls: Seen[];
  held: UnaryCall[];
  /** Set by a test: what the method does with each message (default: keep it). */
  onMessage?: (seen: Seen, message: Buffer) => void;
  /** Set by a test: refuse every new call. */
  refuseAll?: boolean;
}

async function start(settings: Partial<GrpcServerSettings> = {}): Promise<Started> {
  const server = new GrpcServer({ host: '127.0.0.1', port: 0, ...settings }, logger);
  const started: Started = { server, address: '', calls: [], held: [] };
  server.addMethod(BIDI, {
    kind: 'bidi-streaming',
    start(call) {
      const seen: Seen = { call, messages: [], halfClosed: 0, aborted: [], finished: 0 };
      started.calls.push(seen);
      call.onFinished(() => (seen.finished += 1));
      if (started.refuseAll) {
        call.refuse();
        return undefined;
      }
      return {
        message(message) {
          if (started.onMessage) started.onMessage(seen, message);
          else seen.messages.push(message.toString('utf8'));
        },
        halfClosed() {
          seen.halfClosed += 1;
        },
        aborted(reason) {
          seen.aborted.push(reason);
        },
      };
    },
  });
  server.addMethod('/test.Echo/Hold', { kind: 'unary', handle: (_message, call) => started.held.push(call) });
  server.addMethod('/test.Echo/Unary', { kind: 'unary', handle: (message, call) => call.respond(frameMessage(message)) });
  started.address = `127.0.0.1:${await server.listen()}`;
  return started;
}

/** A grpc-js client for the bidi method, raw bytes in and out. */
function bidiClient(address: string): { call(options?: grpc.CallOptions): grpc.ClientDuplexStream<Buffer, Buffer>; close(): void } {
  const identity = (value: Buffer) => value;
  const Client = grpc.makeGenericClientConstructor(
    {
      Bidi: {
        path: BIDI,
        requestStream: true,
        responseStream: true,
        requestSerialize: identity,
        requestDeserialize: identity,
        responseSerialize: identity,
        responseDeserialize: identity,
      },
    },
    'test.Echo',
  );
  const client = new Client(address, grpc.credentials.createInsecure()) as unknown as grpc.Client & {
    Bidi(metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<Buffer, Buffer>;
  };
  return { call: (options = {}) => client.Bidi(new grpc.Metadata(), options), close: () => client.close() };
}

function statusOf(call: grpc.ClientDuplexStream<Buffer, Buffer>): Promise<grpc.StatusObject> {
  call.on('data', () => undefined);
  call.on('error', () => undefined);
  return new Promise((resolve) => call.on('status', resolve));
}

/** A raw bidi stream: the test writes DATA when it wants; `answer` settles when the stream closes. */
function rawBidi(session: http2.ClientHttp2Session, headers: http2.OutgoingHttpHeaders = {}) {
  const stream = session.request({ ...GRPC_HEADERS, ':path': BIDI, ...headers }, { endStream: false });
  const answer = new Promise<{ headers: http2.IncomingHttpHeaders; trailers?: http2.IncomingHttpHeaders; rstCode: number }>((resolve) => {
    let responseHeaders: http2.IncomingHttpHeaders = {};
    let trailers: http2.IncomingHttpHeaders | undefined;
    stream.on('response', (h) => (responseHeaders = h));
    stream.on('trailers', (t: http2.IncomingHttpHeaders) => (trailers = t));
    stream.on('data', () => undefined);
    stream.on('error', () => undefined);
    stream.on('close', () => resolve({ headers: responseHeaders, ...(trailers ? { trailers } : {}), rstCode: stream.rstCode ?? 0 }));
  });
  return { stream, answer };
}

/** Writes each piece as its own DATA frame (the next only once node:http2 has sent the previous one). */
/** A unary call the handler holds is cut (no status) once the drained connection's grace period ends, long before 2 s. */
async function expectHeldUnaryCutAtGrace(s: Started, session: http2.ClientHttp2Session): Promise<void> {
  const started = Date.now();
  const answer = await rawCall(session, { path: '/test.Echo/Hold', body: [grpcFrame(Buffer.from('x'))] });
  expect(answer.grpcStatus).toBeUndefined();
  expect(Date.now() - started).toBeLessThan(2000);
  expect(s.held[0]!.finished).toBe(true);
}

async function writeFrames(stream: http2.ClientHttp2Stream, pieces: Buffer[]): Promise<void> {
  for (const piece of pieces) await new Promise<void>((resolve) => stream.write(piece, () => resolve()));
}

describe('bidi-streaming calls: messages', () => {
  let s: Started;
  beforeAll(async () => {
    s = await start();
  });
  afterAll(async () => {
    await s.server.close();
  });
  beforeEach(() => {
    s.calls.length = 0;
    s.onMessage = undefined;
  });

  it('hand over each of many messages from the official client, in order, before the client half-closes', async () => {
    const client = bidiClient(s.address);
    try {
      const call = client.call();
      const status = statusOf(call);
      const sent = Array.from({ length: 2000 }, (_, i) => `message ${i} ${'·'.repeat(i % 50)}`);
      for (const text of sent.slice(0, 1000)) call.write(Buffer.from(text));
      await until(() => s.calls[0]?.messages.length === 1000, 'the first thousand messages');
      expect(s.calls[0]!.halfClosed).toBe(0);
      for (const text of sent.slice(1000)) call.write(Buffer.from(text));
      call.end();
      await until(() => s.calls[0]!.halfClosed === 1, 'the half-close');
      const seen = s.calls[0]!;
      expect(seen.messages).toEqual(sent);
      // Half-closed, the call stays open until its handler ends it.
      expect(seen.call.finished).toBe(false);
      seen.call.write(frameMessage(Buffer.from('answer')));
      seen.call.end({ code: grpc.status.OK, details: '' });
      expect(await status).toMatchObject({ code: grpc.status.OK });
      expect(seen.aborted).toEqual([]);
      expect(seen.finished).toBe(1);
    } finally {
      client.close();
    }
  });

  it('reassemble messages cut anywhere across DATA frames, and split several messages sent in one frame', async () => {
    const session = connect(s.address);
    try {
      for (const seed of [1, 2, 3, 4, 5]) {
        s.calls.length = 0;
        const next = prng(seed);
        const sent = Array.from({ length: 40 }, (_, i) => `${seed}:${i}:${'x'.repeat(Math.floor(next() * 300))}`);
        const bytes = Buffer.concat(sent.map((text) => grpcFrame(Buffer.from(text))));
        // Pieces from 1 byte (inside a prefix) to many messages at once.
        const pieces: Buffer[] = [];
        for (let offset = 0; offset < bytes.length;) {
          const size = next() < 0.3 ? 1 + Math.floor(next() * 6) : 1 + Math.floor(next() * 2000);
          pieces.push(bytes.subarray(offset, offset + size));
          offset += size;
        }
        const { stream, answer } = rawBidi(session);
        await writeFrames(stream, pieces);
        stream.end();
        await until(() => s.calls[0]?.halfClosed === 1, 'the half-close');
        expect(s.calls[0]!.messages).toEqual(sent);
        s.calls[0]!.call.end({ code: 0, details: '' });
        expect((await answer).headers['grpc-status']).toBe('0');
      }
    } finally {
      session.close();
    }
  });

  it('stop at the handler’s own end: messages after it, in the same frame or later, are not handed over', async () => {
    s.onMessage = (seen, message) => {
      seen.messages.push(message.toString());
      if (message.toString() === 'last') seen.call.end({ code: grpc.status.OK, details: '' });
    };
    const session = connect(s.address);
    try {
      const { stream, answer } = rawBidi(session);
      stream.write(Buffer.concat(['a', 'b', 'last', 'ignored'].map((text) => grpcFrame(Buffer.from(text)))));
      const result = await answer;
      // Trailers-Only OK before the client's END_STREAM, then RST_STREAM(NO_ERROR): the rest is not read.
      expect(result.headers['grpc-status']).toBe('0');
      expect(result.rstCode).toBe(http2.constants.NGHTTP2_NO_ERROR);
      expect(s.calls[0]!.messages).toEqual(['a', 'b', 'last']);
      expect(s.calls[0]!.aborted).toEqual([]);
    } finally {
      session.close();
    }
  });

  it('tell the handler of a client reset mid-stream once (cancelled)', async () => {
    // node:http2's client (and grpc-js's cancel(), and Envoy's close()) half-closes before it resets: the handler
    // may see the half-close first, then the reset if it has not ended the call by then.
    const session = connect(s.address);
    try {
      const { stream } = rawBidi(session);
      stream.write(Buffer.concat([grpcFrame(Buffer.from('one')), grpcFrame(Buffer.from('two'))]));
      await until(() => s.calls[0]?.messages.length === 2, 'the messages');
      stream.close(http2.constants.NGHTTP2_CANCEL);
      await until(() => s.calls[0]!.finished === 1, 'the call to end');
      await sleep(20);
      expect(s.calls[0]!).toMatchObject({ messages: ['one', 'two'], aborted: ['cancelled'], finished: 1 });
      expect(s.calls[0]!.halfClosed).toBeLessThanOrEqual(1);
      const client = bidiClient(s.address);
      const call = client.call();
      const status = statusOf(call);
      call.write(Buffer.from('hello'));
      await until(() => s.calls[1]?.messages.length === 1, 'the official client’s message');
      call.cancel();
      expect(await status).toMatchObject({ code: grpc.status.CANCELLED });
      await until(() => s.calls[1]!.aborted.length === 1, 'the abort');
      expect(s.calls[1]!.aborted).toEqual(['cancelled']);
      client.close();
      // A lost connection is the same for every call on it.
      const other = connect(s.address);
      const open = rawBidi(other);
      open.stream.write(grpcFrame(Buffer.from('on a connection that dies')));
      await until(() => s.calls[2]?.messages.length === 1, 'the third call');
      other.destroy();
      await until(() => s.calls[2]!.finished === 1, 'the third call to end');
      expect(s.calls[2]!.aborted).toEqual(['cancelled']);
    } finally {
      session.close();
    }
  });

  it('tell the handler of a bare RST_STREAM (no half-close before it) as cancelled, even inside a message', async () => {
    // node:http2 ends a reset stream's readable side before it closes the stream; that end is no half-close.
    const socket = net.connect(Number(s.address.split(':')[1]), '127.0.0.1');
    socket.on('error', () => undefined);
    socket.on('data', () => undefined);
    await new Promise((resolve) => socket.once('connect', resolve));
    try {
      const headers = Buffer.concat(
        [
          [':method', 'POST'],
          [':scheme', 'http'],
          [':path', BIDI],
          [':authority', 'test'],
          ['content-type', 'application/grpc'],
          ['te', 'trailers'],
        ].map(([name, value]) =>
          Buffer.concat([Buffer.from([0, name!.length]), Buffer.from(name!), Buffer.from([value!.length]), Buffer.from(value!)]),
        ),
      );
      const message = Buffer.concat([grpcFrame(Buffer.from('whole')), grpcFrame(Buffer.from('cut off')).subarray(0, 8)]);
      socket.write(Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'));
      socket.write(h2Frame(4, 0, 0, Buffer.alloc(0)));
      socket.write(h2Frame(1, 4, 1, headers)); // HEADERS, END_HEADERS
      socket.write(h2Frame(0, 0, 1, message)); // DATA, no END_STREAM
      await until(() => s.calls[0]?.messages.length === 1, 'the whole message');
      const code = Buffer.alloc(4);
      code.writeUInt32BE(http2.constants.NGHTTP2_CANCEL);
      socket.write(h2Frame(3, 0, 1, code)); // RST_STREAM
      await until(() => s.calls[0]!.finished === 1, 'the call to end');
      expect(s.calls[0]!).toMatchObject({ messages: ['whole'], halfClosed: 0, aborted: ['cancelled'] });
    } finally {
      socket.destroy();
    }
  });

  it('keep the limits of single-message calls per message: too large, compressed, cut off, each ends the call (failed)', async () => {
    const small = await start({ maxReceiveMessageBytes: 100 });
    const session = connect(small.address);
    try {
      const cases: { body: Buffer[]; end: boolean; status: number; headers?: http2.OutgoingHttpHeaders }[] = [
        {
          body: [grpcFrame(Buffer.from('ok')), grpcFrame(Buffer.alloc(10), { length: 101 })],
          end: false,
          status: grpc.status.RESOURCE_EXHAUSTED,
        },
        { body: [grpcFrame(Buffer.from('ok')), grpcFrame(Buffer.from('x'), { flag: 1 })], end: false, status: grpc.status.INTERNAL },
        {
          body: [grpcFrame(Buffer.from('ok')), grpcFrame(Buffer.from('x'), { flag: 1 })],
          end: false,
          status: grpc.status.UNIMPLEMENTED,
          headers: { 'grpc-encoding': 'gzip' },
        },
        { body: [grpcFrame(Buffer.from('ok')), grpcFrame(Buffer.from('cut')).subarray(0, 6)], end: true, status: grpc.status.INTERNAL },
      ];
      for (const [index, testCase] of cases.entries()) {
        const answer = await rawCall(session, {
          path: BIDI,
          body: testCase.body,
          endStream: testCase.end,
          headers: testCase.headers ?? {},
        });
        expect([index, answer.grpcStatus, answer.trailersOnly]).toEqual([index, testCase.status, true]);
        expect(small.calls[index]).toMatchObject({ messages: ['ok'], aborted: ['failed'], finished: 1, halfClosed: 0 });
      }
      // A message at the limit passes.
      const { stream, answer } = rawBidi(session);
      stream.write(grpcFrame(Buffer.alloc(100, 0x61)));
      await until(() => small.calls[4]?.messages.length === 1, 'the message at the limit');
      small.calls[4]!.call.end({ code: 0, details: '' });
      expect((await answer).headers['grpc-status']).toBe('0');
    } finally {
      session.close();
      await small.server.close();
    }
  });

  it('answer a handler that throws INTERNAL and tell it (failed); the server goes on', async () => {
    s.onMessage = () => {
      throw new Error('handler bug');
    };
    const session = connect(s.address);
    try {
      const answer = await rawCall(session, { path: BIDI, body: [grpcFrame(Buffer.from('x'))], endStream: false });
      expect(answer.grpcStatus).toBe(grpc.status.INTERNAL);
      expect(s.calls[0]!.aborted).toEqual(['failed']);
      s.onMessage = undefined;
      expect((await rawCall(session, { path: '/test.Echo/Unary', body: [grpcFrame(Buffer.from('x'))] })).grpcStatus).toBe(0);
    } finally {
      session.close();
    }
  });

  it('end DEADLINE_EXCEEDED at grpc-timeout, telling the handler (deadline)', async () => {
    // Raw frames: the official client cancels at its own deadline, racing the server's.
    const session = connect(s.address);
    try {
      const started = Date.now();
      const answer = await rawCall(session, {
        path: BIDI,
        headers: { 'grpc-timeout': '200m' },
        body: [grpcFrame(Buffer.from('x'))],
        endStream: false,
      });
      expect(Date.now() - started).toBeGreaterThanOrEqual(195);
      expect(answer.grpcStatus).toBe(grpc.status.DEADLINE_EXCEEDED);
      expect(s.calls[0]).toMatchObject({ messages: ['x'], aborted: ['deadline'], finished: 1 });
    } finally {
      session.close();
    }
  });
});

describe('bidi-streaming calls: early end', () => {
  it('a call its handler ends before the client half-closed is reset NO_ERROR after its trailers, and no longer counts as open', async () => {
    const s = await start({ maxConcurrentStreams: 1 });
    s.onMessage = (seen, message) => {
      seen.call.write(frameMessage(message));
      seen.call.end({ code: 0, details: '' });
    };
    const session = connect(s.address);
    try {
      const { stream, answer } = rawBidi(session);
      stream.write(grpcFrame(Buffer.from('the only one')));
      const closed = await Promise.race([answer, sleep(2000).then(() => 'still open' as const)]);
      expect(closed).toMatchObject({ trailers: { 'grpc-status': '0' }, rstCode: http2.constants.NGHTTP2_NO_ERROR });
      // Its place under SETTINGS_MAX_CONCURRENT_STREAMS (1) is free: the next call is served.
      expect((await rawCall(session, { path: '/test.Echo/Unary', body: [grpcFrame(Buffer.from('x'))] })).grpcStatus).toBe(0);
    } finally {
      session.destroy();
      await s.server.close();
    }
  });
});

describe('bidi-streaming calls: refusal', () => {
  it('refuse() resets the stream REFUSED_STREAM, which the official client reports UNAVAILABLE', async () => {
    const s = await start();
    s.refuseAll = true;
    const session = connect(s.address);
    const client = bidiClient(s.address);
    try {
      const { stream, answer } = rawBidi(session);
      stream.write(grpcFrame(Buffer.from('x')));
      const result = await answer;
      expect(result.rstCode).toBe(http2.constants.NGHTTP2_REFUSED_STREAM);
      expect(result.headers[':status']).toBeUndefined();
      const call = client.call();
      const status = statusOf(call);
      call.write(Buffer.from('x'));
      call.end();
      expect(await status).toMatchObject({ code: grpc.status.UNAVAILABLE });
      expect(s.calls.every((seen) => seen.finished === 1 && seen.aborted.length === 0)).toBe(true);
      // The connection itself goes on.
      expect((await rawCall(session, { path: '/test.Echo/Unary', body: [grpcFrame(Buffer.from('x'))] })).grpcStatus).toBe(0);
    } finally {
      client.close();
      session.close();
      await s.server.close();
    }
  });
});

describe('bidi-streaming calls: drains', () => {
  it('close(): an open call goes on after GOAWAY (messages, half-close), and close() resolves when it ends', async () => {
    const s = await start({ shutdownTimeoutMs: 5000 });
    const session = connect(s.address);
    let goaway = false;
    session.on('goaway', () => (goaway = true));
    try {
      const { stream, answer } = rawBidi(session);
      stream.write(grpcFrame(Buffer.from('before')));
      await until(() => s.calls[0]?.messages.length === 1, 'the first message');
      let closed = false;
      const closing = s.server.close().then(() => (closed = true));
      await until(() => goaway, 'GOAWAY');
      stream.write(grpcFrame(Buffer.from('after GOAWAY')));
      stream.end();
      await until(() => s.calls[0]!.halfClosed === 1, 'the half-close');
      expect(s.calls[0]!.messages).toEqual(['before', 'after GOAWAY']);
      expect(closed).toBe(false);
      s.calls[0]!.call.end({ code: 0, details: '' });
      expect((await answer).headers['grpc-status']).toBe('0');
      await closing;
      expect(s.calls[0]!.aborted).toEqual([]);
    } finally {
      session.destroy();
    }
  });

  it('close(): a call still open at shutdownTimeoutMs ends UNAVAILABLE and its handler is told (shutdown) before close() resolves', async () => {
    const s = await start({ shutdownTimeoutMs: 300 });
    const client = bidiClient(s.address);
    try {
      const call = client.call();
      const status = statusOf(call);
      call.write(Buffer.from('streaming'));
      await until(() => s.calls[0]?.messages.length === 1, 'the message');
      const started = Date.now();
      await s.server.close();
      expect(Date.now() - started).toBeGreaterThanOrEqual(290);
      expect(s.calls[0]!.aborted).toEqual(['shutdown']);
      expect(s.calls[0]!.finished).toBe(1);
      expect((await status).code).toBe(grpc.status.UNAVAILABLE);
    } finally {
      client.close();
    }
  });

  it('max age: a connection with a bidi call open outlives the grace period until the call ends, at most maxStreamingCallDrainMs', async () => {
    const s = await start({ maxConnectionAgeMs: 100, maxConnectionAgeGraceMs: 200, maxStreamingCallDrainMs: 1500 });
    const session = connect(s.address);
    let goawayAt = 0;
    session.on('goaway', () => (goawayAt ||= Date.now()));
    try {
      // Ends with its handler, long after the grace period.
      const first = rawBidi(session);
      first.stream.write(grpcFrame(Buffer.from('one')));
      await until(() => goawayAt > 0 && s.calls.length === 1, 'GOAWAY');
      await sleep(500);
      first.stream.write(grpcFrame(Buffer.from('still metered')));
      await until(() => s.calls[0]!.messages.length === 2, 'the message after the grace period');
      s.calls[0]!.call.end({ code: 0, details: '' });
      expect((await first.answer).headers['grpc-status']).toBe('0');
      await until(() => s.server.connectionCount === 0, 'the drained connection to close');
    } finally {
      session.destroy();
    }
    // One that never ends is cut at maxStreamingCallDrainMs (the connection is destroyed: cancelled).
    const second = connect(s.address);
    try {
      let drainAt = 0;
      second.on('goaway', () => (drainAt ||= Date.now()));
      const { stream, answer } = rawBidi(second);
      stream.write(grpcFrame(Buffer.from('never ends')));
      await answer;
      const cutAfter = Date.now() - drainAt;
      expect(cutAfter).toBeGreaterThanOrEqual(1400);
      expect(cutAfter).toBeLessThan(3000);
      expect(s.calls[1]!.aborted).toEqual(['cancelled']);
    } finally {
      second.destroy();
      await s.server.close();
    }
  });

  it('max age: a refused call (closed before its handler returned) does not hold a drained connection past the grace period', async () => {
    const s = await start({ maxConnectionAgeMs: 400, maxConnectionAgeGraceMs: 300, maxStreamingCallDrainMs: 5000 });
    s.refuseAll = true;
    const session = connect(s.address);
    try {
      const refused = rawBidi(session);
      refused.stream.write(grpcFrame(Buffer.from('x')));
      expect((await refused.answer).rstCode).toBe(http2.constants.NGHTTP2_REFUSED_STREAM);
      await expectHeldUnaryCutAtGrace(s, session);
    } finally {
      session.destroy();
      await s.server.close();
    }
  });

  it('max age: a connection with only unary calls is still destroyed at the grace period', async () => {
    const s = await start({ maxConnectionAgeMs: 100, maxConnectionAgeGraceMs: 300, maxStreamingCallDrainMs: 5000 });
    const session = connect(s.address);
    try {
      await expectHeldUnaryCutAtGrace(s, session);
    } finally {
      session.destroy();
      await s.server.close();
    }
  });
});
