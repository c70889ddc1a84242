import type { UsageRecord } from '../../src/metering/usage-record';
import type { ApiAccount, ApiKey, ApiUsageReport } from '../../src/cli/api-types';
import { ensureBuiltCli, runCli } from '../support/built-cli';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { startAppUnderTest, TEST_ADMIN_TOKEN, type AppUnderTest } from '../support/running-app';

/**
 * Where usage goes (issue 16), over real HTTP against real Redis: the usage
 * API and its checks, the CLI on top of it, spend caps and token budgets
 * through PATCH, the account view's spend, and the Prometheus counters.
 */
jest.setTimeout(60_000);

const PRICING = {
  models: [{ model: 'gpt-4o-mini*', input: 15, output: 60 }],
  default: { input: 100, output: 300, webSearchCall: 10_000 },
  unpricedModels: 'charge-default',
};
/** Cents of a euro: the answers and the CLI show money in the currency the operator configured, not in the default. */
const CURRENCY = { code: 'EUR', exponent: 2 };

let redis: TestRedis;
let server: AppUnderTest;
let keyIds: string[];
let prefixes: string[];
const now = Date.now();
const hourStart = Math.floor(now / 3_600_000) * 3_600_000;

const usage = (keyIndex: number, extra: Partial<UsageRecord> = {}): UsageRecord => ({
  requestId: `req-${Math.random().toString(36).slice(2)}`,
  accountId: 'metered',
  keyId: keyIds[keyIndex]!,
  keyPrefix: prefixes[keyIndex]!,
  family: 'chat-completions',
  style: 'chat',
  model: 'gpt-4o-mini-2024-07-18',
  tokens: { inputTokens: 1_000, outputTokens: 200, cachedInputTokens: 0, cacheCreationTokens: 0 },
  costMinorUnits: 4,
  estimated: false,
  atMs: now,
  ...extra,
});

