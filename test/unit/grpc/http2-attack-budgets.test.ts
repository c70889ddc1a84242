import * as http2 from 'node:http2';
import { frameMessage, GrpcServer, type GrpcServerSettings, type UnaryCall } from '../../../src/transport/grpc-server';
import { createLogger } from '../../../src/platform/logger';
import { Metrics } from '../../../src/platform/metrics';
import { grpcFrame, messagesOf } from '../../support/raw-grpc';
import { FLAG, FRAME, grpcRequestBlock, literalBlock, rawFrame, rawPeer, type RawPeer } from '../../support/raw-h2-frames';
import { hpackString } from '../../support/hpack-encoding';
import { sleep, until } from '../../support/waiting';

/**
 * The attack budgets of one HTTP/2 connection (src/transport/http2/attack-budgets.ts) and its fair share of
 * the event loop, tried with frames written by hand on a real socket: each attack the issue measured ends in
 * GOAWAY(ENHANCE_YOUR_CALM) and a closed connection, while what an honest Envoy does never does.
 */
const logger = createLogger('silent');
const ENHANCE_YOUR_CALM = http2.constants.NGHTTP2_ENHANCE_YOUR_CALM;
const CANCEL = Buffer.from([0, 0, 0, http2.constants.NGHTTP2_CANCEL]);

interface Started {
  server: GrpcServer;
  port: number;
  held: UnaryCall[];
  /** Calls of /test.Echo/Count answered so far. */
  counted: () => number;
  /** How many /test.Echo/Count calls had been answered when each /test.Echo/Mark call ran. */
  marks: number[];
}

async function start(settings: Partial<GrpcServerSettings> = {}, serverLogger = logger): Promise<Started> {
  const server = new GrpcServer({ host: '127.0.0.1', port: 0, ...settings }, serverLogger);
  const held: UnaryCall[] = [];
  const marks: number[] = [];
  let counted = 0;
  server.addMethod('/test.Echo/Unary', { kind: 'unary', handle: (message, call) => call.respond(frameMessage(message)) });
  server.addMethod('/test.Echo/Hold', { kind: 'unary', handle: (_message, call) => held.push(call) });
  server.addMethod('/test.Echo/Count', {
    kind: 'unary',
    handle: (message, call) => {
      counted += 1;
      call.respond(frameMessage(message));
    },
  });
  server.addMethod('/test.Echo/Mark', {
    kind: 'unary',
    handle: (message, call) => {
      marks.push(counted);
      call.respond(frameMessage(message));
    },
  });
  const port = await server.listen();
  return { server, port, held, counted: () => counted, marks };
}

const headers = (streamId: number, path = '/test.Echo/Unary', flags: number = FLAG.END_HEADERS) =>
  rawFrame(FRAME.HEADERS, flags, streamId, grpcRequestBlock(path));
const message = (streamId: number, text: string) => rawFrame(FRAME.DATA, FLAG.END_STREAM, streamId, grpcFrame(Buffer.from(text)));
const framesOf = (peer: RawPeer, type: number, streamId?: number) =>
  peer.frames.filter((f) => f.type === type && (streamId === undefined || f.streamId === streamId));

async function expectCalmAndClosed(peer: RawPeer): Promise<void> {
  await until(() => peer.goaway() !== undefined, 'GOAWAY');
  expect(peer.goaway()!.code).toBe(ENHANCE_YOUR_CALM);
  await peer.closed;
}

