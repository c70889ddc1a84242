/**
 * Pins the Envoy-faithful front's ext_proc filter (ext-proc-tap.ts) to what
 * envoy.yaml configures and Envoy does in observability mode, against a stub
 * authz server and a processor stub that records every side stream (both
 * built from Envoy's official protos), and the fake upstream.
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

import type { TokenCounts } from '../../src/metering/usage';
import { attributeValue, headerEntries, type ReceivedProcessingRequest } from '../support/ext-proc-protocol';
import { isFinalMessage, startExtProcRecorder, type ExtProcRecorder, type RecordedSideStream } from '../support/ext-proc-recorder';
import { usageReadingOf } from '../support/side-stream-usage';
import { startStubAuthz, type StubAuthz } from '../support/stub-authz';
import { USAGE_FIXTURE_CASES } from '../support/usage-fixtures';
import { E2E_FRONT_TIMEOUT_MS } from './e2e-world';
import { sendHttp, startEnvoyFront, type EnvoyFront, type HttpCall, type HttpReply } from './envoy-front';
import { extProcSettingsFromEnvoyYaml, type ExtProcSettings } from './ext-proc-tap';
import { SLOW_STREAM_PIECES, startFakeUpstream, type FakeUpstream, type RecordedRequest } from './fake-upstream';

const IDENTITY = {
  'x-gateway-account-id': 'acct_1',
  'x-gateway-key-id': 'key_1',
  'x-gateway-key-prefix': 'gk_live_abcd',
  'x-gateway-route-family': 'messages',
};
const SLOW_GAP_MS = 20;
/** A short deferred close, so tests see it; the filter is otherwise as envoy.yaml configures it. */
const DEFERRED_CLOSE_MS = 400;

/** An allow as gateway-authz answers it: identity set (overwrite), the credential removed, a rate-limit header for the client. */
function allowWithIdentity(family = IDENTITY['x-gateway-route-family']): object {
  const identity = { ...IDENTITY, 'x-gateway-route-family': family };
  return {
    status: { code: 0, message: '' },
    ok_response: {
      headers: Object.entries(identity).map(([key, value]) => ({ header: { key, value }, append: { value: false } })),
      headers_to_remove: ['authorization', 'x-api-key'],
      response_headers_to_add: [{ header: { key: 'x-ratelimit-remaining-requests', value: '9' }, append: { value: false } }],
    },
  };
}

const kinds = (stream: RecordedSideStream) => stream.messages.map((m) => m.request);
const headersOf = (message: ReceivedProcessingRequest | undefined) =>
  headerEntries((message?.request_headers ?? message?.response_headers)?.headers);
const bodyMessages = (stream: RecordedSideStream) =>
  stream.messages.filter((m) => m.request === 'response_body').map((m) => m.response_body!);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let authz: StubAuthz;
let upstream: FakeUpstream;
let processor: ExtProcRecorder;
let front: EnvoyFront;
const settings: ExtProcSettings = { ...extProcSettingsFromEnvoyYaml(), deferredCloseTimeoutMs: DEFERRED_CLOSE_MS };
const fronts: EnvoyFront[] = [];

async function frontWith(extProc: Partial<Parameters<typeof startEnvoyFront>[0]['extProc']> | undefined): Promise<EnvoyFront> {
  const started = await startEnvoyFront({
    authzAddress: authz.address,
    upstreamUrl: upstream.url,
    // Not about the Check deadline: on a loaded test machine 250 ms can turn a Check into a 503.
    timeoutMs: E2E_FRONT_TIMEOUT_MS,
    ...(extProc ? { extProc: { address: processor.address, settings, ...extProc } } : {}),
  });
  fronts.push(started);
  return started;
}

beforeAll(async () => {
  authz = await startStubAuthz();
  upstream = await startFakeUpstream({ slowEventGapMs: SLOW_GAP_MS });
  processor = await startExtProcRecorder();
  front = await frontWith({});
});