async function waitApplied(): Promise<void> {
  const end = Date.now() + 10_000;
  while (server.app.usage.buffered > 0) {
    if (Date.now() > end) throw new Error('usage not applied in time');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const usagePath = (query: Record<string, string>) => `/admin/accounts/metered/usage?${new URLSearchParams(query).toString()}`;
const report = async (query: Record<string, string>) => {
  const answer = await server.admin('GET', usagePath(query));
  expect(answer.status).toBe(200);
  return answer.body as unknown as ApiUsageReport;
};

beforeAll(async () => {
  ensureBuiltCli();
  redis = await startTestRedis();
  server = await startAppUnderTest({
    redisUrl: redis.url,
    config: { pricing: PRICING, currency: CURRENCY },
    env: { REDIS_TIMEOUT_MS: '1000' },
  });
  expect(
    (await server.admin('POST', '/admin/accounts', { id: 'metered', name: 'Metered', billing: { creditBalance: 1_000 } })).status,
  ).toBe(201);
  const keys = [
    await server.admin('POST', '/admin/accounts/metered/keys', { name: 'a' }),
    await server.admin('POST', '/admin/accounts/metered/keys', { name: 'b' }),
  ];
  keyIds = keys.map((key) => key.body.id);
  prefixes = keys.map((key) => key.body.prefix);
  server.app.usage.record(usage(0));
  server.app.usage.record(usage(0, { atMs: hourStart - 1, model: 'claude-sonnet-4-5', costMinorUnits: 10, estimated: true }));
  server.app.usage.record(
    usage(1, {
      model: undefined,
      costMinorUnits: 1,
      tokens: { inputTokens: 5, outputTokens: 6, cachedInputTokens: 7, cacheCreationTokens: 8 },
    }),
  );
  await waitApplied();
});
afterAll(async () => {
  await server?.close();
  await redis?.stop();
});

describe('GET /admin/accounts/{id}/usage', () => {
  it('answers every hour of the range with totals, and per key with its display prefix', async () => {
    const answer = await report({ granularity: 'hour', groupBy: 'key', from: new Date(hourStart - 3_600_000).toISOString() });
    expect(answer).toMatchObject({
      accountId: 'metered',
      granularity: 'hour',
      groupBy: 'key',
      from: new Date(hourStart - 3_600_000).toISOString(),
      to: new Date(hourStart + 3_600_000).toISOString(),
    });
    expect(answer.buckets.map((bucket) => bucket.start)).toEqual([
      new Date(hourStart - 3_600_000).toISOString(),
      new Date(hourStart).toISOString(),
    ]);
    const [earlier, current] = answer.buckets;
    expect(earlier!.groups).toEqual([
      {
        keyId: keyIds[0],
        keyPrefix: prefixes[0],
        requests: 1,
        inputTokens: 1_000,
        outputTokens: 200,
        cachedInputTokens: 0,
        cacheCreationTokens: 0,
        costMinorUnits: 10,
        costFormatted: '€0.10',
        estimatedRequests: 1,
      },
    ]);
    expect(current!.total).toEqual({
      requests: 2,
      inputTokens: 1_005,
      outputTokens: 206,
      cachedInputTokens: 7,
      cacheCreationTokens: 8,
      costMinorUnits: 5,
      costFormatted: '€0.05',
      estimatedRequests: 0,
    });
    expect(current!.groups?.map((group) => group.keyId).sort()).toEqual([...keyIds].sort());
    // The integers stay what clients compute with; the answer names what they count, and shows each as money.
    expect(answer.currency).toEqual(CURRENCY);
    expect(answer.total).toMatchObject({ requests: 3, costMinorUnits: 15, costFormatted: '€0.15' });
  });

  it('groups by model, null for an answer that named none; by day over 30 days by default', async () => {
    const byModel = await report({ granularity: 'hour', groupBy: 'model', from: new Date(hourStart).toISOString() });
    expect(byModel.buckets[0]!.groups?.map((group) => [group.model, group.requests])).toEqual([
      [null, 1],
      ['gpt-4o-mini-2024-07-18', 1],
    ]);
    const days = await report({});
    expect(days.granularity).toBe('day');
    expect(days.groupBy).toBeNull();
    expect(days.buckets).toHaveLength(30);
    expect(days.total).toMatchObject({ requests: 3, costMinorUnits: 15, inputTokens: 2_005 });
  });

  it.each([
    [{ granularity: 'week' }, 'granularity', /must be "hour" or "day"/],
    [{ groupBy: 'account' }, 'groupBy', /must be "key" or "model"/],
    [{ from: 'yesterday' }, 'from', /ISO-8601/],
    [{ page: '2' }, 'page', /unknown field/],
    [{ from: new Date(now).toISOString(), to: new Date(now - 1).toISOString() }, 'to', /must be after from/],
    [{ to: new Date(now + 2 * 86_400_000).toISOString() }, 'to', /must not be after .* the end of the current day/],
    [{ granularity: 'hour', from: new Date(now - 3 * 86_400_000).toISOString() }, 'from', /kept for 48 hours.*granularity=day/],
    [{ from: new Date(now - 500 * 86_400_000).toISOString() }, 'from', /kept for 400 days.*billing stream/],
  ])('refuses %j, naming %s', async (query, field, message) => {
    const answer = await server.admin('GET', usagePath(query));
    expect(answer.status).toBe(400);
    expect(answer.body.error).toEqual({ code: 'invalid_field', field, message: expect.stringMatching(message) });
  });

  it('answers 404 for an account that does not exist', async () => {
    expect((await server.admin('GET', '/admin/accounts/ghost/usage')).body.error.code).toBe('account_not_found');
    expect((await server.admin('GET', '/admin/accounts/bad%20id/usage')).status).toBe(404);
  });
});

describe('spend and caps in the account and key views', () => {
  it("shows the debited balance and this month's spend; sets and removes spend caps and token budgets", async () => {
    const account = await server.admin('GET', '/admin/accounts/metered');
    expect(account.body.billing).toEqual({
      status: 'active',
      creditBalance: 1_000 - 15,
      monthlySpendCap: null,
      spentThisMonth: 15,
      creditShortfall: 0,
      currency: CURRENCY,
      creditBalanceFormatted: '€9.85',
      monthlySpendCapFormatted: null,
      spentThisMonthFormatted: '€0.15',
      creditShortfallFormatted: '€0.00',
    });
    const capped = await server.admin('PATCH', '/admin/accounts/metered', {
      billing: { monthlySpendCap: 50_000 },
      tokenBudgets: { key: [{ tokens: 100_000, window: '1m' }] },
    });
    expect(capped.status).toBe(200);
    expect(capped.body).toMatchObject({
      billing: { monthlySpendCap: 50_000, monthlySpendCapFormatted: '€500.00' },
      tokenBudgets: { key: [{ tokens: 100_000, window: '1m' }], account: null },
    });
    const key = await server.admin('PATCH', `/admin/keys/${keyIds[0]}`, {
      monthlySpendCap: 900,
      tokenBudgets: [{ tokens: 5_000_000, window: '1d' }],
    });
    expect(key.body).toMatchObject({
      monthlySpendCap: 900,
      monthlySpendCapFormatted: '€9.00',
      tokenBudgets: [{ tokens: 5_000_000, window: '1d' }],
    });
    expect((await server.admin('PATCH', `/admin/keys/${keyIds[0]}`, { monthlySpendCap: null, tokenBudgets: null })).body).toMatchObject({
      monthlySpendCap: null,
      tokenBudgets: null,
    });
    const refused = await server.admin('PATCH', '/admin/accounts/metered', { billing: { monthlySpendCap: 0 } });
    expect(refused.body.error).toMatchObject({ code: 'invalid_field', field: 'billing.monthlySpendCap' });
    const audit = await server.admin('GET', '/admin/audit?limit=5');
    expect(audit.body.entries.map((entry) => entry.detail)).toContain('changes=billing.monthlySpendCap,tokenBudgets.key');
  });
});

describe('gateway-authz usage', () => {
  const env = () => ({ ADMIN_URL: server.adminUrl, ADMIN_TOKEN: TEST_ADMIN_TOKEN });

  it('prints a table per period and model with a total line, or the JSON answer', async () => {
    const run = await runCli(
      ['usage', '--account', 'metered', '--granularity', 'hour', '--group-by', 'model', '--from', new Date(hourStart).toISOString()],
      env(),
    );
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const lines = run.stdout.split('\n');
    expect(lines[0]).toMatch(/^Usage of metered by hour, .* \(costs in EUR\):$/);
    expect(lines[2]).toMatch(/^HOUR\s+MODEL\s+REQUESTS\s+INPUT\s+OUTPUT\s+CACHED\s+CACHE WRITE\s+COST\s+ESTIMATED$/);
    expect(run.stdout).toMatch(/\(none named\)\s+1\s+5\s+6\s+7\s+8\s+€0\.01\s+0\n/);
    expect(run.stdout).toMatch(/gpt-4o-mini-2024-07-18\s+1\s+1000\s+200\s+0\s+0\s+€0\.04\s+0\n/);
    expect(lines.at(-2)).toMatch(/^total\s+2\s+1005\s+206\s+7\s+8\s+€0\.05\s+0$/);
    expect(run.stdout).not.toContain('minor units');
    const json = await runCli(['usage', '--account', 'metered', '--json'], env());
    expect(JSON.parse(json.stdout)).toMatchObject({ accountId: 'metered', granularity: 'day', total: { requests: 3 } });
  });

  it('refuses a bad option before calling the API, and prints the API error for a bad range', async () => {
    const bad = await runCli(['usage', '--account', 'metered', '--granularity', 'week'], env());
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("must be 'hour' or 'day'");
    const old = await runCli(['usage', '--account', 'metered', '--granularity', 'hour', '--from', '2020-01-01'], env());
    expect(old.code).toBe(1);
    expect(old.stderr).toMatch(/^error: invalid_field: from: usage by hour is kept for 48 hours/);
  });

  it('sets spend caps and token budgets', async () => {
    const account = await runCli(['accounts', 'billing', '--id', 'metered', '--monthly-spend-cap', '70000', '--json'], env());
    expect((JSON.parse(account.stdout) as ApiAccount).billing.monthlySpendCap).toBe(70_000);
    const budgets = await runCli(['accounts', 'token-budgets', '--id', 'metered', '--account-budgets', '20000000/1d'], env());
    expect(budgets.stdout).toMatch(/account token budgets\s+20000000 tokens\/1d/);
    expect(budgets.stdout).toMatch(/monthly spend cap\s+€700\.00$/m);
    expect(budgets.stdout).toMatch(/credit balance\s+€9\.85$/m);
    expect(budgets.stdout).toMatch(/spent this month\s+€0\.15 \(UTC month\)$/m);
    const key = await runCli(['keys', 'set', '--id', keyIds[1]!, '--monthly-spend-cap', '100'], env());
    expect(key.stdout).toMatch(/monthly spend cap\s+€1\.00$/m);
    const cleared = await runCli(['keys', 'set', '--id', keyIds[1]!, '--no-monthly-spend-cap', '--json'], env());
    expect((JSON.parse(cleared.stdout) as ApiKey).monthlySpendCap).toBeNull();
    const keyBudgets = await runCli(['keys', 'token-budgets', '--id', keyIds[1]!, '--budgets', '1000/1m'], env());
    expect(keyBudgets.stdout).toMatch(/token budgets\s+1000 tokens\/1m/);
  });
});

describe('Prometheus', () => {
  it('counts tokens and spend by style, family and model (the price table pattern, else other), with no account or key label', async () => {
    const text = await (await fetch(`${server.adminUrl}/metrics`)).text();
    const lines = text.split('\n').filter((line) => line.startsWith('gateway_authz_usage_'));
    expect(lines).toContain(
      'gateway_authz_usage_tokens_total{style="chat",family="chat-completions",model="gpt-4o-mini*",kind="input"} 1000',
    );
    expect(lines).toContain('gateway_authz_usage_tokens_total{style="chat",family="chat-completions",model="other",kind="input"} 1005');
    expect(lines).toContain('gateway_authz_usage_spend_minor_units_total{style="chat",family="chat-completions",model="other"} 11');
    expect(lines).toContain('gateway_authz_usage_records_total{outcome="applied"} 3');
    expect(lines).toContain('gateway_authz_usage_buffered_records 0');
    for (const line of lines) {
      expect(line).not.toMatch(/account|key_|metered|gk_/);
    }
  });
});