describe('attack budgets', () => {
  let s: Started;
  let peer: RawPeer;
  beforeEach(async () => {
    s = await start();
    peer = await rawPeer(s.port);
  });
  afterEach(async () => {
    peer.destroy();
    await s.server.close();
  });

  it('rapid reset: answers streams opened and reset at once with GOAWAY(ENHANCE_YOUR_CALM), and lets the call in flight finish', async () => {
    peer.send(headers(1, '/test.Echo/Hold'), message(1, 'in flight'));
    await until(() => s.held.length === 1, 'the held call');
    const flood: Buffer[] = [];
    for (let id = 3; id < 3 + 2 * 2000; id += 2) flood.push(headers(id, '/test.Echo/Hold'), rawFrame(FRAME.RST_STREAM, 0, id, CANCEL));
    peer.send(...flood);
    await until(() => peer.goaway() !== undefined, 'GOAWAY');
    const goaway = peer.goaway()!;
    expect(goaway.code).toBe(ENHANCE_YOUR_CALM);
    expect(goaway.debug).toContain('client_resets');
    // The last stream taken: the in-flight call's and the reset ones before the budget ran out, not the whole flood.
    expect(goaway.lastStreamId).toBeGreaterThan(1);
    expect(goaway.lastStreamId).toBeLessThan(3 + 2 * 2000);
    // The call in flight has its whole request, so the server reads no more: neither the rest of the flood nor this PING.
    peer.send(rawFrame(FRAME.PING, 0, 0, Buffer.alloc(8)));
    await sleep(100);
    s.held.find((call) => !call.finished)!.respond(frameMessage(Buffer.from('finished')));
    await peer.closed;
    expect(peer.pingAcks()).toBe(0);
    expect(messagesOf(Buffer.concat(framesOf(peer, FRAME.DATA, 1).map((f) => f.payload))).map(String)).toEqual(['finished']);
    expect(s.server.budgetClosures.client_resets).toBe(1);
  });

  it('rapid reset with the whole request: a stream the same read resets never starts its call', async () => {
    const flood: Buffer[] = [];
    for (let id = 1; id < 1 + 2 * 90; id += 2) {
      flood.push(headers(id, '/test.Echo/Count'), message(id, 'reset at once'), rawFrame(FRAME.RST_STREAM, 0, id, CANCEL));
    }
    // Then, in the same write, a call that is not reset: started, and answered.
    flood.push(headers(181, '/test.Echo/Count'), message(181, 'kept'));
    peer.send(...flood);
    await until(() => framesOf(peer, FRAME.DATA, 181).length > 0, 'the kept call answered');
    expect(s.counted()).toBe(1);
    expect(messagesOf(Buffer.concat(framesOf(peer, FRAME.DATA, 181).map((f) => f.payload))).map(String)).toEqual(['kept']);
  });

  it('never trips on cancellations among answered calls: 40 % of 6,000 streams reset by the client', async () => {
    let id = 1;
    for (let batch = 0; batch < 24; batch += 1) {
      const frames: Buffer[] = [];
      for (let i = 0; i < 250; i += 1, id += 2) {
        // As Envoy cancels: the whole request sent, then RST_STREAM(CANCEL) while the call is in flight.
        if (i % 5 < 2) frames.push(headers(id, '/test.Echo/Hold'), message(id, 'c'), rawFrame(FRAME.RST_STREAM, 0, id, CANCEL));
        else frames.push(headers(id), message(id, 'a'));
      }
      peer.send(...frames);
      const last = id - 2;
      await until(() => framesOf(peer, FRAME.HEADERS, last).length > 0 || s.held.length > 0, `batch ${batch}`);
      await until(() => s.held.every((call) => call.finished), 'the cancelled calls to end');
      s.held.length = 0;
    }
    peer.send(headers(id), message(id, 'still served'));
    await until(() => framesOf(peer, FRAME.DATA, id).length > 0, 'the last answer');
    expect(peer.goaway()).toBeUndefined();
    expect(framesOf(peer, FRAME.DATA).length).toBe(24 * 150 + 1);
    expect(s.server.budgetClosures.client_resets).toBe(0);
  });

  const BIG_ENTRY = Buffer.from([0x40, ...hpackString('x-big'), ...hpackString('v'.repeat(4000))]);
  const resetFloods: [string, (id: number) => Buffer, number, number][] = [
    [
      'requests without :scheme',
      () =>
        literalBlock([
          [':method', 'POST'],
          [':path', '/test.Echo/Unary'],
          ['content-type', 'application/grpc'],
        ]),
      http2.constants.NGHTTP2_PROTOCOL_ERROR,
      1001,
    ],
    [
      'requests of 100 empty field names',
      () => Buffer.concat([grpcRequestBlock('/test.Echo/Unary'), Buffer.alloc(300)]),
      http2.constants.NGHTTP2_PROTOCOL_ERROR,
      1001,
    ],
    [
      'requests whose references to one 4 KB entry pass the header list limit',
      // The first inserts the entry; each then refers to it five times (20 KB of headers in 5 octets).
      (id) => Buffer.concat([grpcRequestBlock('/test.Echo/Unary'), id === 1 ? BIG_ENTRY : Buffer.alloc(0), Buffer.alloc(5, 0xbe)]),
      ENHANCE_YOUR_CALM,
      // The first block, 4 KB longer, counts 9 (one per 512 octets of block, and one).
      993,
    ],
    [
      'requests of 16 KiB blocks of empty field names',
      // Each, 16.3 KB, counts 32 (one per 512 octets of block, and one): 32 of them pass 1,000.
      () => Buffer.concat([grpcRequestBlock('/test.Echo/Unary'), Buffer.alloc(3 * 5400)]),
      // Malformed from its first empty name: the rest of the block is only read for the table.
      http2.constants.NGHTTP2_PROTOCOL_ERROR,
      32,
    ],
  ];
  it.each(resetFloods)(
    '%s, each reset by this side: GOAWAY(ENHANCE_YOUR_CALM) once they count past 1,000',
    async (_what, block, code, expectedResets) => {
      const flood: Buffer[] = [];
      for (let id = 1; id < 1 + 2 * 1500; id += 2) flood.push(rawFrame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, id, block(id)));
      peer.send(...flood);
      await expectCalmAndClosed(peer);
      expect(peer.goaway()!.debug).toContain('local_resets');
      const resets = framesOf(peer, FRAME.RST_STREAM);
      expect(resets.length).toBe(expectedResets);
      for (const reset of resets) expect(reset.payload.readUInt32BE(0)).toBe(code);
      expect(s.server.budgetClosures.local_resets).toBe(1);
    },
  );

  it('streams refused past SETTINGS_MAX_CONCURRENT_STREAMS count as resets of this side', async () => {
    const frames: Buffer[] = [];
    // 1,000 held (the limit), then 1,001 refused.
    for (let id = 1; id < 1 + 2 * 2001; id += 2) frames.push(headers(id, '/test.Echo/Hold'), message(id, 'h'));
    peer.send(...frames);
    await expectCalmAndClosed(peer);
    expect(
      framesOf(peer, FRAME.RST_STREAM).filter((f) => f.payload.readUInt32BE(0) === http2.constants.NGHTTP2_REFUSED_STREAM),
    ).toHaveLength(1001);
    expect(s.server.budgetClosures.local_resets).toBe(1);
  });

  const emptyFloods: [string, () => Buffer[]][] = [
    [
      'DATA without payload or END_STREAM',
      () => [headers(1, '/test.Echo/Hold', FLAG.END_HEADERS), ...Array.from({ length: 101 }, () => rawFrame(FRAME.DATA, 0, 1))],
    ],
    [
      'DATA whose payload is all padding',
      () => [
        headers(1, '/test.Echo/Hold', FLAG.END_HEADERS),
        ...Array.from({ length: 101 }, () => rawFrame(FRAME.DATA, FLAG.PADDED, 1, Buffer.from([4, 0, 0, 0, 0]))),
      ],
    ],
    [
      'empty CONTINUATION frames, a few per header block',
      () => {
        const frames: Buffer[] = [];
        for (let id = 1; id < 1 + 2 * 11; id += 2) {
          frames.push(rawFrame(FRAME.HEADERS, 0, id, grpcRequestBlock('/test.Echo/Unary')));
          for (let i = 0; i < 10; i += 1) frames.push(rawFrame(FRAME.CONTINUATION, 0, id));
          frames.push(rawFrame(FRAME.CONTINUATION, FLAG.END_HEADERS, id), message(id, 'x'));
        }
        return frames;
      },
    ],
  ];
  it.each(emptyFloods)('frames that carry nothing, %s: GOAWAY(ENHANCE_YOUR_CALM) past 100 of them', async (_what, frames) => {
    peer.send(...frames());
    await expectCalmAndClosed(peer);
    expect(peer.goaway()!.debug).toContain('empty_frames');
    expect(s.server.budgetClosures.empty_frames).toBe(1);
  });

  const controlFloods: [string, () => Buffer][] = [
    ['PING', () => rawFrame(FRAME.PING, 0, 0, Buffer.alloc(8))],
    ['SETTINGS', () => rawFrame(FRAME.SETTINGS, 0, 0)],
  ];
  it.each(controlFloods)(
    'a flood of %s frames, each asking for an ACK: GOAWAY(ENHANCE_YOUR_CALM) past 1,000 of them',
    async (_what, frame) => {
      // The preface's SETTINGS counts as one: 999 more stay within the budget and are each acknowledged.
      peer.send(...Array.from({ length: 999 }, frame), headers(1), message(1, 'still served'));
      await until(() => framesOf(peer, FRAME.DATA, 1).length === 1, 'the answer after 1,000 control frames');
      expect(peer.goaway()).toBeUndefined();
      peer.send(frame());
      await expectCalmAndClosed(peer);
      expect(peer.goaway()!.debug).toContain('control_frames');
      expect(s.server.budgetClosures.control_frames).toBe(1);
    },
  );

  it('reports the closures by budget in /metrics', async () => {
    const metrics = new Metrics();
    metrics.watchHttp2BudgetClosures(s.server.budgetClosures);
    peer.send(headers(1, '/test.Echo/Hold', FLAG.END_HEADERS), ...Array.from({ length: 101 }, () => rawFrame(FRAME.DATA, 0, 1)));
    await expectCalmAndClosed(peer);
    const text = await metrics.registry.metrics();
    expect(text).toContain('gateway_authz_http2_budget_closures_total{budget="empty_frames"} 1');
    expect(text).toContain('gateway_authz_http2_budget_closures_total{budget="client_resets"} 0');
  });

  it('counts a header block over its size or CONTINUATION budget, which ends the connection at once', async () => {
    peer.send(
      headers(1, '/test.Echo/Unary', 0),
      ...Array.from({ length: 65 }, () => rawFrame(FRAME.CONTINUATION, 0, 1, Buffer.from([0x82]))),
    );
    await expectCalmAndClosed(peer);
    expect(s.server.budgetClosures.header_block).toBe(1);
  });

  it('resets a stream whose header block references one large entry past the list limit, and keeps the connection usable', async () => {
    const bomb = Buffer.concat([
      grpcRequestBlock('/test.Echo/Unary'),
      Buffer.from([0x40, ...hpackString('x-big'), ...hpackString('v'.repeat(4000))]),
      Buffer.alloc(16_000, 0xbe),
      Buffer.from([0x40, ...hpackString('x-tenant'), ...hpackString('after')]),
    ]);
    // Within the block's wire limit (four times the list limit), in a HEADERS and a CONTINUATION frame.
    peer.send(
      rawFrame(FRAME.HEADERS, 0, 1, bomb.subarray(0, 16_000)),
      rawFrame(FRAME.CONTINUATION, FLAG.END_HEADERS, 1, bomb.subarray(16_000)),
      message(1, 'x'),
    );
    await until(() => framesOf(peer, FRAME.RST_STREAM, 1).length > 0, 'RST_STREAM');
    expect(framesOf(peer, FRAME.RST_STREAM, 1)[0]!.payload.readUInt32BE(0)).toBe(ENHANCE_YOUR_CALM);
    // The next request refers to the entry the bomb added last (index 62): the table is in step.
    peer.send(
      rawFrame(FRAME.HEADERS, FLAG.END_HEADERS, 3, Buffer.concat([grpcRequestBlock('/test.Echo/Unary'), Buffer.from([0xbe])])),
      message(3, 'next'),
    );
    await until(() => framesOf(peer, FRAME.DATA, 3).length > 0, 'the answer on stream 3');
    expect(peer.goaway()).toBeUndefined();
  });
});

