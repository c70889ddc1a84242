import * as grpc from '@grpc/grpc-js';
import * as http2 from 'node:http2';
import { ManualClock } from '../../src/platform/clock';
import type { MeteredResponse } from '../../src/metering/metered-response';
import type { UsageOutcome } from '../../src/metering/usage';
import { createOfficialCheckClient, decisionFor } from '../support/envoy-official-client';
import {
  createProcessClient,
  EXT_PROC_ATTRIBUTES_KEY,
  headerMap,
  observed,
  PROCESS_PATH,
  serializeProcessingRequest,
  type ProcessClient,
} from '../support/ext-proc-official';
import { connect, grpcFrame, rawCall } from '../support/raw-grpc';
import { startAppUnderTest, type AppUnderTest } from '../support/running-app';
import { tokens, USAGE_FIXTURE_CASES, usageFixture, type UsageFixtureCase } from '../support/usage-fixtures';
import { sleep, until } from '../support/waiting';

/**
 * The usage processor on the real service port, driven the way Envoy's
 * ext_proc filter drives it in observability mode (envoy.yaml): the
 * official grpc-js client with Envoy's official protos, one Process stream
 * per HTTP request, request headers carrying ext_authz's identity headers,
 * response headers with the request.size attribute, the body in chunks,
 * never waiting for an answer. Each answer must give exactly one
 * MeteredResponse with the upstream's usage, or none without an identity.
 */
const NOW = Date.UTC(2026, 10, 23, 12, 0, 0);
const REQUEST_BYTES = 1234;

let app: AppUnderTest;
let client: ProcessClient;
const recorded: MeteredResponse[] = [];

beforeAll(async () => {
  app = await startAppUnderTest({ clock: new ManualClock(NOW), meteredResponses: { record: (response) => recorded.push(response) } });
  client = createProcessClient(app.grpcAddress);
});
afterAll(async () => {
  client?.close();
  await app?.close();
});
beforeEach(() => {
  recorded.length = 0;
});

let sequence = 0;

interface Identity {
  requestId: string;
  accountId: string;
  keyId: string;
  keyPrefix: string;
  family: string;
}

function identity(family: string): Identity {
  sequence += 1;
  return {
    requestId: `req-${sequence}-${Math.random().toString(36).slice(2, 10)}`,
    accountId: 'acme',
    keyId: 'key_ki7sq0QuenAUq8kr',
    keyPrefix: 'gk_live_1mm5',
    family,
  };
}

/** The request headers Envoy sends after ext_authz allowed the request: its identity headers, x-request-id, the pseudo-headers. */
function requestHeaders(path: string, who: Identity | undefined, method = 'POST'): [string, string][] {
  return [
    [':authority', 'gateway.example.test'],
    [':path', path],
    [':method', method],
    [':scheme', 'http'],
    ['content-type', 'application/json'],
    ['content-length', String(REQUEST_BYTES)],
    ['x-forwarded-proto', 'http'],
    ...(who
      ? ([
          ['x-request-id', who.requestId],
          ['x-gateway-account-id', who.accountId],
          ['x-gateway-key-id', who.keyId],
          ['x-gateway-key-prefix', who.keyPrefix],
          ['x-gateway-route-family', who.family],
        ] as [string, string][])
      : [['x-request-id', `anonymous-${sequence}`] as [string, string]]),
  ];
}

interface Exchange {
  request?: [string, string][];
  status?: number;
  contentType?: string;
  extraResponseHeaders?: [string, string][];
  chunks?: Buffer[];
  trailers?: [string, string][];
  /** How the stream ends on Envoy's side when the answer does not reach its end. */
  cut?: 'half-close' | 'reset' | 'envoy-close';
  /** Sent without observability_mode (a filter configured to wait for replies). */
  blocking?: boolean;
}

