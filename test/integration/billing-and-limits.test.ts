import Redis from 'ioredis';
import { createOfficialCheckClient, envoyCheckRequest, type OfficialCheckClient } from '../support/envoy-official-client';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { startAppUnderTest, TEST_ADMIN_TOKEN, type AppUnderTest } from '../support/running-app';
import { startServerProcess, type ServerProcess } from '../support/server-process';
import { registerSecrets } from '../support/secret-scan';
import { parseDenyBody, type DenyBodyView } from '../support/deny-body';
import { isBackgroundCommand, untilWebhookWorkDone } from '../support/background-commands';

/**
 * 402 and 429 end to end: real Redis, real gRPC with Envoy's official protos,
 * the admin API over HTTP, and two server processes sharing one Redis.
 */
let redis: TestRedis;
let server: AppUnderTest;
let client: OfficialCheckClient;

beforeAll(async () => {
  redis = await startTestRedis();
  // Last-used writes are batched off the hot path; keep them out of the round-trip count below.
  server = await startAppUnderTest({ redisUrl: redis.url, env: { LAST_USED_FLUSH_MS: '3600000' } });
  client = createOfficialCheckClient(server.grpcAddress);
});
afterAll(async () => {
  client?.close();
  await server?.close();
  await redis?.stop();
});

async function newKey(accountId: string, accountPatch?: object): Promise<{ key: string; id: string }> {
  expect((await server.admin('POST', '/admin/accounts', { id: accountId, name: accountId })).status).toBe(201);
  if (accountPatch) expect((await server.admin('PATCH', `/admin/accounts/${accountId}`, accountPatch)).status).toBe(200);
  const created = await server.admin('POST', `/admin/accounts/${accountId}/keys`, { name: 'it' });
  expect(created.status).toBe(201);
  return { key: created.body.key, id: created.body.id };
}