describe('fairness between connections', () => {
  it('answers a Check on one connection after at most a turn’s share of a multi-MiB flood of requests on another', async () => {
    const s = await start();
    const flooder = await rawPeer(s.port);
    const normal = await rawPeer(s.port);
    try {
      await until(() => flooder.frames.length > 0 && normal.frames.length > 0, 'both SETTINGS');
      const FLOOD = 20_000;
      // The answers (a few MB) need more than the connection's initial 65,535-byte window.
      const grant = Buffer.alloc(4);
      grant.writeUInt32BE(2 ** 31 - 1 - 65_535);
      const flood: Buffer[] = [rawFrame(FRAME.WINDOW_UPDATE, 0, 0, grant)];
      for (let i = 0, id = 1; i < FLOOD; i += 1, id += 2) flood.push(headers(id, '/test.Echo/Count'), message(id, 'f'));
      const bytes = Buffer.concat(flood);
      expect(bytes.length).toBeGreaterThan(2 * 1024 * 1024);
      // Written first, then the Check: both are in the server's socket buffers before its next turn.
      flooder.socket.write(bytes);
      normal.send(headers(1, '/test.Echo/Mark'), message(1, 'check'));
      await until(() => framesOf(normal, FRAME.DATA, 1).length > 0, 'the Check’s answer');
      await until(() => s.counted() === FLOOD, 'the whole flood to be answered', 20_000);
      // When the Check ran, the flooder had had a turn or two of 256 requests (512 frames), not whole reads.
      expect(s.marks).toHaveLength(1);
      expect(s.marks[0]!).toBeLessThan(600);
      expect(flooder.goaway()).toBeUndefined();
    } finally {
      flooder.destroy();
      normal.destroy();
      await s.server.close();
    }
  }, 30_000);

  /** Unknown-type frames, ignored one by one: cheap to read, but a turn's share each 512 of them. */
  const ignoredFlood = (frames: number) => Buffer.concat(Array.from({ length: frames }, () => rawFrame(0xfa, 0, 0, Buffer.alloc(8))));

  it('reads a flood over many turns to its end: a protocol error after it still ends the connection', async () => {
    const s = await start();
    const peer = await rawPeer(s.port);
    try {
      peer.send(ignoredFlood(200_000), rawFrame(FRAME.DATA, 0, 0, Buffer.from('x')));
      await until(() => peer.goaway() !== undefined, 'GOAWAY', 20_000);
      expect(peer.goaway()!.code).toBe(http2.constants.NGHTTP2_PROTOCOL_ERROR);
      await peer.closed;
    } finally {
      peer.destroy();
      await s.server.close();
    }
  }, 30_000);

  it('drops what is left of a flood when its connection goes, without an error, and goes on serving', async () => {
    const errors: string[] = [];
    const s = await start({}, createLogger('error', { write: (line: string) => void errors.push(line) }));
    const peer = await rawPeer(s.port);
    try {
      const ping = rawFrame(FRAME.PING, 0, 0, Buffer.alloc(8));
      peer.send(Buffer.concat(Array.from({ length: 200_000 }, () => ping)), headers(1), message(1, 'never read'));
      // Gone in the middle of the flood: some PINGs answered, most not.
      await until(() => peer.pingAcks() > 0, 'the first PING ACK');
      peer.destroy();
      expect(peer.pingAcks()).toBeLessThan(200_000);
      await until(() => s.server.connectionCount === 0, 'the connection to be gone');
      expect(framesOf(peer, FRAME.DATA, 1)).toHaveLength(0);
      const next = await rawPeer(s.port);
      try {
        next.send(headers(1, '/test.Echo/Unary'), message(1, 'after'));
        await until(() => framesOf(next, FRAME.DATA, 1).length > 0, 'the answer');
      } finally {
        next.destroy();
      }
      expect(errors).toEqual([]);
    } finally {
      await s.server.close();
    }
  }, 30_000);
});