/** What Envoy sends for one HTTP exchange, in order. */
function envoyMessages(exchange: Exchange): object[] {
  const wrap = (message: object) => (exchange.blocking ? { ...message, metadata_context: {} } : observed(message));
  const messages: object[] = [];
  if (exchange.request) messages.push(wrap({ request_headers: { headers: headerMap(exchange.request), end_of_stream: false } }));
  const chunks = exchange.chunks ?? [];
  const responseHeaders: [string, string][] = [
    [':status', String(exchange.status ?? 200)],
    ...(exchange.contentType ? ([['content-type', exchange.contentType]] as [string, string][]) : []),
    ...(exchange.extraResponseHeaders ?? []),
  ];
  messages.push(
    wrap({
      response_headers: { headers: headerMap(responseHeaders), end_of_stream: chunks.length === 0 && !exchange.trailers && !exchange.cut },
      attributes: { [EXT_PROC_ATTRIBUTES_KEY]: { fields: { 'request.size': { numberValue: REQUEST_BYTES } } } },
    }),
  );
  chunks.forEach((chunk, index) => {
    const last = index === chunks.length - 1 && !exchange.trailers && !exchange.cut;
    messages.push(wrap({ response_body: { body: chunk, end_of_stream: last } }));
  });
  if (exchange.trailers) messages.push(wrap({ response_trailers: { trailers: headerMap(exchange.trailers) } }));
  return messages;
}

interface StreamResult {
  status: grpc.StatusObject;
  /** The ProcessingResponse members the processor answered with, as the official protos read them. */
  replies: string[];
}

/** One Process stream: every message sent without waiting (observability mode), then the stream's end as `cut` says. */
function runExchange(exchange: Exchange, processClient: ProcessClient = client): Promise<StreamResult> {
  const call = processClient.process();
  const replies: string[] = [];
  call.on('data', (reply: { response?: string }) => replies.push(reply.response ?? 'none'));
  call.on('error', () => undefined);
  let cutTimer: NodeJS.Timeout | undefined;
  // A stream the processor ends first (refused, or failed) needs no cut: the timer would outlive the suite.
  const status = new Promise<StreamResult>((resolve) =>
    call.on('status', (s: grpc.StatusObject) => {
      clearTimeout(cutTimer);
      resolve({ status: s, replies });
    }),
  );
  const messages = envoyMessages(exchange);
  let written = 0;
  // Envoy closes a stream only well after its last message went out (deferred_close_timeout).
  const cut = () => {
    if (exchange.cut === 'half-close') call.end();
    else if (exchange.cut === 'reset') call.cancel();
    else if (exchange.cut === 'envoy-close') {
      // Envoy's ExternalProcessorStreamImpl::close(): half-close, then reset.
      call.end();
      setImmediate(() => call.cancel());
    }
  };
  for (const message of messages) {
    call.write(message, () => {
      if (++written === messages.length) cutTimer = setTimeout(cut, 250);
    });
  }
  return status;
}

