import * as grpc from '@grpc/grpc-js';
import * as http2 from 'node:http2';
import {
  frameMessage,
  GrpcServer,
  type GrpcServerSettings,
  type ServerStreamingCall,
  type UnaryCall,
} from '../../../src/transport/grpc-server';
import { createLogger } from '../../../src/platform/logger';
import { prng } from '../../bench/traffic';
import { connect, grpcFrame, messagesOf, rawCall } from '../../support/raw-grpc';
import { FLAG, FRAME, grpcRequestBlock, literalBlock, rawFrame, rawPeer, type RawPeer } from '../../support/raw-h2-frames';
import { hpackString } from '../../support/hpack-encoding';
import { sleep, until } from '../../support/waiting';

/**
 * The HTTP/2 layer the gRPC transport is written on (src/transport/http2/):
 * what node:http2 used to do for it. Real clients (node:http2's, which is
 * nghttp2, and grpc-js) where they can show a behaviour — padding, small
 * windows, CONTINUATION, a zero-size header table — and frames written by
 * hand where only a broken or hostile peer would send them.
 */
const logger = createLogger('silent');

interface Started {
  server: GrpcServer;
  port: number;
  address: string;
  held: UnaryCall[];
}

async function start(settings: Partial<GrpcServerSettings> = {}, serverLogger = logger): Promise<Started> {
  const server = new GrpcServer({ host: '127.0.0.1', port: 0, ...settings }, serverLogger);
  const held: UnaryCall[] = [];
  server.addMethod('/test.Echo/Unary', { kind: 'unary', handle: (message, call) => call.respond(frameMessage(message)) });
  server.addMethod('/test.Echo/Hold', { kind: 'unary', handle: (_message, call) => held.push(call) });
  server.addMethod('/test.Echo/Fail', {
    kind: 'unary',
    handle: (message, call) => call.fail({ code: grpc.status.FAILED_PRECONDITION, details: message.toString('latin1') }),
  });
  server.addMethod('/test.Echo/Stream', {
    kind: 'server-streaming',
    // The request says how many messages of how many bytes: "count:bytes".
    handle: (message, call: ServerStreamingCall) => {
      const [count, bytes] = message.toString().split(':').map(Number);
      for (let i = 0; i < count!; i += 1) call.write(frameMessage(Buffer.alloc(bytes!, 97 + (i % 26))));
      call.end({ code: 0, details: '' });
    },
  });
  const port = await server.listen();
  return { server, port, address: `127.0.0.1:${port}`, held };
}

