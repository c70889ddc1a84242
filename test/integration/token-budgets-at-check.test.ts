import Redis from 'ioredis';
import type { TokenBudgetPlan } from '../../src/accounts/limits/token-budgets';
import type { UsageRecord } from '../../src/metering/usage-record';
import { RedisStore } from '../../src/store/redis/redis-store';
import { createOfficialCheckClient, envoyCheckRequest, type OfficialCheckClient } from '../support/envoy-official-client';
import { parseDenyBody } from '../support/deny-body';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { startAppUnderTest, type AppUnderTest } from '../support/running-app';
import { isBackgroundCommand, untilWebhookWorkDone } from '../support/background-commands';

/**
 * Token budgets and monthly spend caps at Check time, end to end: real Redis,
 * real gRPC with Envoy's official protos, the admin API over HTTP, and a
 * server whose default plan has token budgets. Usage is applied to the same
 * Redis as the usage ledger applies it (RedisStore.applyUsage).
 */
let redis: TestRedis;
let server: AppUnderTest;
let client: OfficialCheckClient;
let ledger: RedisStore;

const BUDGETS: TokenBudgetPlan = { key: [{ tokens: 1_000, windowSeconds: 60 }], account: [{ tokens: 100_000, windowSeconds: 86_400 }] };

beforeAll(async () => {
  redis = await startTestRedis();
  server = await startAppUnderTest({
    redisUrl: redis.url,
    // Last-used writes are batched off the hot path; keep them out of the round-trip count below.
    env: { LAST_USED_FLUSH_MS: '3600000' },
    config: {
      defaultPlan: {
        tokenBudgets: {
          key: [{ tokens: 1_000, window: '1m' }],
          account: [{ tokens: 100_000, window: '1d' }],
        },
      },
    },
  });
  client = createOfficialCheckClient(server.grpcAddress);
  ledger = await RedisStore.connect({ url: redis.url, commandTimeoutMs: 1000 });
});
afterAll(async () => {
  client?.close();
  await ledger?.close();
  await server?.close();
  await redis?.stop();
});

let accounts = 0;
async function newKey(accountPatch?: object): Promise<{ key: string; id: string; accountId: string }> {
  const accountId = `budget-co-${(accounts += 1)}`;
  expect((await server.admin('POST', '/admin/accounts', { id: accountId, name: accountId })).status).toBe(201);
  if (accountPatch) expect((await server.admin('PATCH', `/admin/accounts/${accountId}`, accountPatch)).status).toBe(200);
  const created = await server.admin('POST', `/admin/accounts/${accountId}/keys`, { name: 'it' });
  expect(created.status).toBe(201);
  return { key: created.body.key, id: created.body.id, accountId };
}