afterAll(async () => {
  for (const started of fronts) await started.close();
  await processor?.close();
  await upstream?.close();
  await authz?.close();
});

beforeEach(() => {
  authz.handler = async () => allowWithIdentity();
  processor.behaviour = 'end-at-final';
  processor.streams.length = 0;
  upstream.requests.length = 0;
});

/** One call through `via`, and its side stream once the processor has the final message. */
async function meteredCall(
  call: HttpCall,
  via: EnvoyFront = front,
): Promise<{ reply: HttpReply; stream: RecordedSideStream; sent: RecordedRequest }> {
  const reply = await sendHttp(via.url, call);
  const sent = upstream.requests[upstream.requests.length - 1]!;
  const stream = await processor.streamFor(String(sent.headers['x-request-id']));
  await stream.until((s) => s.sawFinalMessage, 5000, 'the final message');
  return { reply, stream, sent };
}

const messagesCall = (model: string, stream: boolean, headers: Record<string, string> = {}): HttpCall => ({
  method: 'POST',
  path: '/v1/messages?beta=true',
  headers: {
    host: 'api.example.test',
    authorization: 'Bearer gk_live_secret',
    'content-type': 'application/json',
    'accept-encoding': 'gzip, br',
    ...headers,
  },
  body: JSON.stringify({ model, max_tokens: 16, stream, messages: [{ role: 'user', content: 'hi' }] }),
});