type Style = 'chat' | 'messages' | 'generative';
const requestFor = (style: Style, key: string) =>
  style === 'chat'
    ? envoyCheckRequest({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${key}` } })
    : style === 'messages'
      ? envoyCheckRequest({ path: '/v1/messages', headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01' } })
      : envoyCheckRequest({ path: '/v1beta/models/gemini-2.5-flash:generateContent', headers: { 'x-goog-api-key': key } });

const headersOf = (options: { header: { key: string; value: string } }[]) =>
  Object.fromEntries(options.map((o) => [o.header.key, o.header.value]));

function expectBillingBody(style: Style, body: DenyBodyView, reason: string): void {
  if (style === 'chat') expect(body.error).toMatchObject({ type: 'billing_error', code: reason });
  if (style === 'messages')
    expect(body).toMatchObject({ type: 'error', error: { type: 'billing_error', details: { error_code: reason } } });
  if (style === 'generative') {
    expect(body.error).toMatchObject({ code: 402, status: 'FAILED_PRECONDITION' });
    expect(body.error.details[0]).toMatchObject({ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason });
  }
}

describe('402: billing', () => {
  it.each<Style>(['chat', 'messages', 'generative'])(
    'a suspended account gets 402 account_suspended in the %s body, without retry-after',
    async (style) => {
      const { key } = await newKey(`suspended-${style}`, { billing: { status: 'suspended' } });
      const response = await client.check(requestFor(style, key));
      expect(response.http_response).toBe('denied_response');
      expect(response.denied_response.status.code).toBe('PaymentRequired');
      const headers = headersOf(response.denied_response.headers);
      expect(headers['retry-after']).toBeUndefined();
      expect(headers['retry-after-ms']).toBeUndefined();
      expect(headers['x-should-retry']).toBe('false');
      expect(headers['content-type']).toBe('application/json');
      const body = parseDenyBody(response.denied_response.body);
      expectBillingBody(style, body, 'account_suspended');
      expect(response.denied_response.body).toMatch(/billing/i);
    },
  );

  it('a prepaid account at zero credit gets 402 credit_exhausted, and the next request after a top-up is allowed', async () => {
    const { key } = await newKey('prepaid-co', { billing: { creditBalance: 0 } });
    const refused = await client.check(requestFor('messages', key));
    expect(refused.denied_response.status.code).toBe('PaymentRequired');
    expectBillingBody('messages', parseDenyBody(refused.denied_response.body), 'credit_exhausted');
    expect(parseDenyBody(refused.denied_response.body).error.message).toMatch(/top up/i);

    const credit = await server.admin('POST', '/admin/accounts/prepaid-co/credit', { amount: 500 });
    expect(credit.status).toBe(200);
    expect((await client.check(requestFor('messages', key))).status.code).toBe(0);
  });

  it('suspension takes effect on the very next request, and so does reactivation', async () => {
    const { key } = await newKey('flip-co');
    expect((await client.check(requestFor('chat', key))).status.code).toBe(0);
    await server.admin('PATCH', '/admin/accounts/flip-co', { billing: { status: 'suspended' } });
    expect((await client.check(requestFor('chat', key))).denied_response.status.code).toBe('PaymentRequired');
    await server.admin('PATCH', '/admin/accounts/flip-co', { billing: { status: 'active' } });
    expect((await client.check(requestFor('chat', key))).status.code).toBe(0);
  });
});

describe('429: rate limits', () => {
  it('answers a messages-style 429 with retry-after, the limit hit and both header spellings', async () => {
    const { key, id } = await newKey('limited-messages');
    expect((await server.admin('PATCH', `/admin/keys/${id}`, { limits: [{ limit: 2, window: '1m' }] })).status).toBe(200);
    const allowed = await client.check(requestFor('messages', key));
    const added = headersOf(allowed.ok_response.response_headers_to_add);
    expect(added['anthropic-ratelimit-requests-limit']).toBe('2');
    expect(added['anthropic-ratelimit-requests-remaining']).toBe('1');
    expect(added['vendora-ratelimit-requests-remaining']).toBe('1');
    expect(added['anthropic-ratelimit-requests-reset']).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/);
    await client.check(requestFor('messages', key));
    const refused = await client.check(requestFor('messages', key));
    expect(refused.denied_response.status.code).toBe('TooManyRequests');
    const headers = headersOf(refused.denied_response.headers);
    expect(Number(headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(Number(headers['retry-after'])).toBeLessThanOrEqual(60);
    expect(Number(headers['retry-after-ms'])).toBeGreaterThan(0);
    expect(headers['x-gateway-ratelimit-scope']).toBe('key');
    expect(headers['x-gateway-ratelimit-window']).toBe('1m');
    expect(headers['anthropic-ratelimit-requests-remaining']).toBe('0');
    expect(headers['x-should-retry']).toBeUndefined();
    const body = parseDenyBody(refused.denied_response.body);
    expect(body.error).toMatchObject({ type: 'rate_limit_error', details: { error_code: 'rate_limited', scope: 'key', window: '1m' } });
  });

  describe('exact across two server processes sharing one Redis', () => {
    let replicas: ServerProcess[] = [];
    let clients: OfficialCheckClient[] = [];
    beforeAll(async () => {
      // 250 Checks land on each replica in the same instant; with the 50 ms
      // default, replies queued behind that burst in one event loop would
      // time out (503). This test is about exactness, not the timeout.
      // Nor about shedding: 250 Checks per replica arrive at once, near the default MAX_CHECKS_IN_FLIGHT.
      const env = { REDIS_URL: redis.url, ADMIN_TOKEN: TEST_ADMIN_TOKEN, REDIS_TIMEOUT_MS: '1000', MAX_CHECKS_IN_FLIGHT: '1000' };
      replicas = await Promise.all([startServerProcess(env), startServerProcess(env)]);
      clients = replicas.map((replica) => createOfficialCheckClient(replica.grpcAddress));
    });
    afterAll(async () => {
      clients.forEach((c) => c.close());
      await Promise.all(replicas.map((replica) => replica.stop()));
    });

    it('500 concurrent requests on a key limited to 100 per minute: exactly 100 allowed, the rest 429', async () => {
      const { key, id } = await newKey('burst-co');
      registerSecrets(key);
      expect((await server.admin('PATCH', `/admin/keys/${id}`, { limits: [{ limit: 100, window: '1m' }] })).status).toBe(200);
      const requests = Array.from({ length: 500 }, () => requestFor('chat', key));
      // Warm both replicas (JIT, connections, key index cache) so the burst itself is short.
      for (let i = 0; i < 20; i += 1)
        await Promise.all(clients.map((c) => c.check(requestFor('chat', 'gk_live_warmupwarmupwarmupwarmupwarmup000000'))));
      await Promise.all(clients.map((c) => c.check(requestFor('chat', key.slice(0, -1) + (key.endsWith('A') ? 'B' : 'A')))));
      const started = Date.now();
      const responses = await Promise.all(requests.map((request, i) => clients[i % 2]!.check(request, 10_000)));
      const elapsedMs = Date.now() - started;
      const allowedCount = responses.filter((r) => r.status.code === 0).length;
      process.stdout.write(`burst of 500 over two replicas: ${allowedCount} allowed in ${elapsedMs} ms\n`);

      const allowed = responses.filter((r) => r.status.code === 0);
      const refused = responses.filter((r) => r.status.code !== 0);
      // GCRA lets one more request in per 600 ms (60 s / 100); a burst this
      // short gets exactly 100 unless the machine stalls for that long.
      const replenished = Math.floor(elapsedMs / 600);
      expect(allowed.length).toBeGreaterThanOrEqual(100);
      expect(allowed.length).toBeLessThanOrEqual(100 + replenished);
      if (replenished === 0) expect(allowed.length).toBe(100);
      expect(refused).toHaveLength(500 - allowed.length);
      for (const response of refused) {
        expect(response.denied_response.status.code).toBe('TooManyRequests');
        const headers = headersOf(response.denied_response.headers);
        expect(Number(headers['retry-after'])).toBeGreaterThanOrEqual(1);
        expect(Number(headers['retry-after'])).toBeLessThanOrEqual(60);
        expect(headers['x-ratelimit-limit-requests']).toBe('100');
        expect(headers['x-ratelimit-remaining-requests']).toBe('0');
        expect(parseDenyBody(response.denied_response.body).error).toMatchObject({ type: 'requests', code: 'rate_limit_exceeded' });
      }
      // Both replicas really served part of the burst.
      for (const replica of replicas) expect(replica.output()).not.toContain('"level":"error"');
    });
  });
});

describe('one Redis round trip per decision', () => {
  it('INFO commandstats shows one EVALSHA per allowed decision once the key is cached, and MONITOR no other client command', async () => {
    const { key } = await newKey('roundtrip-co');
    expect((await client.check(requestFor('chat', key))).status.code).toBe(0); // warms the key index cache
    const stats = new Redis(redis.url, { disconnectTimeout: 50 });
    await untilWebhookWorkDone(stats);
    // MONITOR gets a connection of its own; a client made only to open it would be left open.
    const watcher = await stats.monitor();
    // Commands a script runs itself show up in commandstats too; MONITOR tells them apart ("lua" source).
    const fromClients: string[] = [];
    watcher.on('monitor', (_time: string, args: string[], source: string) => {
      if (source !== 'lua' && !isBackgroundCommand(args[0] ?? '')) fromClients.push(String(args[0]).toLowerCase());
    });
    try {
      await stats.config('RESETSTAT');
      for (let i = 0; i < 20; i += 1) expect((await client.check(requestFor('chat', key))).status.code).toBe(0);
      const info = await stats.info('commandstats');
      const calls = Object.fromEntries([...info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)].map((m) => [m[1]!, Number(m[2])]));
      expect(calls.evalsha).toBe(20);
      expect(calls.eval).toBeUndefined();
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(fromClients).toEqual(Array(20).fill('evalsha'));
    } finally {
      stats.disconnect();
      watcher.disconnect();
    }
  });

  it('a malformed key costs no Redis command at all', async () => {
    const stats = new Redis(redis.url, { disconnectTimeout: 50 });
    try {
      await stats.config('RESETSTAT');
      await client.check(requestFor('chat', 'gk_live_thisIsNotAValidKeyAtAll000000000000'));
      const info = await stats.info('commandstats');
      const commands = [...info.matchAll(/^cmdstat_([^:]+):/gm)].map((m) => m[1]).filter((c) => !isBackgroundCommand(c!));
      expect(commands).toEqual([]);
    } finally {
      stats.disconnect();
    }
  });
});