/** Cuts `bytes` into pieces at `count - 1` positions drawn from a seeded generator (pieces of 1 byte included). */
function randomChunks(bytes: Uint8Array, count: number, seed: number): Buffer[] {
  let state = seed >>> 0;
  const next = () => {
    state = (Math.imul(state ^ (state >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0;
    return state / 4294967296;
  };
  const cuts = [...new Set(Array.from({ length: count - 1 }, () => 1 + Math.floor(next() * (bytes.length - 1))))].sort((a, b) => a - b);
  const pieces: Buffer[] = [];
  let from = 0;
  for (const cut of [...cuts, bytes.length]) {
    pieces.push(Buffer.from(bytes.subarray(from, cut)));
    from = cut;
  }
  return pieces;
}

/** What the processor should record for a fixture answer, delivered whole. */
function expectedOutcome(testCase: UsageFixtureCase): UsageOutcome {
  const expected = testCase.expected;
  if (expected.kind === 'reported') {
    return {
      kind: 'metered',
      usage: { tokens: expected.tokens, estimated: false, final: expected.final, streamComplete: expected.streamComplete },
    };
  }
  // chat-completions without usage: ⌈request bytes ÷ 4⌉ input, ⌈delivered text bytes ÷ 4⌉ output.
  return {
    kind: 'metered',
    usage: {
      tokens: tokens(Math.ceil(REQUEST_BYTES / 4), Math.ceil(expected.deliveredTextBytes / 4)),
      estimated: true,
      final: expected.streamComplete,
      streamComplete: expected.streamComplete,
    },
  };
}

function fixtureExchange(testCase: UsageFixtureCase, who: Identity, chunks: Buffer[]): Exchange {
  return {
    request: requestHeaders(`${testCase.response.path}${testCase.response.family === 'generative-content' ? '?alt=sse' : ''}`, who),
    contentType: testCase.response.contentType!,
    chunks,
  };
}

describe('one MeteredResponse per answer, in each style, whole and streamed', () => {
  it.each(USAGE_FIXTURE_CASES.map((testCase) => [testCase.fixture, testCase] as const))(
    '%s, as one chunk and in chunks cut at random boundaries',
    async (_name, testCase) => {
      const body = usageFixture(testCase.fixture);
      const expected = testCase.expected;
      for (const chunks of [[Buffer.from(body)], randomChunks(body, 40, body.length), randomChunks(body, body.length, 7)]) {
        recorded.length = 0;
        const who = identity(testCase.response.family);
        const result = await runExchange(fixtureExchange(testCase, who, chunks));
        // The processor ends the stream itself once the answer is over, and never replies in observability mode.
        expect(result.status.code).toBe(grpc.status.OK);
        expect(result.replies).toEqual([]);
        expect(recorded).toEqual([
          {
            requestId: who.requestId,
            accountId: 'acme',
            keyId: 'key_ki7sq0QuenAUq8kr',
            keyPrefix: 'gk_live_1mm5',
            family: testCase.response.family,
            ...(expected.model ? { model: expected.model } : {}),
            outcome: expectedOutcome(testCase),
            delivery: 'complete',
            httpStatus: 200,
            observedAtMs: NOW,
          },
        ]);
      }
    },
  );

  it('an answer that ends in trailers is complete at its trailers (no chunk has end_of_stream)', async () => {
    const testCase = USAGE_FIXTURE_CASES.find((c) => c.fixture === 'messages-stream.sse')!;
    const who = identity('messages');
    const result = await runExchange({
      ...fixtureExchange(testCase, who, randomChunks(usageFixture(testCase.fixture), 10, 3)),
      trailers: [['x-upstream-done', '1']],
    });
    expect(result.status.code).toBe(grpc.status.OK);
    expect(recorded).toEqual([
      expect.objectContaining({ requestId: who.requestId, delivery: 'complete', outcome: expectedOutcome(testCase) }),
    ]);
  });

  it('Gemini: the model named by the path when the answer names none', async () => {
    const who = identity('generative-content');
    const body = Buffer.from(
      JSON.stringify({ candidates: [{ finishReason: 'STOP' }], usageMetadata: { promptTokenCount: 5, candidatesTokenCount: 7 } }),
    );
    await runExchange({
      request: requestHeaders('/v1beta/models/gemini-2.5-pro:generateContent', who),
      contentType: 'application/json',
      chunks: [body],
    });
    expect(recorded).toEqual([expect.objectContaining({ model: 'gemini-2.5-pro', outcome: expect.objectContaining({ kind: 'metered' }) })]);
  });
});

describe('answers that cost nothing, and requests metered against no one', () => {
  it('an error answer is recorded as costing nothing, and the stream ends at its response headers', async () => {
    const who = identity('chat-completions');
    const call = client.process();
    call.on('data', () => undefined);
    call.on('error', () => undefined);
    const status = new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
    call.write(observed({ request_headers: { headers: headerMap(requestHeaders('/v1/chat/completions', who)), end_of_stream: false } }));
    call.write(
      observed({
        response_headers: {
          headers: headerMap([
            [':status', '429'],
            ['content-type', 'application/json'],
          ]),
          end_of_stream: false,
        },
      }),
    );
    // No body sent: the status alone decided it, and the processor ends the stream (Envoy then sends no body).
    expect((await status).code).toBe(grpc.status.OK);
    expect(recorded).toEqual([
      expect.objectContaining({
        requestId: who.requestId,
        outcome: { kind: 'free', reason: 'error-status' },
        httpStatus: 429,
        delivery: 'complete',
      }),
    ]);
  });

  it.each([
    [
      'comes with the hold ext_authz placed (x-gateway-hold), for the ledger to release',
      '7 250 4096',
      { slot: 7, minorUnits: 250, tokens: 4096 },
    ],
    ['is metered all the same under a hold header ext_authz could not have written, which releases nothing', '7 -250 x', undefined],
  ])('an answer %s', async (_title, header, hold) => {
    const who = identity('chat-completions');
    await runExchange({
      request: [...requestHeaders('/v1/chat/completions', who), ['x-gateway-hold', header]],
      status: 503,
      contentType: 'application/json',
      chunks: [Buffer.from('{}')],
    });
    expect(recorded).toEqual([expect.objectContaining({ requestId: who.requestId, outcome: { kind: 'free', reason: 'error-status' } })]);
    expect(recorded[0]!.hold).toEqual(hold);
  });

  it('a request that is not a generation (GET /v1/models) is recorded as costing nothing', async () => {
    const who = identity('models');
    await runExchange({
      request: requestHeaders('/v1/models', who, 'GET'),
      contentType: 'application/json',
      chunks: [Buffer.from('{"data":[]}')],
    });
    expect(recorded).toEqual([expect.objectContaining({ family: 'models', outcome: { kind: 'free', reason: 'not-metered-request' } })]);
  });

  it('a request without identity headers gives no record, and its stream ends after the request headers', async () => {
    const body = Buffer.from(usageFixture('chat-completion.json'));
    const call = client.process();
    call.on('data', () => undefined);
    call.on('error', () => undefined);
    const status = new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
    call.write(
      observed({ request_headers: { headers: headerMap(requestHeaders('/v1/chat/completions', undefined)), end_of_stream: false } }),
    );
    expect((await status).code).toBe(grpc.status.OK);
    // What Envoy would have sent next changes nothing.
    await runExchange({ request: requestHeaders('/v1/chat/completions', undefined), contentType: 'application/json', chunks: [body] });
    // ext_authz's own refusal (a local reply): the stream starts with the response headers.
    await runExchange({ contentType: 'application/json', status: 401, chunks: [Buffer.from('{"error":{}}')] });
    await sleep(50);
    expect(recorded).toEqual([]);
  });

  it('a stream that ends before any message (half-closed or reset) gives no record and no error', async () => {
    const errorsBefore = app.logs.lines.filter((line) => line.includes('"level":"error"')).length;
    const quiet = client.process();
    quiet.on('error', () => undefined);
    const status = new Promise<grpc.StatusObject>((resolve) => quiet.on('status', resolve));
    quiet.end();
    expect((await status).code).toBe(grpc.status.OK);
    const session = connect(app.grpcAddress);
    try {
      const reset = session.request({ ':method': 'POST', ':path': PROCESS_PATH, 'content-type': 'application/grpc', te: 'trailers' });
      reset.on('error', () => undefined);
      await new Promise((resolve) => setTimeout(resolve, 50));
      reset.close(http2.constants.NGHTTP2_CANCEL);
      await new Promise((resolve) => reset.on('close', resolve));
    } finally {
      session.close();
    }
    await sleep(50);
    expect(recorded).toEqual([]);
    expect(app.logs.lines.filter((line) => line.includes('"level":"error"')).length).toBe(errorsBefore);
  });

  it.each([
    ['a repeated identity header', (h: [string, string][]) => [...h, ['x-gateway-account-id', 'other']]],
    ['a partial identity', (h: [string, string][]) => h.filter(([k]) => k !== 'x-gateway-key-id')],
    ['an unknown family', (h: [string, string][]) => h.map(([k, v]) => [k, k === 'x-gateway-route-family' ? 'chat' : v])],
    ['an id with a space', (h: [string, string][]) => h.map(([k, v]) => [k, k === 'x-gateway-account-id' ? 'ac me' : v])],
    ['no x-request-id', (h: [string, string][]) => h.filter(([k]) => k !== 'x-request-id')],
  ] as const)('%s: no record (never metered against anyone ambiguous)', async (_name, change) => {
    const headers = change(requestHeaders('/v1/chat/completions', identity('chat-completions'))) as [string, string][];
    const result = await runExchange({
      request: headers,
      contentType: 'application/json',
      chunks: [Buffer.from(usageFixture('chat-completion.json'))],
    });
    expect(result.status.code).toBe(grpc.status.OK);
    expect(recorded).toEqual([]);
  });
});

describe('answers cut short', () => {
  const messagesStream = USAGE_FIXTURE_CASES.find((c) => c.fixture === 'messages-stream.sse')!;
  const chatNoUsage = USAGE_FIXTURE_CASES.find((c) => c.fixture === 'chat-stream-no-usage.sse')!;

  /** The first `events` SSE events of a fixture (whole events, as a client would have received them). */
  function firstEvents(fixture: string, events: number): Buffer {
    const text = Buffer.from(usageFixture(fixture)).toString('utf8');
    const parts = text.split(/(?<=\n\n)/);
    return Buffer.from(parts.slice(0, events).join(''), 'utf8');
  }

  it.each(['half-close', 'reset', 'envoy-close'] as const)(
    'a client that disconnects mid-stream (%s) is charged what the stream reported until then, and at least the text it got',
    async (cut) => {
      // message_start (input 25, output 1) and the delta "Hello", no final message_delta: 5 bytes, 2 tokens estimated.
      const who = identity('messages');
      const delivered = firstEvents(messagesStream.fixture, 4);
      const result = await runExchange({ ...fixtureExchange(messagesStream, who, randomChunks(delivered, 5, 11)), cut });
      await until(() => recorded.length === 1, 'the record');
      if (cut === 'half-close') expect(result.status.code).toBe(grpc.status.OK);
      expect(recorded[0]).toMatchObject({
        requestId: who.requestId,
        delivery: 'disconnected',
        model: 'claude-opus-4-6',
        outcome: { kind: 'metered', usage: { estimated: true, final: false, streamComplete: false } },
      });
      const outcome = recorded[0]!.outcome;
      expect(outcome.kind === 'metered' && outcome.usage.tokens).toEqual(tokens(25, 2));
      await sleep(30);
      expect(recorded).toHaveLength(1);
    },
  );

  it('a chat-completions stream cut before any usage is estimated from the text delivered', async () => {
    const who = identity('chat-completions');
    await runExchange({ ...fixtureExchange(chatNoUsage, who, [firstEvents(chatNoUsage.fixture, 3)]), cut: 'envoy-close' });
    await until(() => recorded.length === 1, 'the record');
    expect(recorded[0]).toMatchObject({
      delivery: 'disconnected',
      outcome: {
        kind: 'metered',
        usage: { estimated: true, streamComplete: false, tokens: { inputTokens: Math.ceil(REQUEST_BYTES / 4) } },
      },
    });
  });

  it('a Gemini embedding, whose answer carries no usage, is charged the estimate of its input', async () => {
    const who = identity('generative-content');
    await runExchange({
      request: requestHeaders('/v1beta/models/text-embedding-004:embedContent', who),
      contentType: 'application/json',
      chunks: [Buffer.from('{"embedding":{"values":[0.25,-0.5]}}')],
    });
    await until(() => recorded.length === 1, 'the record');
    expect(recorded[0]).toMatchObject({
      model: 'text-embedding-004',
      outcome: { kind: 'metered', usage: { estimated: true, tokens: tokens(Math.ceil(REQUEST_BYTES / 4), 0) } },
    });
  });

  it('a stream that ends before the response headers is recorded as costing nothing (no response)', async () => {
    const who = identity('chat-completions');
    const call = client.process();
    call.on('data', () => undefined);
    call.on('error', () => undefined);
    call.write(observed({ request_headers: { headers: headerMap(requestHeaders('/v1/chat/completions', who)), end_of_stream: false } }));
    call.end();
    await until(() => recorded.length === 1, 'the record');
    expect(recorded[0]).toMatchObject({ delivery: 'disconnected', outcome: { kind: 'free', reason: 'no-response' } });
    expect(recorded[0]!.httpStatus).toBeUndefined();
  });
});

describe('protocol', () => {
  it('a malformed ProcessingRequest is answered INTERNAL and meters nothing', async () => {
    const who = identity('chat-completions');
    const session = connect(app.grpcAddress);
    try {
      const first = serializeProcessingRequest(
        observed({ request_headers: { headers: headerMap(requestHeaders('/v1/chat/completions', who)), end_of_stream: false } }),
      );
      const answer = await rawCall(session, {
        path: PROCESS_PATH,
        body: [grpcFrame(first), grpcFrame(Buffer.from([0x2a, 0x05, 0x0a, 0x09, 0x01]))],
        endStream: false,
      });
      expect(answer.grpcStatus).toBe(grpc.status.INTERNAL);
      expect(decodeURIComponent(answer.grpcMessage!)).toMatch(/^Error deserializing request/);
      await sleep(30);
      expect(recorded).toEqual([]);
      const logged = app.logs.events('ext_proc_unmetered');
      expect(logged.at(-1)).toMatchObject({ reason: 'malformed_message', requestId: who.requestId });
    } finally {
      session.close();
    }
  });

  it('a message sent without observability_mode gets its pass-through reply, and is metered all the same', async () => {
    const testCase = USAGE_FIXTURE_CASES.find((c) => c.fixture === 'gemini-stream.sse')!;
    const who = identity('generative-content');
    const exchange = { ...fixtureExchange(testCase, who, randomChunks(usageFixture(testCase.fixture), 6, 5)), blocking: true };
    const result = await runExchange(exchange);
    expect(result.status.code).toBe(grpc.status.OK);
    // Each the matching member, empty: CONTINUE, nothing changed.
    const kinds = envoyMessages(exchange).map((message) => Object.keys(message).find((key) => key.startsWith('re'))!);
    expect(result.replies).toEqual(kinds);
    expect(kinds.slice(0, 3)).toEqual(['request_headers', 'response_headers', 'response_body']);
    expect(recorded).toEqual([expect.objectContaining({ requestId: who.requestId, outcome: expectedOutcome(testCase) })]);
  });

  it('Check keeps working on the same port while Process streams are open', async () => {
    const account = `acct-${Math.random().toString(36).slice(2, 8)}`;
    expect((await app.admin('POST', '/admin/accounts', { id: account, name: 'Both' })).status).toBe(201);
    const key = (await app.admin('POST', `/admin/accounts/${account}/keys`, {})).body.key;
    const check = createOfficialCheckClient(app.grpcAddress);
    try {
      let openStreams = 0;
      const gauge = setInterval(() => {
        void fetch(`${app.adminUrl}/metrics`)
          .then((response) => response.text())
          .then((text) => (openStreams = Number(/^gateway_authz_ext_proc_streams_open (\d+)/m.exec(text)?.[1] ?? 0)))
          .catch(() => undefined);
      }, 20);
      const open = Array.from({ length: 20 }, () => {
        const call = client.process();
        call.on('data', () => undefined);
        call.on('error', () => undefined);
        call.write(
          observed({
            request_headers: {
              headers: headerMap(requestHeaders('/v1/chat/completions', identity('chat-completions'))),
              end_of_stream: false,
            },
          }),
        );
        return call;
      });
      for (let i = 0; i < 10; i += 1) expect(await decisionFor(check, key)).toBe('allow');
      // Cut once the processor has them all (Envoy's close comes seconds after the last message).
      await until(() => openStreams >= 20, 'the streams to be open');
      await sleep(100);
      for (const call of open) call.cancel();
      clearInterval(gauge);
      await until(() => recorded.length === 20, 'the cancelled streams’ records');
    } finally {
      check.close();
    }
  });
});

describe('bounds', () => {
  it('past EXT_PROC_MAX_STREAMS a new stream is refused UNAVAILABLE (REFUSED_STREAM), counted, and the next one after a close is served', async () => {
    const bounded: MeteredResponse[] = [];
    const small = await startAppUnderTest({ env: { EXT_PROC_MAX_STREAMS: '2' }, meteredResponses: { record: (r) => bounded.push(r) } });
    const smallClient = createProcessClient(small.grpcAddress);
    try {
      const held = [0, 1].map(() => {
        const call = smallClient.process();
        call.on('data', () => undefined);
        call.on('error', () => undefined);
        call.write(
          observed({ request_headers: { headers: headerMap(requestHeaders('/v1/messages', identity('messages'))), end_of_stream: false } }),
        );
        return call;
      });
      await sleep(100);
      const refused = await runExchange(
        {
          request: requestHeaders('/v1/messages', identity('messages')),
          contentType: 'application/json',
          chunks: [Buffer.from(usageFixture('messages.json'))],
        },
        smallClient,
      );
      expect(refused.status.code).toBe(grpc.status.UNAVAILABLE);
      const metrics = await (await fetch(`${small.adminUrl}/metrics`)).text();
      expect(metrics).toMatch(/^gateway_authz_ext_proc_streams_refused_total [1-9]/m);
      expect(metrics).toMatch(/^gateway_authz_ext_proc_streams_open 2$/m);
      held[0]!.end();
      await until(() => bounded.length === 1, 'the first held stream to end');
      const who = identity('messages');
      const served = await runExchange(
        {
          request: requestHeaders('/v1/messages', who),
          contentType: 'application/json',
          chunks: [Buffer.from(usageFixture('messages.json'))],
        },
        smallClient,
      );
      expect(served.status.code).toBe(grpc.status.OK);
      expect(bounded.at(-1)).toMatchObject({ requestId: who.requestId, delivery: 'complete' });
      held[1]!.cancel();
    } finally {
      smallClient.close();
      await small.close();
    }
  });
});

describe('metrics', () => {
  it('count answers by family, outcome and delivery, with no account or key labels', async () => {
    const testCase = USAGE_FIXTURE_CASES.find((c) => c.fixture === 'chat-stream-no-usage.sse')!;
    await runExchange(fixtureExchange(testCase, identity('chat-completions'), [Buffer.from(usageFixture(testCase.fixture))]));
    await runExchange({ request: requestHeaders('/v1/chat/completions', undefined), contentType: 'application/json', chunks: [] });
    const text = await (await fetch(`${app.adminUrl}/metrics`)).text();
    expect(text).toMatch(
      /^gateway_authz_ext_proc_responses_total\{family="chat-completions",outcome="estimated",delivery="complete"\} [1-9]/m,
    );
    expect(text).toMatch(
      /^gateway_authz_ext_proc_responses_total\{family="unknown",outcome="not_metered",delivery="disconnected"\} [1-9]/m,
    );
    expect(text).toMatch(/^gateway_authz_ext_proc_unmetered_total\{reason="no_identity"\} [1-9]/m);
    expect(text).toMatch(/^gateway_authz_ext_proc_messages_total [1-9]/m);
    expect(text).toMatch(/^gateway_authz_ext_proc_response_body_bytes_total [1-9]/m);
    expect(text).toMatch(/^gateway_authz_ext_proc_streams_open 0$/m);
    const extProcLines = text.split('\n').filter((line) => line.startsWith('gateway_authz_ext_proc'));
    expect(extProcLines.join('\n')).not.toMatch(/acme|key_|gk_live|account|req-/);
  });
});