describe('with real clients', () => {
  let s: Started;
  beforeAll(async () => {
    s = await start({ maxHeaderListBytes: 100_000 });
  });
  afterAll(async () => {
    await s.server.close();
  });

  it('strips padding from HEADERS and DATA (node:http2 padding every frame to the maximum)', async () => {
    const session = connect(s.address, { paddingStrategy: http2.constants.PADDING_STRATEGY_MAX });
    try {
      const answer = await rawCall(session, { path: '/test.Echo/Unary', body: [grpcFrame(Buffer.from('padded'))] });
      expect(answer.grpcStatus).toBe(0);
      expect(messagesOf(answer.data).map(String)).toEqual(['padded']);
    } finally {
      session.close();
    }
  });

  it('holds DATA back to a client’s small stream window and sends the rest as it grants more', async () => {
    const session = connect(s.address, { settings: { initialWindowSize: 100 } });
    try {
      const answer = await rawCall(session, { path: '/test.Echo/Stream', body: [grpcFrame(Buffer.from('20:1000'))] });
      expect(answer.grpcStatus).toBe(0);
      const messages = messagesOf(answer.data);
      expect(messages).toHaveLength(20);
      messages.forEach((message, i) => expect(message.equals(Buffer.alloc(1000, 97 + (i % 26)))).toBe(true));
    } finally {
      session.close();
    }
  });

  it('holds DATA back to the connection window (65,535 until the client raises it) across streams', async () => {
    const session = connect(s.address);
    try {
      // Three answers of 100 KB each: three times the connection's initial window.
      const answers = await Promise.all(
        [0, 1, 2].map(() => rawCall(session, { path: '/test.Echo/Stream', body: [grpcFrame(Buffer.from('4:25000'))] })),
      );
      for (const answer of answers) {
        expect(answer.grpcStatus).toBe(0);
        expect(messagesOf(answer.data).map((m) => m.length)).toEqual([25000, 25000, 25000, 25000]);
      }
    } finally {
      session.close();
    }
  });

  it('grants window back as it reads: a 3 MiB request (three times its stream window) from grpc-js', async () => {
    const identity = (value: Buffer) => value;
    const Client = grpc.makeGenericClientConstructor(
      {
        Unary: {
          path: '/test.Echo/Unary',
          requestStream: false,
          responseStream: false,
          requestSerialize: identity,
          requestDeserialize: identity,
          responseSerialize: identity,
          responseDeserialize: identity,
        },
      },
      'test.Echo',
    );
    const client = new Client(s.address, grpc.credentials.createInsecure()) as unknown as {
      Unary(request: Buffer, callback: (error: grpc.ServiceError | null, response?: Buffer) => void): void;
      close(): void;
    };
    try {
      const request = Buffer.alloc(3 * 1024 * 1024);
      for (let i = 0; i < request.length; i += 1) request[i] = i % 251;
      const response = await new Promise<Buffer>((resolve, reject) => client.Unary(request, (e, r) => (e ? reject(e) : resolve(r!))));
      expect(response.equals(request)).toBe(true);
    } finally {
      client.close();
    }
  });

  it('reads request headers split into HEADERS and CONTINUATION frames', async () => {
    const session = connect(s.address);
    try {
      // Above the 16,384-byte frame size even Huffman-coded: random hex is 4 bits a character at best.
      const big = Array.from({ length: 50_000 }, (_, i) => '0123456789abcdef'[(i * 7919) % 16]).join('');
      const answer = await rawCall(session, { path: '/test.Echo/Unary', headers: { 'x-big': big }, body: [grpcFrame(Buffer.from('c'))] });
      expect(answer.grpcStatus).toBe(0);
      expect(messagesOf(answer.data).map(String)).toEqual(['c']);
    } finally {
      session.close();
    }
  });

  it('writes a status longer than a frame as HEADERS and CONTINUATION', async () => {
    const session = connect(s.address, { maxHeaderListSize: 200_000 } as http2.ClientSessionOptions);
    try {
      const details = 'd'.repeat(40_000);
      const answer = await rawCall(session, { path: '/test.Echo/Fail', body: [grpcFrame(Buffer.from(details))] });
      expect(answer.grpcStatus).toBe(grpc.status.FAILED_PRECONDITION);
      expect(answer.grpcMessage).toBe(details);
    } finally {
      session.close();
    }
  });

  it('answers a client that allows no header table (SETTINGS_HEADER_TABLE_SIZE 0), many times over', async () => {
    const session = connect(s.address, { settings: { headerTableSize: 0 } });
    try {
      for (let i = 0; i < 20; i += 1) {
        const answer = await rawCall(session, { path: '/test.Echo/Unary', body: [grpcFrame(Buffer.from(`n${i}`))] });
        expect(answer.grpcStatus).toBe(0);
        expect(messagesOf(answer.data).map(String)).toEqual([`n${i}`]);
      }
    } finally {
      session.close();
    }
  });

  it('decodes headers the client indexes in its HPACK table across many calls on one connection', async () => {
    const session = connect(s.address);
    try {
      for (let i = 0; i < 200; i += 1) {
        const answer = await rawCall(session, {
          path: '/test.Echo/Unary',
          headers: { 'x-same': 'always the same', 'x-varies': `value ${i % 7}`, 'grpc-timeout': '5S' },
          body: [grpcFrame(Buffer.from(String(i)))],
        });
        expect(messagesOf(answer.data).map(String)).toEqual([String(i)]);
      }
    } finally {
      session.close();
    }
  });

  it('closes the connection after the client’s GOAWAY once its calls in flight are answered', async () => {
    const session = connect(s.address);
    try {
      const held = rawCall(session, { path: '/test.Echo/Hold', body: [grpcFrame(Buffer.from('h'))] });
      await until(() => s.held.length === 1, 'the call to be held');
      session.goaway(http2.constants.NGHTTP2_NO_ERROR, 0);
      await sleep(50);
      expect(s.server.connectionCount).toBe(1);
      s.held.pop()!.respond(frameMessage(Buffer.from('late')));
      expect(messagesOf((await held).data).map(String)).toEqual(['late']);
      await until(() => s.server.connectionCount === 0, 'the connection to close');
    } finally {
      session.destroy();
    }
  });
});