describe('what the front sends, as envoy.yaml configures the filter', () => {
  it('a streamed answer: the request headers ext_authz left, the response headers, every chunk in order, the last with end_of_stream', async () => {
    const { reply, stream, sent } = await meteredCall(messagesCall('claude-x', true));
    expect(reply.status).toBe(200);
    expect(kinds(stream)).toEqual(['request_headers', 'response_headers', ...bodyMessages(stream).map(() => 'response_body')]);

    // Request headers: pseudo-headers first, then as ext_authz left them (identity set, credential removed), the
    // client's accept-encoding (the router sets identity only toward the upstream), Envoy's x-request-id.
    const request = stream.messages[0]!;
    const requestHeaders = headersOf(request);
    expect(requestHeaders.slice(0, 4)).toEqual([
      [':authority', 'api.example.test'],
      [':path', '/v1/messages?beta=true'],
      [':method', 'POST'],
      [':scheme', 'http'],
    ]);
    expect(Object.fromEntries(requestHeaders)).toMatchObject({
      ...IDENTITY,
      'content-type': 'application/json',
      'accept-encoding': 'gzip, br',
      'x-forwarded-proto': 'http',
      'x-request-id': sent.headers['x-request-id'],
    });
    expect(requestHeaders.map(([key]) => key)).not.toContain('authorization');
    expect(request.request_headers!.end_of_stream).toBe(false);
    // Envoy ≥ 1.2x fills raw_value only.
    for (const header of request.request_headers!.headers!.headers) expect(header.value).toBe('');
    expect(sent.headers['accept-encoding']).toBe('identity');

    // Response headers: the upstream's, before ext_authz's response_headers_to_add; request.size attached here.
    const response = stream.messages[1]!;
    expect(headersOf(response)[0]).toEqual([':status', '200']);
    expect(Object.fromEntries(headersOf(response))).toMatchObject({ 'content-type': 'text/event-stream; charset=utf-8' });
    expect(headersOf(response).map(([key]) => key)).not.toContain('x-ratelimit-remaining-requests');
    expect(reply.headers['x-ratelimit-remaining-requests']).toBe('9');
    expect(response.response_headers!.end_of_stream).toBe(false);
    expect(attributeValue(response, 'request.size')).toBe(Buffer.byteLength(sent.body));
    expect(Object.keys(request.attributes)).toEqual([]);

    // Body: every chunk the upstream wrote, in order; only the last, empty, has end_of_stream.
    const bodies = bodyMessages(stream);
    expect(stream.responseBody().toString()).toBe(reply.body);
    expect(stream.responseBody().equals(Buffer.concat(sent.responseChunks))).toBe(true);
    expect(bodies.length).toBeGreaterThan(2);
    expect(bodies.map((b) => b.end_of_stream)).toEqual([...bodies.slice(1).map(() => false), true]);
    expect(bodies[bodies.length - 1]!.body.length).toBe(0);
    // Every message: observability mode, an empty metadata_context; no request body (request_body_mode NONE).
    for (const message of stream.messages) {
      expect(message.observability_mode).toBe(true);
      expect(message.metadata_context).toEqual({ filter_metadata: {}, typed_filter_metadata: {} });
    }
    expect(usageReadingOf(stream)).toMatchObject({ kind: 'reported', tokens: sent.reportedUsage, streamComplete: true });
    // The processor ended the stream at the final message: Envoy had nothing left to close.
    await stream.until((s) => s.over);
    expect(stream.endedByProcessorAt).toBeDefined();
  });

  it('a whole JSON answer: its body, then an empty chunk with end_of_stream', async () => {
    const { stream, sent } = await meteredCall(messagesCall('claude-x', false));
    const bodies = bodyMessages(stream);
    expect(bodies.map((b) => b.end_of_stream)).toEqual([...bodies.slice(1).map(() => false), true]);
    expect(stream.responseBody().toString()).toBe(Buffer.concat(sent.responseChunks).toString());
    expect(usageReadingOf(stream)).toMatchObject({ kind: 'reported', tokens: sent.reportedUsage });
  });

  it('request.size is the body bytes received when the request has no content-length (chunked)', async () => {
    const body = JSON.stringify({
      model: 'claude-x',
      max_tokens: 16,
      messages: [{ role: 'user', content: 'a longer prompt, sent in pieces' }],
    });
    const reply = await new Promise<number>((resolve, reject) => {
      const req = http.request(
        {
          host: '127.0.0.1',
          port: front.port,
          method: 'POST',
          path: '/v1/messages',
          headers: { 'transfer-encoding': 'chunked' },
          agent: false,
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.on('error', reject);
      req.write(body.slice(0, 10));
      setTimeout(() => req.end(body.slice(10)), 50);
    });
    expect(reply).toBe(200);
    const sent = upstream.requests[0]!;
    const stream = await processor.streamFor(String(sent.headers['x-request-id']));
    await stream.until((s) => s.sawFinalMessage);
    expect(headersOf(stream.messages[0]).map(([key]) => key)).not.toContain('content-length');
    expect(attributeValue(stream.messages[1]!, 'request.size')).toBe(Buffer.byteLength(body));
  });

  it('an upstream error answer goes to the processor as it came (no usage in it)', async () => {
    const { reply, stream } = await meteredCall(messagesCall('claude-error-529', false));
    expect(reply.status).toBe(529);
    expect(headersOf(stream.messages[1])[0]).toEqual([':status', '529']);
    expect(stream.responseBody().toString()).toBe(reply.body);
    expect(usageReadingOf(stream)).toMatchObject({ kind: 'none', reason: 'error-status' });
  });

  it('a deny is a local reply that Envoy runs through ext_proc too: response headers and body only, so no identity', async () => {
    authz.handler = async () => ({
      status: { code: 16, message: '' },
      denied_response: {
        status: { code: 'Unauthorized' },
        headers: [{ header: { key: 'content-type', value: 'application/json' } }],
        body: '{"error":"no"}',
      },
    });
    const reply = await sendHttp(front.url, messagesCall('claude-x', false));
    expect(reply.status).toBe(401);
    const [stream] = await processor.waitForStreams(1);
    await stream!.until((s) => s.sawFinalMessage);
    expect(kinds(stream!)).toEqual(['response_headers', 'response_body']);
    expect(headersOf(stream!.messages[0])).toEqual([
      [':status', '401'],
      ['content-type', 'application/json'],
      ['content-length', '14'],
    ]);
    expect(stream!.messages[1]!.response_body).toEqual({ body: Buffer.from('{"error":"no"}'), end_of_stream: true });
    expect(stream!.requestId).toBeUndefined();
    expect(upstream.requests).toHaveLength(0);
  });

  it('status_on_error (503, empty body) ends on its response headers', async () => {
    authz.handler = async () => {
      throw new Error('authz down');
    };
    const reply = await sendHttp(front.url, messagesCall('claude-x', false));
    expect(reply.status).toBe(503);
    const [stream] = await processor.waitForStreams(1);
    await stream!.until((s) => s.sawFinalMessage);
    expect(kinds(stream!)).toEqual(['response_headers']);
    expect(stream!.messages[0]!.response_headers!.end_of_stream).toBe(true);
  });

  it('chunks are what the upstream connection delivered, and can be re-split to any boundaries; the usage read is the same', async () => {
    // Pieces of 1, 2, 3, 5 and 7 bytes in turn: boundaries inside events, JSON tokens and UTF-8 characters.
    // Hundreds of messages take a while to flush: Envoy's own 5 s deferred close, not the short one.
    const sizes = [1, 2, 3, 5, 7];
    const bytewise = await frontWith({
      settings: extProcSettingsFromEnvoyYaml(),
      splitBodyChunk: (chunk) => {
        const pieces: Buffer[] = [];
        for (let at = 0, i = 0; at < chunk.length; at += sizes[i++ % sizes.length]!)
          pieces.push(chunk.subarray(at, at + sizes[i % sizes.length]!));
        return pieces;
      },
    });
    for (const fixture of ['messages-stream', 'gemini-stream', 'chat-stream-usage', 'responses-stream']) {
      processor.streams.length = 0;
      const expected = USAGE_FIXTURE_CASES.find((c) => c.fixture.startsWith(`${fixture}.`))!;
      const isGemini = fixture.startsWith('gemini');
      if (isGemini) authz.handler = async () => allowWithIdentity('generative-content');
      else authz.handler = async () => allowWithIdentity(fixture.startsWith('messages') ? 'messages' : 'chat-completions');
      const call: HttpCall = isGemini
        ? { method: 'POST', path: `/v1beta/models/fixture-${fixture}:streamGenerateContent?alt=sse`, body: '{}' }
        : {
            method: 'POST',
            path: fixture.startsWith('messages')
              ? '/v1/messages'
              : fixture.startsWith('responses')
                ? '/v1/responses'
                : '/v1/chat/completions',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ model: `fixture-${fixture}`, stream: true }),
          };
      const { reply, stream } = await meteredCall(call, bytewise);
      const bodies = bodyMessages(stream);
      expect({ fixture, largest: Math.max(...bodies.map((b) => b.body.length)) }).toEqual({ fixture, largest: 7 });
      expect(bodies.length).toBeGreaterThan(Buffer.byteLength(reply.body) / 7);
      expect(stream.responseBody().toString()).toBe(reply.body);
      expect({ fixture, reading: usageReadingOf(stream) }).toEqual({ fixture, reading: expected.expected });
    }
  });
});

