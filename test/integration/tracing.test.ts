import { randomBytes } from 'node:crypto';
import { createOfficialCheckClient, envoyCheckRequest, type OfficialCheckClient } from '../support/envoy-official-client';
import { createProcessClient, headerMap, observed, type ProcessClient } from '../support/ext-proc-official';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../support/otlp-receiver';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { TEST_ADMIN_TOKEN, TEST_REDIS_TIMEOUT_MS } from '../support/running-app';
import { registerSecrets } from '../support/secret-scan';
import { startServerProcess, type ServerProcess } from '../support/server-process';
import { usageFixture } from '../support/usage-fixtures';

/**
 * OpenTelemetry tracing end to end (docs/operations/tracing.md): a gateway
 * process on real Redis exports over OTLP/HTTP to a receiver started here,
 * which decodes each export with the official opentelemetry-proto files.
 * Checks and a metered answer come over real gRPC with Envoy's official
 * protos, carrying trace context as Envoy passes it: in the Check call's own
 * metadata (Envoy's ext_authz client span), or only in the request's headers.
 */
let redis: TestRedis;
let receiver: OtlpReceiver;
let server: ServerProcess;
let client: OfficialCheckClient;
let processClient: ProcessClient;
let key: string;
let keyPrefix: string;

const ACCOUNT = 'traced-co';