describe('with frames written by hand', () => {
  let s: Started;
  let peer: RawPeer;
  beforeAll(async () => {
    s = await start({ maxConcurrentStreams: 2 });
  });
  afterAll(async () => {
    await s.server.close();
  });
  beforeEach(async () => {
    peer = await rawPeer(s.port);
  });
  afterEach(() => peer.destroy());

  const headers = (streamId: number, path = '/test.Echo/Unary', flags: number = FLAG.END_HEADERS) =>
    rawFrame(FRAME.HEADERS, flags, streamId, grpcRequestBlock(path));
  const message = (streamId: number, text: string) => rawFrame(FRAME.DATA, FLAG.END_STREAM, streamId, grpcFrame(Buffer.from(text)));

  async function expectGoaway(code: number): Promise<void> {
    await until(() => peer.goaway() !== undefined, 'GOAWAY');
    expect(peer.goaway()!.code).toBe(code);
    await peer.closed;
  }

  it('sends its SETTINGS first: stream limit, window and header list size', async () => {
    await until(() => peer.frames.length > 0, 'SETTINGS');
    const settings = peer.frames[0]!;
    expect(settings.type).toBe(FRAME.SETTINGS);
    const values = new Map<number, number>();
    for (let at = 0; at < settings.payload.length; at += 6)
      values.set(settings.payload.readUInt16BE(at), settings.payload.readUInt32BE(at + 2));
    expect(values.get(0x3)).toBe(2);
    expect(values.get(0x6)).toBe(16 * 1024);
    expect(values.get(0x4)).toBeGreaterThanOrEqual(65_535);
  });

  it('answers the calls settled in one turn of the event loop in one socket write', async () => {
    const s2 = await start({ maxConcurrentStreams: 100 });
    const many = await rawPeer(s2.port);
    try {
      await until(() => many.frames.length > 0, 'SETTINGS');
      for (let id = 1; id <= 19; id += 2) many.send(headers(id, '/test.Echo/Hold'), message(id, 'x'));
      await until(() => s2.held.length === 10, 'ten held calls');
      const before = many.frames.length;
      for (const call of s2.held.splice(0)) call.respond(frameMessage(Buffer.from('answer')));
      await until(() => many.frames.filter((f) => f.type === FRAME.HEADERS && f.flags & FLAG.END_STREAM).length === 10, 'ten answers');
      const answerFrames = many.frames.slice(before);
      expect(answerFrames).toHaveLength(30);
      expect(new Set(answerFrames.map((f) => f.read)).size).toBe(1);
    } finally {
      many.destroy();
      await s2.server.close();
    }
  });

  it('refuses a stream beyond SETTINGS_MAX_CONCURRENT_STREAMS with REFUSED_STREAM and serves the others', async () => {
    peer.send(headers(1, '/test.Echo/Hold'), message(1, 'a'), headers(3, '/test.Echo/Hold'), message(3, 'b'));
    peer.send(headers(5), message(5, 'c'));
    await until(() => peer.frames.some((f) => f.type === FRAME.RST_STREAM && f.streamId === 5), 'RST_STREAM on stream 5');
    const reset = peer.frames.find((f) => f.type === FRAME.RST_STREAM && f.streamId === 5)!;
    expect(reset.payload.readUInt32BE(0)).toBe(http2.constants.NGHTTP2_REFUSED_STREAM);
    for (const call of s.held.splice(0)) call.respond(frameMessage(Buffer.from('ok')));
    await until(() => peer.frames.filter((f) => f.type === FRAME.HEADERS && f.flags & FLAG.END_STREAM).length === 2, 'two answers');
    peer.send(headers(7), message(7, 'd'));
    await until(() => peer.frames.some((f) => f.type === FRAME.DATA && f.streamId === 7), 'the answer on stream 7');
  });

  it('drops DATA for a stream it has reset, and serves the next stream', async () => {
    // An unknown method is answered Trailers-Only and reset before its DATA arrives.
    peer.send(headers(1, '/test.Echo/Nope'));
    await until(() => peer.frames.some((f) => f.type === FRAME.RST_STREAM && f.streamId === 1), 'RST_STREAM(NO_ERROR)');
    peer.send(message(1, 'late'), headers(3), message(3, 'next'));
    await until(() => peer.frames.some((f) => f.type === FRAME.DATA && f.streamId === 3), 'the answer on stream 3');
    expect(peer.goaway()).toBeUndefined();
  });

  const trailersOf = (streamId: number) =>
    rawFrame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, streamId, literalBlock([['x-end', '1']]));
  const resetsOf = (streamId: number) =>
    peer.frames.filter((f) => f.type === FRAME.RST_STREAM && f.streamId === streamId).map((f) => f.payload.readUInt32BE(0));
  /** Sends a new stream's call and waits for its answer: every frame sent before it has been read by then. */
  async function servedNext(streamId: number): Promise<void> {
    peer.send(headers(streamId), message(streamId, 'next'));
    await until(() => peer.frames.some((f) => f.type === FRAME.DATA && f.streamId === streamId), `the answer on stream ${streamId}`);
  }
  /** A unary call answered, both sides' END_STREAM sent: stream `streamId` is closed. */
  async function completedCall(streamId: number): Promise<void> {
    peer.send(headers(streamId), message(streamId, 'done'));
    await until(
      () => peer.frames.some((f) => f.type === FRAME.HEADERS && f.streamId === streamId && f.flags & FLAG.END_STREAM),
      'trailers',
    );
  }
  const { NGHTTP2_STREAM_CLOSED, NGHTTP2_PROTOCOL_ERROR, NGHTTP2_CANCEL, NGHTTP2_NO_ERROR } = http2.constants;

  it('answers DATA after the client’s own RST_STREAM with RST_STREAM(STREAM_CLOSED), once, not the connection (RFC 9113 §5.1)', async () => {
    peer.send(headers(1, '/test.Echo/Hold'), rawFrame(FRAME.RST_STREAM, 0, 1, Buffer.from([0, 0, 0, NGHTTP2_CANCEL])));
    peer.send(message(1, 'late'), message(1, 'later'));
    await servedNext(3);
    expect(resetsOf(1)).toEqual([NGHTTP2_STREAM_CLOSED]);
    expect(peer.goaway()).toBeUndefined();
  });

  it('answers HEADERS after the client’s own RST_STREAM with RST_STREAM(STREAM_CLOSED) (RFC 9113 §5.1)', async () => {
    peer.send(headers(1, '/test.Echo/Hold'), rawFrame(FRAME.RST_STREAM, 0, 1, Buffer.from([0, 0, 0, NGHTTP2_CANCEL])));
    peer.send(headers(1, '/test.Echo/Hold', FLAG.END_HEADERS | FLAG.END_STREAM));
    await servedNext(3);
    expect(resetsOf(1)).toEqual([NGHTTP2_STREAM_CLOSED]);
    expect(peer.goaway()).toBeUndefined();
  });

  it('answers DATA on a stream both sides ended with RST_STREAM(STREAM_CLOSED) (RFC 9113 §6.1)', async () => {
    await completedCall(1);
    peer.send(message(1, 'after its end'));
    await servedNext(3);
    expect(resetsOf(1)).toEqual([NGHTTP2_STREAM_CLOSED]);
    expect(peer.goaway()).toBeUndefined();
  });

  it('ends the connection with GOAWAY(STREAM_CLOSED) on HEADERS for a stream both sides ended (RFC 9113 §5.1)', async () => {
    await completedCall(1);
    peer.send(headers(1, '/test.Echo/Unary', FLAG.END_HEADERS | FLAG.END_STREAM));
    await expectGoaway(NGHTTP2_STREAM_CLOSED);
  });

  it('ends the connection with GOAWAY(PROTOCOL_ERROR) on HEADERS opening a stream below one already opened (RFC 9113 §5.1.1)', async () => {
    await completedCall(5);
    peer.send(headers(3), message(3, 'too late'));
    await expectGoaway(NGHTTP2_PROTOCOL_ERROR);
  });

  it('drops the client’s frames in flight on every stream it closed first, and a RST_STREAM(CANCEL) after an answer', async () => {
    // Stream 1: answered before the client's END_STREAM (Trailers-Only, then RST_STREAM(NO_ERROR)); its body and
    // trailers were on their way. Stream 3: answered, then cancelled by the client as Envoy does. Stream 5: reset PROTOCOL_ERROR (malformed: two :path).
    peer.send(headers(1, '/test.Echo/Nope'));
    await until(() => resetsOf(1).length === 1, 'RST_STREAM(NO_ERROR) after the early answer');
    await completedCall(3);
    peer.send(rawFrame(FRAME.HEADERS, FLAG.END_HEADERS, 5, request([3, ':path', '/test.Echo/Hold'])));
    await until(() => resetsOf(5).length === 1, 'RST_STREAM(PROTOCOL_ERROR)');
    peer.send(rawFrame(FRAME.DATA, 0, 1, grpcFrame(Buffer.from('body'))), trailersOf(1));
    peer.send(
      rawFrame(FRAME.RST_STREAM, 0, 3, Buffer.from([0, 0, 0, NGHTTP2_CANCEL])),
      rawFrame(FRAME.WINDOW_UPDATE, 0, 3, Buffer.from([0, 0, 1, 0])),
    );
    peer.send(message(5, 'body'), trailersOf(5));
    await servedNext(7);
    expect([resetsOf(1), resetsOf(3), resetsOf(5)]).toEqual([[NGHTTP2_NO_ERROR], [], [NGHTTP2_PROTOCOL_ERROR]]);
    expect(peer.goaway()).toBeUndefined();
  });

  it('forgets a stream 512 streams back: frames on it are dropped, as frames in flight, with no error', async () => {
    await completedCall(1);
    // The client's next stream is 1,029 (the ids between are skipped): streams 1 and 3 leave the record's window.
    await servedNext(1029);
    peer.send(message(1, 'long after'), headers(3), message(3, 'skipped long ago'));
    await servedNext(1031);
    expect(resetsOf(1)).toEqual([]);
    expect(resetsOf(3)).toEqual([]);
    expect(peer.goaway()).toBeUndefined();
  });

  it('reads a request whose frames arrive a byte at a time', async () => {
    // After the server's SETTINGS: this peer ACKs them on its own, and the ACK must not land inside the trickled frames.
    await until(() => peer.frames.some((f) => f.type === FRAME.SETTINGS && (f.flags & FLAG.ACK) === 0), 'SETTINGS');
    const bytes = Buffer.concat([headers(1), message(1, 'trickled')]);
    for (const byte of bytes) {
      peer.send(Buffer.from([byte]));
      await new Promise((resolve) => setImmediate(resolve));
    }
    await until(() => peer.frames.some((f) => f.type === FRAME.DATA && f.streamId === 1), 'the answer');
    const data = peer.frames.find((f) => f.type === FRAME.DATA && f.streamId === 1)!.payload;
    expect(messagesOf(data).map(String)).toEqual(['trickled']);
  });

  it('answers every request of a peer that reads its answers only much later, without closing it', async () => {
    // Requests for an unknown method: each is answered at once, Trailers-Only, and that HEADERS frame is not flow
    // controlled, so only the socket's backpressure bounds what waits for a peer that does not read. (PING and SETTINGS
    // floods, whose ACKs are not flow controlled either, are closed by their attack budget instead.)
    peer.socket.pause();
    const perChunk = 1 << 13;
    const chunks = 32;
    let id = 1;
    for (let c = 0; c < chunks; c += 1) {
      const frames: Buffer[] = [];
      for (let i = 0; i < perChunk; i += 1, id += 2) {
        frames.push(rawFrame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, id, grpcRequestBlock('/test.Echo/Nope')));
      }
      peer.socket.write(Buffer.concat(frames));
    }
    await sleep(1000);
    // The kernel's buffers on both sides hold a few MB; the rest waits in this client, unread by the server.
    expect(peer.socket.writableLength).toBeGreaterThan(4 * 1024 * 1024);
    peer.socket.resume();
    await until(() => peer.socket.writableLength === 0, 'the server to read everything', 20_000);
    const lastId = id - 2;
    await until(() => peer.frames.some((f) => f.type === FRAME.HEADERS && f.streamId === lastId), 'the last answer', 20_000);
    expect(peer.frames.filter((f) => f.type === FRAME.HEADERS).length).toBe(chunks * perChunk);
    expect(peer.goaway()).toBeUndefined();
  }, 45_000);

  it('ignores frames of unknown types and PRIORITY frames', async () => {
    peer.send(rawFrame(0xfa, 0, 0, Buffer.from('whatever')), rawFrame(FRAME.PRIORITY, 0, 1, Buffer.alloc(5)));
    peer.send(headers(1), message(1, 'fine'));
    await until(() => peer.frames.some((f) => f.type === FRAME.DATA && f.streamId === 1), 'the answer');
    expect(peer.goaway()).toBeUndefined();
  });

  it('reads HEADERS with PRIORITY and PADDED flags', async () => {
    const block = grpcRequestBlock('/test.Echo/Unary');
    const payload = Buffer.concat([Buffer.from([3]), Buffer.alloc(5), block, Buffer.alloc(3)]);
    peer.send(rawFrame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.PADDED | FLAG.PRIORITY, 1, payload), message(1, 'p'));
    await until(() => peer.frames.some((f) => f.type === FRAME.DATA && f.streamId === 1), 'the answer');
  });

  it('resets a stream whose request lacks :path or :scheme with PROTOCOL_ERROR, not the connection', async () => {
    const block = literalBlock([
      [':method', 'POST'],
      [':path', '/test.Echo/Unary'],
      ['content-type', 'application/grpc'],
    ]);
    peer.send(rawFrame(FRAME.HEADERS, FLAG.END_HEADERS, 1, block));
    await until(() => peer.frames.some((f) => f.type === FRAME.RST_STREAM && f.streamId === 1), 'RST_STREAM');
    expect(peer.frames.find((f) => f.type === FRAME.RST_STREAM)!.payload.readUInt32BE(0)).toBe(http2.constants.NGHTTP2_PROTOCOL_ERROR);
    peer.send(headers(3), message(3, 'next'));
    await until(() => peer.frames.some((f) => f.type === FRAME.DATA && f.streamId === 3), 'the answer on stream 3');
  });

  const request = (...extra: [number, string, string][]) => {
    const fields: [string, string][] = [
      [':method', 'POST'],
      [':scheme', 'http'],
      [':path', '/test.Echo/Unary'],
      ['content-type', 'application/grpc'],
      ['te', 'trailers'],
    ];
    for (const [at, name, value] of extra) fields.splice(at, 0, [name, value]);
    return literalBlock(fields);
  };
  const withContentLength = (value: string, streamId = 1, flags: number = FLAG.END_HEADERS) =>
    rawFrame(FRAME.HEADERS, flags, streamId, request([5, 'content-length', value]));
  /** DATA of one gRPC message of `text`: 5 + its length bytes. */
  const body = (text: string, flags = 0) => rawFrame(FRAME.DATA, flags, 1, grpcFrame(Buffer.from(text)));
  const malformed: [string, () => Buffer[]][] = [
    [
      'te other than "trailers"',
      () => [rawFrame(FRAME.HEADERS, FLAG.END_HEADERS, 1, request([5, 'te', 'trailers, deflate'])), message(1, 'm')],
    ],
    ['a body longer than its content-length', () => [withContentLength('1'), body('test', FLAG.END_STREAM)]],
    ['a body over its content-length by its second DATA', () => [withContentLength('10'), body('test'), body('test', FLAG.END_STREAM)]],
    ['a body shorter than its content-length', () => [withContentLength('20'), body('test'), body('test', FLAG.END_STREAM)]],
    ['trailers ending a body shorter than its content-length', () => [withContentLength('20'), body('test'), trailersOf(1)]],
    ['a content-length on a request without a body', () => [withContentLength('9', 1, FLAG.END_HEADERS | FLAG.END_STREAM)]],
    ['a content-length that is not a number', () => [withContentLength('nine'), body('test', FLAG.END_STREAM)]],
    ['a negative content-length', () => [withContentLength('-9'), body('test', FLAG.END_STREAM)]],
    [
      'two content-length fields',
      () => [
        rawFrame(FRAME.HEADERS, FLAG.END_HEADERS, 1, request([5, 'content-length', '9'], [5, 'content-length', '9'])),
        body('test', FLAG.END_STREAM),
      ],
    ],
    ['a second :path', () => [rawFrame(FRAME.HEADERS, FLAG.END_HEADERS, 1, request([3, ':path', '/test.Echo/Hold'])), message(1, 'm')]],
    ['an unknown pseudo-header', () => [rawFrame(FRAME.HEADERS, FLAG.END_HEADERS, 1, request([0, ':protocol', 'x'])), message(1, 'm')]],
    [
      'a response pseudo-header (:status)',
      () => [rawFrame(FRAME.HEADERS, FLAG.END_HEADERS, 1, request([0, ':status', '200'])), message(1, 'm')],
    ],
    [
      'a pseudo-header after a regular field',
      () => [rawFrame(FRAME.HEADERS, FLAG.END_HEADERS, 1, request([5, ':authority', 'late'])), message(1, 'm')],
    ],
    [
      'an empty :path',
      () => [
        rawFrame(
          FRAME.HEADERS,
          FLAG.END_HEADERS,
          1,
          literalBlock([
            [':method', 'POST'],
            [':scheme', 'http'],
            [':path', ''],
            ['content-type', 'application/grpc'],
            ['te', 'trailers'],
          ]),
        ),
        message(1, 'm'),
      ],
    ],
    [
      'trailers with a pseudo-header',
      () => [
        headers(1),
        rawFrame(FRAME.DATA, 0, 1, grpcFrame(Buffer.from('m'))),
        rawFrame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 1, literalBlock([[':path', '/test.Echo/Hold']])),
      ],
    ],
  ];
  /** The requests are reset PROTOCOL_ERROR, none answered, and the connection serves the stream after the last. */
  async function expectResetNotConnection(sent: Buffer[]): Promise<void> {
    peer.send(...sent);
    const last = sent[sent.length - 1]!.readUInt32BE(5) & 0x7fffffff;
    const resets = () => peer.frames.filter((f) => f.type === FRAME.RST_STREAM);
    await until(() => resets().some((f) => f.streamId === last), 'RST_STREAM', 1000);
    for (const reset of resets()) expect(reset.payload.readUInt32BE(0)).toBe(http2.constants.NGHTTP2_PROTOCOL_ERROR);
    expect(peer.frames.some((f) => f.type === FRAME.DATA)).toBe(false);
    const next = last + 2;
    peer.send(headers(next), message(next, 'next'));
    await until(() => peer.frames.some((f) => f.type === FRAME.DATA && f.streamId === next), `the answer on stream ${next}`);
  }
  it.each(malformed)('resets a malformed request, %s, with PROTOCOL_ERROR (RFC 9113 §8.3), not the connection', async (_what, frames) => {
    await expectResetNotConnection(frames());
  });

  it('serves a request whose body matches its content-length, padding aside (RFC 9113 §8.1.1)', async () => {
    const padded = Buffer.concat([Buffer.from([4]), grpcFrame(Buffer.from('exact')), Buffer.alloc(4)]);
    peer.send(withContentLength('10'), rawFrame(FRAME.DATA, FLAG.END_STREAM | FLAG.PADDED, 1, padded));
    await until(() => peer.frames.some((f) => f.type === FRAME.DATA && f.streamId === 1), 'the answer');
    expect(messagesOf(peer.frames.find((f) => f.type === FRAME.DATA && f.streamId === 1)!.payload).map(String)).toEqual(['exact']);
    peer.send(withContentLength('0', 3, FLAG.END_HEADERS | FLAG.END_STREAM));
    await until(
      () => peer.frames.some((f) => f.type === FRAME.HEADERS && f.streamId === 3 && f.flags & FLAG.END_STREAM),
      'the answer on 3',
    );
    expect(resetsOf(1)).toEqual([]);
    expect(resetsOf(3)).toEqual([]);
  });

  const withIndexedField = (name: string, value: string) =>
    Buffer.concat([grpcRequestBlock('/test.Echo/Unary'), Buffer.from([0x40, ...hpackString(name), ...hpackString(value)])]);
  /** A request adding the field to the client's table (stream 3), then one sending it as index 62, the newest entry (stream 5). */
  const indexedThenSentFromTable = (name: string, value: string) => [
    rawFrame(FRAME.HEADERS, FLAG.END_HEADERS, 3, withIndexedField(name, value)),
    message(3, 'm'),
    rawFrame(FRAME.HEADERS, FLAG.END_HEADERS, 5, Buffer.concat([grpcRequestBlock('/test.Echo/Unary'), Buffer.from([0xbe])])),
    message(5, 'm'),
  ];
  const badFieldNames: [string, () => Buffer[]][] = [
    ['an upper-case field name', () => [rawFrame(FRAME.HEADERS, FLAG.END_HEADERS, 1, request([5, 'X-Tenant', 'a'])), message(1, 'm')]],
    ['a field name with a space', () => [rawFrame(FRAME.HEADERS, FLAG.END_HEADERS, 1, request([5, 'x tenant', 'a'])), message(1, 'm')]],
    [
      'connection: keep-alive',
      () => [rawFrame(FRAME.HEADERS, FLAG.END_HEADERS, 1, request([5, 'connection', 'keep-alive'])), message(1, 'm')],
    ],
    [
      'transfer-encoding: chunked',
      () => [rawFrame(FRAME.HEADERS, FLAG.END_HEADERS, 1, request([5, 'transfer-encoding', 'chunked'])), message(1, 'm')],
    ],
    [
      'transfer-encoding named by its static table index',
      () => [
        rawFrame(
          FRAME.HEADERS,
          FLAG.END_HEADERS,
          1,
          Buffer.concat([grpcRequestBlock('/test.Echo/Unary'), Buffer.from([0x0f, 57 - 15, ...hpackString('chunked')])]),
        ),
        message(1, 'm'),
      ],
    ],
    ['an upper-case name the client indexed, sent again from its table', () => indexedThenSentFromTable('X-Up', 'a')],
  ];
  it.each(badFieldNames)('resets a request with %s with PROTOCOL_ERROR (RFC 9113 §8.2), not the connection', async (_what, frames) => {
    await expectResetNotConnection(frames());
  });

  const badFieldValues: [string, () => Buffer[]][] = [
    ...(
      [
        ['a NUL in a field value', 'a\u0000b'],
        ['a CR in a field value', 'a\rb'],
        ['an LF in a field value', 'a\nx-injected: 1'],
        ['a field value starting with a space', ' a'],
        ['a field value ending with a tab', 'a\t'],
      ] as const
    ).map(([what, value]): [string, () => Buffer[]] => [
      what,
      () => [rawFrame(FRAME.HEADERS, FLAG.END_HEADERS, 1, request([5, 'x-tenant', value])), message(1, 'm')],
    ]),
    ['a CR in :path', () => [rawFrame(FRAME.HEADERS, FLAG.END_HEADERS, 1, grpcRequestBlock('/test.Echo/Unary\r')), message(1, 'm')]],
    ['a value with an LF the client indexed, sent again from its table', () => indexedThenSentFromTable('x-tenant', 'a\nb')],
  ];
  it.each(badFieldValues)('resets a request with %s with PROTOCOL_ERROR (RFC 9113 §8.2.1), not the connection', async (_what, frames) => {
    await expectResetNotConnection(frames());
  });

  it.each(badFieldValues)(
    'like node:http2 (nghttp2), never hands a handler a request with %s (nghttp2 drops such a regular field; this server resets the stream)',
    async (_what, frames) => {
      const handed: Record<string, unknown>[] = [];
      const nodeServer = http2.createServer();
      nodeServer.on('stream', (stream, headers) => {
        handed.push(headers);
        stream.respond({ ':status': 200 }, { endStream: true });
      });
      await new Promise<void>((resolve) => nodeServer.listen(0, '127.0.0.1', resolve));
      const nodePeer = await rawPeer((nodeServer.address() as { port: number }).port);
      try {
        const sent = frames();
        nodePeer.send(...sent);
        const last = sent[sent.length - 1]!.readUInt32BE(5) & 0x7fffffff;
        // Reset, or answered (the field dropped): either way the last stream has been dealt with.
        const dealtWith = (f: { type: number; streamId: number }) =>
          (f.type === FRAME.RST_STREAM || f.type === FRAME.HEADERS) && f.streamId === last;
        await until(() => nodePeer.frames.some(dealtWith), 'RST_STREAM or HEADERS', 1000);
        for (const headers of handed) {
          for (const value of Object.values(headers)) expect(String(value)).not.toMatch(/[\0\r\n]|^[ \t]|[ \t]$/);
        }
      } finally {
        nodePeer.destroy();
        await new Promise((resolve) => nodeServer.close(resolve));
      }
    },
  );

  it('keeps serving a request whose field values are only inside-space and visible text', async () => {
    peer.send(rawFrame(FRAME.HEADERS, FLAG.END_HEADERS, 1, request([5, 'x-tenant', 'a b\tc ✓'])), message(1, 'm'));
    await until(() => peer.frames.some((f) => f.type === FRAME.DATA && f.streamId === 1), 'the answer on stream 1');
    expect(peer.frames.some((f) => f.type === FRAME.RST_STREAM)).toBe(false);
  });

  const connectionErrors: [string, () => Buffer[], number][] = [
    ['DATA on stream 0', () => [rawFrame(FRAME.DATA, 0, 0, Buffer.from('x'))], http2.constants.NGHTTP2_PROTOCOL_ERROR],
    ['a frame above 16,384 bytes', () => [rawFrame(FRAME.DATA, 0, 1, Buffer.alloc(20_000))], http2.constants.NGHTTP2_FRAME_SIZE_ERROR],
    [
      'a header block that does not decode (index 0)',
      () => [rawFrame(FRAME.HEADERS, FLAG.END_HEADERS, 1, Buffer.from([0x80]))],
      http2.constants.NGHTTP2_COMPRESSION_ERROR,
    ],
    ['HEADERS on an even (server) stream', () => [headers(2)], http2.constants.NGHTTP2_PROTOCOL_ERROR],
    ['DATA on a stream never opened', () => [message(9, 'x')], http2.constants.NGHTTP2_PROTOCOL_ERROR],
    ['SETTINGS of 5 bytes', () => [rawFrame(FRAME.SETTINGS, 0, 0, Buffer.alloc(5))], http2.constants.NGHTTP2_FRAME_SIZE_ERROR],
    ['PING of 4 bytes', () => [rawFrame(FRAME.PING, 0, 0, Buffer.alloc(4))], http2.constants.NGHTTP2_FRAME_SIZE_ERROR],
    [
      'a connection window raised above 2^31 − 1',
      () => {
        const increment = Buffer.alloc(4);
        increment.writeUInt32BE(2 ** 31 - 1);
        return [rawFrame(FRAME.WINDOW_UPDATE, 0, 0, increment)];
      },
      http2.constants.NGHTTP2_FLOW_CONTROL_ERROR,
    ],
    [
      'a header block interrupted by another frame',
      () => [headers(1, '/test.Echo/Unary', 0), rawFrame(FRAME.PING, 0, 0, Buffer.alloc(8))],
      http2.constants.NGHTTP2_PROTOCOL_ERROR,
    ],
    [
      'a flood of empty CONTINUATION frames',
      () => [headers(1, '/test.Echo/Unary', 0), ...Array.from({ length: 100 }, () => rawFrame(FRAME.CONTINUATION, 0, 1))],
      http2.constants.NGHTTP2_ENHANCE_YOUR_CALM,
    ],
    ['PUSH_PROMISE from a client', () => [rawFrame(0x5, FLAG.END_HEADERS, 1, Buffer.alloc(4))], http2.constants.NGHTTP2_PROTOCOL_ERROR],
    [
      'PRIORITY making a stream depend on itself',
      () => [rawFrame(FRAME.PRIORITY, 0, 1, Buffer.from([0, 0, 0, 1, 15]))],
      http2.constants.NGHTTP2_PROTOCOL_ERROR,
    ],
    [
      'HEADERS whose priority makes its stream depend on itself',
      () => [
        rawFrame(
          FRAME.HEADERS,
          FLAG.END_HEADERS | FLAG.PRIORITY,
          1,
          Buffer.concat([Buffer.from([0x80, 0, 0, 1, 15]), grpcRequestBlock('/test.Echo/Unary')]),
        ),
        message(1, 'm'),
      ],
      http2.constants.NGHTTP2_PROTOCOL_ERROR,
    ],
    ['GOAWAY of 4 bytes', () => [rawFrame(FRAME.GOAWAY, 0, 0, Buffer.alloc(4))], http2.constants.NGHTTP2_FRAME_SIZE_ERROR],
    [
      'WINDOW_UPDATE on a stream never opened',
      () => [rawFrame(FRAME.WINDOW_UPDATE, 0, 9, Buffer.from([0, 0, 0, 1]))],
      http2.constants.NGHTTP2_PROTOCOL_ERROR,
    ],
    [
      'RST_STREAM on an even stream (this side opens none), below a stream the client opened',
      () => [headers(3, '/test.Echo/Hold'), rawFrame(FRAME.RST_STREAM, 0, 2, Buffer.alloc(4))],
      http2.constants.NGHTTP2_PROTOCOL_ERROR,
    ],
    [
      'DATA on an even stream, below a stream the client opened',
      () => [headers(3, '/test.Echo/Hold'), rawFrame(FRAME.DATA, 0, 2, Buffer.from('x'))],
      http2.constants.NGHTTP2_PROTOCOL_ERROR,
    ],
  ];
  it.each(connectionErrors)('ends the connection with GOAWAY on %s', async (_what, frames, code) => {
    peer.send(...frames());
    await expectGoaway(code);
  });

  it('never raises the last stream id of a GOAWAY it sent before (RFC 9113 §6.8): a drain, then a protocol error', async () => {
    const s2 = await start();
    const drained = await rawPeer(s2.port);
    try {
      drained.send(headers(1, '/test.Echo/Hold'), message(1, 'held'));
      await until(() => s2.held.length === 1, 'the held call');
      const closing = s2.server.close();
      const goaways = () => drained.frames.filter((f) => f.type === FRAME.GOAWAY).map((f) => f.payload.readUInt32BE(0));
      await until(() => goaways().length === 2, 'the drain’s second GOAWAY');
      expect(goaways()).toEqual([2 ** 31 - 1, 1]);
      // Stream 3 crossed the final GOAWAY: not served. Then a frame that ends the connection.
      drained.send(headers(3), message(3, 'late'), rawFrame(FRAME.PING, 0, 0, Buffer.alloc(4)));
      await drained.closed;
      expect(goaways().length).toBe(3);
      expect(goaways()[2]).toBeLessThanOrEqual(1);
      await closing;
    } finally {
      drained.destroy();
      await s2.server.close();
    }
  });

  it('ends a connection whose first frame is not SETTINGS with GOAWAY(PROTOCOL_ERROR)', async () => {
    peer.destroy();
    const net = await import('node:net');
    const socket = net.connect(s.port, '127.0.0.1');
    socket.on('error', () => undefined);
    const received: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => received.push(chunk));
    const closed = new Promise((resolve) => socket.once('close', resolve));
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write(Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1'), rawFrame(FRAME.PING, 0, 0, Buffer.alloc(8))]));
    await closed;
    const bytes = Buffer.concat(received);
    let goawayCode: number | undefined;
    for (let at = 0; at + 9 <= bytes.length; at += 9 + bytes.readUIntBE(at, 3)) {
      if (bytes[at + 3] === FRAME.GOAWAY) goawayCode = bytes.readUInt32BE(at + 13);
    }
    expect(goawayCode).toBe(http2.constants.NGHTTP2_PROTOCOL_ERROR);
  });
});