describe('observability mode: the processor never holds up or breaks an answer', () => {
  it('a processor that never answers: the client has its whole answer at once; the stream is half-closed and reset after deferred_close_timeout', async () => {
    processor.behaviour = 'silent';
    const { reply, stream } = await meteredCall(messagesCall('claude-x', true));
    const answeredAt = Date.now();
    expect(reply.status).toBe(200);
    await stream.until((s) => s.cancelledAt !== undefined, 5000, 'the deferred close');
    expect(stream.sawFinalMessage).toBe(true);
    // "At once" is judged against the processor's stream, not a bound near the deferred close: the client had its
    // whole answer a deferred_close_timeout before the stream was even half-closed.
    expect(stream.halfClosedAt! - answeredAt).toBeGreaterThanOrEqual(DEFERRED_CLOSE_MS - 50);
    expect(stream.cancelledAt!).toBeGreaterThanOrEqual(stream.halfClosedAt!);
    expect(front.extProc!.stats.deferredCloses).toBeGreaterThanOrEqual(1);
  });

  it('a processor that is down: every answer is unchanged; the stream just fails', async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const address = `127.0.0.1:${(closed.address() as AddressInfo).port}`;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const down = await frontWith({ address });
    const direct = await sendHttp(front.url, messagesCall('claude-x', true));
    const viaDown = await sendHttp(down.url, messagesCall('claude-x', true));
    expect(viaDown.status).toBe(200);
    expect(viaDown.body).toBe(direct.body);
    await sleep(100);
    expect(down.extProc!.stats).toMatchObject({ opened: 1, failed: 1 });
  });

  it('a processor that fails at the first message: the answer goes on, nothing more is sent on that stream', async () => {
    processor.behaviour = 'fail';
    const reply = await sendHttp(front.url, messagesCall('claude-slow', true));
    expect(reply.status).toBe(200);
    expect(reply.body).toContain(`piece ${SLOW_STREAM_PIECES - 1} `);
    const [stream] = await processor.waitForStreams(1);
    // The error reaches the front within a few ms; the answer's 40 pieces take 40 × 20 ms.
    expect(stream!.messages.length).toBeLessThan(5);
    expect(front.extProc!.stats.failed).toBeGreaterThanOrEqual(1);
  });
});

