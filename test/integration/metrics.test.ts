import { createOfficialCheckClient, envoyCheckRequest, type OfficialCheckClient } from '../support/envoy-official-client';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { startAppUnderTest, type AppUnderTest } from '../support/running-app';
import { mistyped } from '../support/mistyped';

/** Prometheus metrics on the admin port: decisions, latency, store round trips and errors, cache, process. */
let redis: TestRedis;
let server: AppUnderTest;
let client: OfficialCheckClient;
let key: string;

const chat = (credential: string) =>
  envoyCheckRequest({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${credential}` } });
const scrape = async () => {
  const response = await fetch(`${server.adminUrl}/metrics`);
  expect(response.status).toBe(200);
  expect(response.headers.get('content-type')).toContain('text/plain');
  return response.text();
};
const sample = (text: string, name: string, labels: string) => {
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  return line === undefined ? undefined : Number(line.split(' ').at(-1));
};

beforeAll(async () => {
  redis = await startTestRedis();
  server = await startAppUnderTest({ redisUrl: redis.url, env: { REDIS_TIMEOUT_MS: '50' } });
  client = createOfficialCheckClient(server.grpcAddress);
  // An account id found nowhere else in /metrics ("metered" now names usage metering's metrics).
  await server.admin('POST', '/admin/accounts', { id: 'probe-acct-7q', name: 'Metered' });
  key = (await server.admin('POST', '/admin/accounts/probe-acct-7q/keys', { name: 'm' })).body.key;
});
afterAll(async () => {
  client?.close();
  await server?.close();
  await redis?.stop();
});

it('counts decisions by style, family, result and reason, with latency, store round trips and cache outcomes', async () => {
  for (let i = 0; i < 3; i += 1) expect((await client.check(chat(key))).status.code).toBe(0);
  await client.check(chat(mistyped(key)));
  const text = await scrape();
  expect(sample(text, 'gateway_authz_decisions_total', 'style="chat",family="chat-completions",result="allow",reason="allowed"')).toBe(3);
  expect(sample(text, 'gateway_authz_decisions_total', 'style="chat",family="chat-completions",result="deny",reason="malformed_key"')).toBe(
    1,
  );
  expect(sample(text, 'gateway_authz_decision_duration_seconds_count', 'result="allow"')).toBe(3);
  expect(sample(text, 'gateway_authz_store_duration_seconds_count', 'operation="authorize"')).toBe(3);
  expect(sample(text, 'gateway_authz_store_duration_seconds_count', 'operation="resolve_key"')).toBe(1);
  expect(sample(text, 'gateway_authz_key_cache_lookups_total', 'outcome="hit"')).toBe(2);
  expect(sample(text, 'gateway_authz_key_cache_lookups_total', 'outcome="miss"')).toBe(1);
  expect(text).toMatch(/^gateway_authz_process_cpu_user_seconds_total /m);
  expect(text).toMatch(/^gateway_authz_nodejs_heap_size_used_bytes /m);
  expect(text).not.toContain(key);
  expect(text).not.toContain(key.slice(0, 12));
  expect(text).not.toContain('probe-acct-7q');
});

it("reports how far the Redis clock the process decides on can be from Redis's TIME", async () => {
  const line = (await scrape()).split('\n').find((l) => l.startsWith('gateway_authz_redis_clock_uncertainty_seconds '));
  expect(line).toBeDefined();
  // Half the round trip of a TIME to a local redis-server: above zero, and far below 50 ms even on a loaded test machine.
  const seconds = Number(line!.split(' ').at(-1));
  expect(seconds).toBeGreaterThan(0);
  expect(seconds).toBeLessThan(0.05);
});

it('counts store errors when Redis is gone', async () => {
  await redis.stop();
  const response = await client.check(chat(key));
  expect(response.denied_response.status.code).toBe('ServiceUnavailable');
  const text = await scrape();
  expect(sample(text, 'gateway_authz_store_errors_total', 'operation="authorize"')).toBeGreaterThanOrEqual(1);
  expect(
    sample(text, 'gateway_authz_decisions_total', 'style="chat",family="chat-completions",result="deny",reason="store_unavailable"'),
  ).toBe(1);
});