describe('with random frames', () => {
  it('takes connections of random frames without an error of its own (a thrown exception, a failed call setup), and goes on serving', async () => {
    // Protocol errors are the peer's and logged at debug; anything at error level would be a bug here.
    const errors: string[] = [];
    const s = await start({}, createLogger('error', { write: (line: string) => void errors.push(line) }));
    const random = prng(14);
    const below = (n: number) => Math.floor(random() * n);
    const bytes = (n: number) => Buffer.from(Array.from({ length: n }, () => below(256)));
    // Mostly plausible frames, so that the reader gets past the first one: real types, small stream ids, the
    // flags that matter, payloads that are sometimes right and sometimes not.
    const randomFrame = (): Buffer => {
      const type = below(12);
      const flags = [0, FLAG.END_STREAM, FLAG.END_HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, FLAG.PADDED, below(256)][below(6)]!;
      const streamId = [0, 1, 3, 5, below(64), 2 ** 31 - 1][below(6)]!;
      const payload =
        type === FRAME.HEADERS && random() < 0.6
          ? grpcRequestBlock(['/test.Echo/Unary', '/test.Echo/Hold', '/nope'][below(3)]!)
          : type === FRAME.DATA && random() < 0.6
            ? grpcFrame(bytes(below(40)))
            : bytes([0, 4, 5, 6, 8, below(40)][below(6)]!);
      return rawFrame(type, flags, streamId, payload);
    };
    try {
      for (let connection = 0; connection < 150; connection += 1) {
        const peer = await rawPeer(s.port);
        peer.send(...Array.from({ length: 1 + below(12) }, randomFrame));
        await sleep(5);
        peer.destroy();
      }
      for (const call of s.held.splice(0)) call.respond(frameMessage(Buffer.from('late')));
      const session = connect(s.address);
      try {
        const answer = await rawCall(session, { path: '/test.Echo/Unary', body: [grpcFrame(Buffer.from('still here'))] });
        expect(messagesOf(answer.data).map(String)).toEqual(['still here']);
      } finally {
        session.close();
      }
      await until(() => s.server.connectionCount === 0, 'every random connection to be gone');
      expect(errors).toEqual([]);
    } finally {
      await s.server.close();
    }
  }, 30_000);
});