let requests = 0;
async function spend(ids: { accountId: string; id: string }, tokens: number, costMinorUnits = 0): Promise<void> {
  const record: UsageRecord = {
    requestId: `req-budget-${(requests += 1)}`,
    accountId: ids.accountId,
    keyId: ids.id,
    keyPrefix: 'gk_live_AbC4',
    family: 'chat-completions',
    style: 'chat',
    model: 'gpt-4o-mini',
    tokens: { inputTokens: tokens, outputTokens: 0, cachedInputTokens: 0, cacheCreationTokens: 0 },
    costMinorUnits,
    estimated: false,
    atMs: Date.now(),
  };
  expect((await ledger.applyUsage(record, BUDGETS)).kind).toBe('applied');
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

const RFC_3339_SECONDS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/;

describe('token rate-limit headers on allowed requests, from the budget with the fewest tokens left', () => {
  it('chat-completions: x-ratelimit-*-tokens in OpenAI duration form', async () => {
    const ids = await newKey();
    await spend(ids, 250);
    const allowed = await client.check(requestFor('chat', ids.key));
    expect(allowed.status.code).toBe(0);
    const added = headersOf(allowed.ok_response.response_headers_to_add);
    expect(added['x-ratelimit-limit-tokens']).toBe('1000');
    expect(added['x-ratelimit-remaining-tokens']).toMatch(/^(750|751|752)$/);
    // 250 tokens of a 1,000-per-minute budget refill in 15 s.
    expect(added['x-ratelimit-reset-tokens']).toMatch(/^1[45]s$/);
    // The request limits of the default plan are still there.
    expect(added['x-ratelimit-limit-requests']).toBeDefined();
  });

  it('messages: anthropic-ratelimit-tokens-* (and the vendor spelling), reset in RFC 3339', async () => {
    const ids = await newKey();
    const allowed = await client.check(requestFor('messages', ids.key));
    const added = headersOf(allowed.ok_response.response_headers_to_add);
    expect(added['anthropic-ratelimit-tokens-limit']).toBe('1000');
    expect(added['anthropic-ratelimit-tokens-remaining']).toBe('1000');
    expect(added['anthropic-ratelimit-tokens-reset']).toMatch(RFC_3339_SECONDS);
    expect(added['vendora-ratelimit-tokens-remaining']).toBe('1000');
  });

  it('generative-content: none, as Google sends none', async () => {
    const ids = await newKey();
    const allowed = await client.check(requestFor('generative', ids.key));
    expect(allowed.status.code).toBe(0);
    expect(Object.keys(headersOf(allowed.ok_response.response_headers_to_add)).filter((name) => name.includes('tokens'))).toEqual([]);
  });
});

describe('429 token_budget_exhausted once applied usage has used up a budget', () => {
  it.each<Style>(['chat', 'messages', 'generative'])('answers in the %s style with retry-after and the budget', async (style) => {
    const ids = await newKey();
    await spend(ids, 1_500); // 500 in debt: one token is back in 30 s
    const refused = await client.check(requestFor(style, ids.key));
    expect(refused.denied_response.status.code).toBe('TooManyRequests');
    const headers = headersOf(refused.denied_response.headers);
    expect(headers['x-gateway-error-code']).toBe('token_budget_exhausted');
    expect(Number(headers['retry-after'])).toBeGreaterThanOrEqual(29);
    expect(Number(headers['retry-after'])).toBeLessThanOrEqual(31);
    expect(Number(headers['retry-after-ms'])).toBeGreaterThan(28_000);
    expect(headers['x-gateway-ratelimit-scope']).toBe('key');
    expect(headers['x-gateway-ratelimit-window']).toBe('1m');
    expect(headers['x-should-retry']).toBeUndefined();
    const body = parseDenyBody(refused.denied_response.body);
    if (style === 'chat') {
      // OpenAI's token rate limits say "tokens" where request limits say "requests".
      expect(body.error).toMatchObject({ type: 'tokens', code: 'rate_limit_exceeded' });
      expect(headers['x-ratelimit-remaining-tokens']).toBe('0');
      expect(headers['x-ratelimit-limit-tokens']).toBe('1000');
    }
    if (style === 'messages') {
      expect(body.error).toMatchObject({
        type: 'rate_limit_error',
        details: { error_code: 'token_budget_exhausted', scope: 'key', window: '1m', limit: 1000 },
      });
      expect(headers['anthropic-ratelimit-tokens-remaining']).toBe('0');
    }
    if (style === 'generative') {
      expect(body.error).toMatchObject({ code: 429, status: 'RESOURCE_EXHAUSTED' });
      expect(body.error.details[0]).toMatchObject({
        reason: 'token_budget_exhausted',
        metadata: { scope: 'key', window: '1m', limit: '1000' },
      });
      expect(body.error.details[1]).toMatchObject({ '@type': 'type.googleapis.com/google.rpc.RetryInfo' });
    }
    expect(body.error.message).toMatch(/Token budget reached: 1000 tokens per 1m for this API key/);
  });
});

describe('402 budget_exceeded at the monthly spend cap', () => {
  it.each<Style>(['chat', 'messages', 'generative'])('of the key, in the %s style, without retry-after', async (style) => {
    const ids = await newKey();
    expect((await server.admin('PATCH', `/admin/keys/${ids.id}`, { monthlySpendCap: 100 })).status).toBe(200);
    await spend(ids, 0, 99);
    expect((await client.check(requestFor(style, ids.key))).status.code).toBe(0);
    await spend(ids, 0, 1);
    const refused = await client.check(requestFor(style, ids.key));
    expect(refused.denied_response.status.code).toBe('PaymentRequired');
    const headers = headersOf(refused.denied_response.headers);
    expect(headers['x-gateway-error-code']).toBe('budget_exceeded');
    expect(headers['retry-after']).toBeUndefined();
    expect(headers['x-should-retry']).toBe('false');
    const body = parseDenyBody(refused.denied_response.body);
    if (style === 'chat') expect(body.error).toMatchObject({ type: 'billing_error', code: 'budget_exceeded' });
    if (style === 'messages') expect(body.error).toMatchObject({ type: 'billing_error', details: { error_code: 'budget_exceeded' } });
    if (style === 'generative') {
      expect(body.error).toMatchObject({ code: 402, status: 'FAILED_PRECONDITION' });
      expect(body.error.details[0]).toMatchObject({ reason: 'budget_exceeded' });
    }
    expect(body.error.message).toMatch(/monthly spend cap of API key .* \(\$0\.0001\) is reached/);
  });

  it('of the account, across its keys; raising the cap allows the very next request', async () => {
    const ids = await newKey({ billing: { monthlySpendCap: 50 } });
    await spend(ids, 0, 50);
    const refused = await client.check(requestFor('chat', ids.key));
    expect(parseDenyBody(refused.denied_response.body).error.message).toMatch(/monthly spend cap of the account of API key/);
    expect((await server.admin('PATCH', `/admin/accounts/${ids.accountId}`, { billing: { monthlySpendCap: 51 } })).status).toBe(200);
    expect((await client.check(requestFor('chat', ids.key))).status.code).toBe(0);
  });
});

it('still one Redis round trip per allowed Check with budgets in the plan once the key is cached: one EVALSHA, no other client command', async () => {
  const ids = await newKey();
  await spend(ids, 10);
  // Each Check holds its tokens until its answer is metered (none is here): a body asking for one output token keeps
  // 21 holds of a few tokens each within the 1,000-token budget, where the default of 4,096 would refuse the second.
  const smallChat = () =>
    envoyCheckRequest({
      method: 'POST',
      path: '/v1/chat/completions',
      headers: { authorization: `Bearer ${ids.key}` },
      body: '{"max_tokens":1}',
    });
  expect((await client.check(smallChat())).status.code).toBe(0); // warms the key index cache
  const stats = new Redis(redis.url, { disconnectTimeout: 50 });
  await untilWebhookWorkDone(stats);
  // MONITOR gets a connection of its own; a client made only to open it would be left open.
  const watcher = await stats.monitor();
  const fromClients: string[] = [];
  watcher.on('monitor', (_time: string, args: string[], source: string) => {
    if (source !== 'lua' && !isBackgroundCommand(args[0] ?? '')) fromClients.push(String(args[0]).toLowerCase());
  });
  try {
    await stats.config('RESETSTAT');
    for (let i = 0; i < 20; i += 1) expect((await client.check(smallChat())).status.code).toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(fromClients).toEqual(Array(20).fill('evalsha'));
  } finally {
    stats.disconnect();
    watcher.disconnect();
  }
});