describe('a client that goes away mid-answer', () => {
  it('the processor has what passed, with no end_of_stream; nothing is sent on the disconnect; the deferred close ends the stream', async () => {
    processor.behaviour = 'silent';
    let received = '';
    const goneAt = await new Promise<number>((resolve, reject) => {
      const call = messagesCall('claude-slow', true);
      const req = http.request(
        { host: '127.0.0.1', port: front.port, method: 'POST', path: call.path, headers: call.headers, agent: false },
        (res) => {
          res.on('data', (chunk: Buffer) => {
            received += chunk.toString();
            if (received.includes('piece 5 ')) {
              req.destroy();
              resolve(Date.now());
            }
          });
        },
      );
      req.on('error', (err) => (received.includes('piece 5 ') ? undefined : reject(err)));
      req.end(call.body);
    });
    const sent = upstream.requests[0]!;
    const stream = await processor.streamFor(String(sent.headers['x-request-id']));
    await stream.until((s) => s.cancelledAt !== undefined, 5000, 'the deferred close');
    expect(stream.messages.some(isFinalMessage)).toBe(false);
    expect(stream.responseBody().toString().startsWith(received)).toBe(true);
    expect(stream.responseBody().toString()).not.toContain(`piece ${SLOW_STREAM_PIECES - 1} `);
    // Nothing arrived after the client left (but what was already in flight).
    const lastMessageAt = stream.receivedAt[stream.receivedAt.length - 1]!;
    expect(lastMessageAt - goneAt).toBeLessThan(SLOW_GAP_MS * 3);
    expect(stream.halfClosedAt! - goneAt).toBeGreaterThanOrEqual(DEFERRED_CLOSE_MS - 50);
    expect(sent.completed).toBe(false);
    // What a processor can charge: the running counts message_start reported.
    const usage: TokenCounts = upstream.usage;
    expect(usageReadingOf(stream)).toMatchObject({
      kind: 'reported',
      tokens: { ...usage, outputTokens: 1 },
      final: false,
      streamComplete: false,
    });
  });
});

describe('the option is off by default', () => {
  it('a front without extProc opens no side stream', async () => {
    const plain = await startEnvoyFront({ authzAddress: authz.address, upstreamUrl: upstream.url, timeoutMs: E2E_FRONT_TIMEOUT_MS });
    fronts.push(plain);
    expect((await sendHttp(plain.url, messagesCall('claude-x', true))).status).toBe(200);
    await sleep(100);
    expect(processor.streams).toHaveLength(0);
    expect(plain.extProc).toBeUndefined();
  });
});