beforeAll(async () => {
  [redis, receiver] = await Promise.all([startTestRedis(), startOtlpReceiver()]);
  server = await startServerProcess({
    REDIS_URL: redis.url,
    REDIS_TIMEOUT_MS: TEST_REDIS_TIMEOUT_MS,
    ADMIN_TOKEN: TEST_ADMIN_TOKEN,
    LOG_LEVEL: 'info',
    OTEL_TRACES_EXPORTER: 'otlp',
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
    OTEL_SERVICE_NAME: 'authz-under-test',
    OTEL_TRACES_SAMPLER: 'parentbased_always_on',
    OTEL_PROPAGATORS: 'tracecontext,b3',
  });
  registerSecrets(TEST_ADMIN_TOKEN);
  const admin = async (path: string, body: object) => {
    const response = await fetch(`${server.adminUrl}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(response.status).toBe(201);
    return (await response.json()) as { key: string; prefix: string };
  };
  await admin('/admin/accounts', { id: ACCOUNT, name: ACCOUNT });
  ({ key, prefix: keyPrefix } = await admin(`/admin/accounts/${ACCOUNT}/keys`, { name: 'traced' }));
  registerSecrets(key);
  client = createOfficialCheckClient(server.grpcAddress);
  processClient = createProcessClient(server.grpcAddress);
}, 60_000);

afterAll(async () => {
  client?.close();
  processClient?.close();
  await server?.stop();
  await receiver?.close();
  await redis?.stop();
});

/** A fresh W3C trace context: ids in lower-case hex, the sampled flag as given. */
function traceContext(sampled: boolean) {
  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-${sampled ? '01' : '00'}` };
}

const chatCheck = (headers: Record<string, string>, requestId: string) =>
  envoyCheckRequest({ path: '/v1/chat/completions', method: 'POST', requestId, headers: { authorization: `Bearer ${key}`, ...headers } });

const inTrace = (traceId: string) => (spans: ReceivedSpan[]) => spans.filter((span) => span.traceId === traceId);

async function spansOfTrace(traceId: string, count: number): Promise<ReceivedSpan[]> {
  await receiver.waitFor((spans) => inTrace(traceId)(spans).length >= count);
  return inTrace(traceId)(receiver.spans);
}

/** No attribute anywhere carries the key, its secret part, or the Authorization header's value. */
function expectNoSecret(spans: ReceivedSpan[]): void {
  const text = JSON.stringify(spans);
  expect(text).not.toContain(key);
  expect(text).not.toContain(key.slice(keyPrefix.length));
  expect(text).not.toContain('Bearer');
}

describe('the check span', () => {
  it("joins Envoy's ext_authz span from the call's metadata, with a Redis child span and attributes free of secrets", async () => {
    const envoySpan = traceContext(true);
    // The client's own traceparent in the request headers: the call's metadata wins, as Envoy's span is the nearer step.
    const clientSpan = traceContext(true);
    const answer = await client.check(chatCheck({ traceparent: clientSpan.traceparent }, 'req-traced-allow'), undefined, {
      traceparent: envoySpan.traceparent,
    });
    expect(answer.status.code).toBe(0);

    const spans = await spansOfTrace(envoySpan.traceId, 2);
    const check = spans.find((span) => span.name === 'check')!;
    expect(check).toMatchObject({ serviceName: 'authz-under-test', parentSpanId: envoySpan.spanId, kind: 2 });
    expect(check.attributes).toMatchObject({
      'gateway_authz.route_family': 'chat-completions',
      'gateway_authz.decision': 'allow',
      'gateway_authz.account_id': ACCOUNT,
      'gateway_authz.key_prefix': keyPrefix,
      'gateway_authz.request_id': 'req-traced-allow',
      'rpc.method': 'Check',
    });
    expect(check.attributes['gateway_authz.reason']).toBeUndefined();
    const store = spans.find((span) => span.name === 'redis authorize')!;
    expect(store).toMatchObject({ parentSpanId: check.spanId, kind: 3, attributes: { 'db.system.name': 'redis' } });
    expect(inTrace(clientSpan.traceId)(receiver.spans)).toEqual([]);
    expectNoSecret(spans);
  });

  it("joins the request's own trace from its headers when the call carries none", async () => {
    const clientSpan = traceContext(true);
    await client.check(chatCheck({ traceparent: clientSpan.traceparent }, 'req-traced-headers'));
    const spans = await spansOfTrace(clientSpan.traceId, 2);
    expect(spans.find((span) => span.name === 'check')).toMatchObject({ parentSpanId: clientSpan.spanId });
  });

  it('joins a B3 trace, and a denial carries its reason (no Redis span: the key never reached the store)', async () => {
    const traceId = randomBytes(16).toString('hex');
    const spanId = randomBytes(8).toString('hex');
    const answer = await client.check(
      envoyCheckRequest({
        path: '/v1/chat/completions',
        method: 'POST',
        requestId: 'req-traced-deny',
        headers: { b3: `${traceId}-${spanId}-1` },
      }),
    );
    expect(answer.status.code).not.toBe(0);
    const [check] = await spansOfTrace(traceId, 1);
    expect(check).toMatchObject({ name: 'check', parentSpanId: spanId });
    expect(check!.attributes).toMatchObject({
      'gateway_authz.decision': 'deny',
      'gateway_authz.reason': 'missing_credential',
      'gateway_authz.route_family': 'chat-completions',
    });
  });

  it('starts a trace of its own for a Check without trace context: the root sampler decides (always on here)', async () => {
    await client.check(chatCheck({}, 'req-root'));
    const [check] = await receiver.waitFor((spans) => spans.some((span) => span.attributes['gateway_authz.request_id'] === 'req-root'));
    const root = receiver.spans.find((span) => span.attributes['gateway_authz.request_id'] === 'req-root')!;
    expect(check).toBeDefined();
    expect(root).toMatchObject({ name: 'check', parentSpanId: '' });
    expect(root.traceId).toMatch(/^[0-9a-f]{32}$/);
    await spansOfTrace(root.traceId, 2);
    expect(inTrace(root.traceId)(receiver.spans).find((span) => span.name === 'redis authorize')).toMatchObject({
      parentSpanId: root.spanId,
    });
  });

  it('exports nothing for a parent that is not sampled', async () => {
    const unsampled = traceContext(false);
    await client.check(chatCheck({}, 'req-unsampled'), undefined, { traceparent: unsampled.traceparent });
    // Spans leave in the order they ended: once a later sampled Check's spans are in, any of the first would be too.
    const later = traceContext(true);
    await client.check(chatCheck({}, 'req-after-unsampled'), undefined, { traceparent: later.traceparent });
    await spansOfTrace(later.traceId, 2);
    expect(inTrace(unsampled.traceId)(receiver.spans)).toEqual([]);
    expect(receiver.spans.filter((span) => span.attributes['gateway_authz.request_id'] === 'req-unsampled')).toEqual([]);
  });
});

describe('the meter span', () => {
  it('is exported per metered answer, linked to its request by the trace context ext_proc sees and its x-request-id', async () => {
    const request = traceContext(true);
    const call = processClient.process();
    const ended = new Promise<void>((resolve, reject) => {
      call.on('data', () => undefined);
      call.on('error', reject);
      call.on('end', () => resolve());
    });
    call.write(
      observed({
        request_headers: {
          headers: headerMap([
            [':path', '/v1/messages'],
            [':method', 'POST'],
            ['x-request-id', 'req-metered'],
            ['traceparent', request.traceparent],
            ['x-gateway-account-id', ACCOUNT],
            ['x-gateway-key-id', 'key_ki7sq0QuenAUq8kr'],
            ['x-gateway-key-prefix', keyPrefix],
            ['x-gateway-route-family', 'messages'],
          ]),
          end_of_stream: false,
        },
      }),
    );
    call.write(
      observed({
        response_headers: {
          headers: headerMap([
            [':status', '200'],
            ['content-type', 'text/event-stream'],
          ]),
          end_of_stream: false,
        },
      }),
    );
    // messages-stream.sse: 25 input and 15 output tokens.
    call.write(observed({ response_body: { body: Buffer.from(usageFixture('messages-stream.sse')), end_of_stream: true } }));
    call.end();
    await ended;

    const [meter] = await spansOfTrace(request.traceId, 1);
    expect(meter).toMatchObject({ name: 'meter', parentSpanId: request.spanId });
    expect(meter!.links).toEqual([
      { traceId: request.traceId, spanId: request.spanId, attributes: { 'gateway_authz.request_id': 'req-metered' } },
    ]);
    expect(meter!.attributes).toMatchObject({
      'gateway_authz.request_id': 'req-metered',
      'gateway_authz.account_id': ACCOUNT,
      'gateway_authz.route_family': 'messages',
      'gateway_authz.usage.outcome': 'usage',
      'gateway_authz.usage.delivery': 'complete',
      'gen_ai.usage.input_tokens': 25,
      'gen_ai.usage.output_tokens': 15,
    });
  });
});
