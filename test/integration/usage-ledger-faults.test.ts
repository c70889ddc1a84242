import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import Redis from 'ioredis';
import type { TokenBudgetPlan } from '../../src/accounts/limits/token-budgets';
import { totalTokens } from '../../src/metering/usage';
import type { UsageRecord } from '../../src/metering/usage-record';
import { Metrics } from '../../src/platform/metrics';
import { redisKeys } from '../../src/store/redis/redis-keys';
import { parsePackedTokenBuckets } from '../../src/store/redis/redis-records';
import { RedisStore } from '../../src/store/redis/redis-store';
import { UsageRecorder } from '../../src/metering/usage-recorder';
import { LogCapture } from '../support/log-capture';
import { spawnTestRedisServer, type TestRedis } from '../support/redis-server';
import { startAppUnderTest } from '../support/running-app';

/**
 * Usage is money: faults on a real redis-server (AOF, appendfsync always)
 * while usage records keep coming. Afterwards every account's balance is its
 * starting balance minus the sum of its records' costs, to the minor unit;
 * its spend, token budgets and aggregates move by exactly the records'
 * tokens; the usage stream holds each record once; and the metrics say how
 * many were applied late and that none was dropped.
 *  1. Redis killed (SIGKILL) mid-stream and restarted on the same port.
 *  2. Redis made slow (DEBUG SLEEP) past the client deadline: scripts that
 *     time out at the client are still run by Redis, so retries meet the
 *     idempotency marker (a lost reply after the fact, for real).
 *  3. The app closed (what SIGTERM does) while a batch is in flight against a
 *     paused Redis, and while Redis is down and comes back before the
 *     shutdown deadline.
 * The measured figures go to test-artifacts/usage-faults.json.
 */
jest.setTimeout(60_000);

/** Frozen for the store's token buckets, so a budget does not refill during the test and moves by exactly the tokens used. */
const NOW = Date.parse('2026-11-22T12:00:00Z');
const BUDGETS: TokenBudgetPlan = {
  key: [{ tokens: 1_000_000_000, windowSeconds: 86_400 }],
  account: [{ tokens: 1_000_000_000, windowSeconds: 86_400 }],
};
const START_BALANCE = 10_000_000;
const ACCOUNTS = ['ledger-a', 'ledger-b', 'ledger-c'];
const KEYS = ['key_one', 'key_two'];

let dir: string;
let redis: TestRedis;
const figures: Record<string, unknown> = {};

const startRedis = (port?: number) =>
  spawnTestRedisServer({
    dir,
    appendOnly: true,
    ...(port !== undefined ? { port } : {}),
    extraArgs: ['--appendfsync', 'always', '--enable-debug-command', 'local'],
  });

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gateway-authz-usage-'));
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync('test-artifacts', { recursive: true });
  fs.writeFileSync(path.join('test-artifacts', 'usage-faults.json'), `${JSON.stringify(figures, null, 2)}\n`);
});

let sequence = 0;
/** A record with varied counts and cost, for one of the accounts and keys. */
function record(prefix: string): UsageRecord {
  sequence += 1;
  return {
    requestId: `${prefix}-${sequence}-${Math.random().toString(36).slice(2, 10)}`,
    accountId: ACCOUNTS[sequence % ACCOUNTS.length]!,
    keyId: KEYS[sequence % KEYS.length]!,
    keyPrefix: 'gk_live_AbC4',
    family: 'chat-completions',
    style: 'chat',
    model: sequence % 3 === 0 ? 'gpt-4o-mini' : 'claude-sonnet-4-5',
    tokens: {
      inputTokens: 100 + (sequence % 977),
      outputTokens: sequence % 311,
      cachedInputTokens: sequence % 7,
      cacheCreationTokens: sequence % 2,
    },
    costMinorUnits: 1 + (sequence % 13),
    estimated: sequence % 5 === 0,
    atMs: NOW,
  };
}

async function seedAccounts(store: RedisStore, tag: string): Promise<string[]> {
  const ids = ACCOUNTS.map((id) => `${id}-${tag}`);
  for (const id of ids) {
    await store.createAccount({ id, name: id, status: 'active', createdAt: '2026-11-01T00:00:00.000Z', creditBalance: START_BALANCE });
  }
  return ids;
}

function recorderFor(store: RedisStore) {
  const logs = new LogCapture();
  const metrics = new Metrics();
  const recorder = new UsageRecorder(store, BUDGETS, logs.logger, metrics, { maxBuffered: 100_000, firstRetryMs: 20, maxRetryMs: 200 });
  const outcome = async (name: string) => {
    const metric = (await metrics.registry.getMetricsAsJSON()).find((m) => m.name === 'gateway_authz_usage_records_total');
    return ((metric?.values ?? []) as { value: number; labels: { outcome?: string } }[])
      .filter((value) => value.labels.outcome === name)
      .reduce((sum, value) => sum + value.value, 0);
  };
  return { recorder, logs, metrics, outcome };
}

/** Everything the ledger holds for these records must be exactly their sums. */
async function expectExactLedger(store: RedisStore, records: readonly UsageRecord[], accountIds: readonly string[]): Promise<void> {
  const client = new Redis(redis.url, { disconnectTimeout: 50 });
  try {
    for (const accountId of accountIds) {
      const mine = records.filter((r) => r.accountId === accountId);
      const cost = mine.reduce((sum, r) => sum + r.costMinorUnits, 0);
      const account = await store.getAccount(accountId);
      expect({ accountId, balance: account?.creditBalance, spend: account?.monthlySpend }).toEqual({
        accountId,
        balance: START_BALANCE - cost,
        spend: { '2026-11': cost },
      });
      const [day] = (await store.readUsage({ accountId, granularity: 'day', fromMs: NOW, toMs: NOW + 1 }))!;
      for (const keyId of KEYS) {
        const byKey = mine.filter((r) => r.keyId === keyId);
        expect({ keyId, totals: day!.byKey[keyId] }).toEqual({
          keyId,
          totals: {
            requests: byKey.length,
            inputTokens: byKey.reduce((sum, r) => sum + r.tokens.inputTokens, 0),
            outputTokens: byKey.reduce((sum, r) => sum + r.tokens.outputTokens, 0),
            cachedInputTokens: byKey.reduce((sum, r) => sum + r.tokens.cachedInputTokens, 0),
            cacheCreationTokens: byKey.reduce((sum, r) => sum + r.tokens.cacheCreationTokens, 0),
            costMinorUnits: byKey.reduce((sum, r) => sum + r.costMinorUnits, 0),
            estimatedRequests: byKey.filter((r) => r.estimated).length,
          },
        });
        expect(Number(await client.hget(redisKeys.account(accountId), redisKeys.keySpendField(keyId, '2026-11')))).toBe(
          byKey.reduce((sum, r) => sum + r.costMinorUnits, 0),
        );
      }
      // The token buckets moved by exactly the tokens used (the store's clock is frozen, so nothing refilled).
      const packed = await client.hmgetBuffer(
        redisKeys.account(accountId),
        redisKeys.accountTokenBucketField(),
        ...KEYS.map((keyId) => redisKeys.keyTokenBucketField(keyId)),
      );
      const budgets = packed.map((value) => parsePackedTokenBuckets(value)?.get(86_400));
      // 10^9 tokens a day: each token is 86.4 µs; the fraction of a µs is kept, so the sum is exact.
      const position = (tokens: number) => {
        const scaled = BigInt(NOW) * 1000n * 1_000_000_000n + BigInt(tokens) * 86_400_000_000n;
        return { tatUs: Number(scaled / 1_000_000_000n), fraction: Number(scaled % 1_000_000_000n) };
      };
      expect(budgets).toEqual([
        position(mine.reduce((sum, r) => sum + totalTokens(r.tokens), 0)),
        ...KEYS.map((keyId) => position(mine.filter((r) => r.keyId === keyId).reduce((sum, r) => sum + totalTokens(r.tokens), 0))),
      ]);
    }
    // The stream holds each record exactly once.
    const entries = await client.xrange(redisKeys.usageStream(), '-', '+');
    const ids = new Set(records.map((r) => r.requestId));
    const streamed = entries.map(([, fields]) => fields[fields.indexOf('requestId') + 1]!).filter((id) => ids.has(id));
    expect(streamed.length).toBe(records.length);
    expect(new Set(streamed).size).toBe(records.length);
  } finally {
    client.disconnect();
  }
}

/** The accounts are per test; so are the key ids within them. */
function forAccounts(records: UsageRecord[], accountIds: readonly string[]): UsageRecord[] {
  return records.map((r) => ({ ...r, accountId: accountIds[ACCOUNTS.indexOf(r.accountId)]! }));
}

it('Redis killed and restarted while records keep coming: nothing lost, nothing counted twice', async () => {
  const store = await RedisStore.connect({ url: redis.url, commandTimeoutMs: 200, adminCommandTimeoutMs: 300, clockOverride: () => NOW });
  const accountIds = await seedAccounts(store, 'kill');
  const { recorder, outcome, logs } = recorderFor(store);
  const sent: UsageRecord[] = [];
  const send = (count: number) => {
    const batch = forAccounts(
      Array.from({ length: count }, () => record('kill')),
      accountIds,
    );
    for (const r of batch) expect(recorder.record(r)).toBe('queued');
    sent.push(...batch);
  };
  // A steady stream: 20 records every 5 ms for 3 s, Redis killed after 1 s and back after 2 s.
  const producer = setInterval(() => send(20), 5);
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  const port = redis.port;
  process.kill(redis.pid!, 'SIGKILL');
  await redis.stop();
  const killedAt = Date.now();
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  const bufferedWhileDown = recorder.buffered;
  redis = await startRedis(port);
  const restartedAt = Date.now();
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  clearInterval(producer);
  await recorder.stop(Date.now() + 20_000);
  const drainedMs = Date.now() - restartedAt;
  expect(recorder.buffered).toBe(0);
  expect(await outcome('dropped_buffer_full')).toBe(0);
  expect(await outcome('dropped_at_shutdown')).toBe(0);
  expect(await outcome('applied')).toBeGreaterThan(0);
  expect(await outcome('applied_late')).toBeGreaterThan(0);
  expect((await outcome('applied')) + (await outcome('applied_late'))).toBe(sent.length);
  expect(bufferedWhileDown).toBeGreaterThan(100);
  await expectExactLedger(store, sent, accountIds);
  figures.kill = {
    records: sent.length,
    appliedAtOnce: await outcome('applied'),
    appliedLate: await outcome('applied_late'),
    bufferedWhileDown,
    downMs: restartedAt - killedAt,
    drainedMsAfterRestart: drainedMs,
    retryLogLines: logs.events('usage_retry').length,
  };
  await store.close();
});

it('Redis slower than the client deadline: scripts that timed out were still applied, and their retries change nothing', async () => {
  const store = await RedisStore.connect({ url: redis.url, commandTimeoutMs: 200, adminCommandTimeoutMs: 150, clockOverride: () => NOW });
  const accountIds = await seedAccounts(store, 'slow');
  const { recorder, outcome } = recorderFor(store);
  const sent: UsageRecord[] = [];
  const send = (count: number) => {
    const batch = forAccounts(
      Array.from({ length: count }, () => record('slow')),
      accountIds,
    );
    for (const r of batch) recorder.record(r);
    sent.push(...batch);
  };
  const debug = new Redis(redis.url, { disconnectTimeout: 50 });
  try {
    const producer = setInterval(() => send(10), 5);
    await new Promise((resolve) => setTimeout(resolve, 300));
    // Blocks Redis for 0.6 s; everything sent meanwhile times out at the client after 150 ms, then runs.
    await debug.call('DEBUG', 'SLEEP', '0.6');
    await new Promise((resolve) => setTimeout(resolve, 500));
    clearInterval(producer);
    await recorder.stop(Date.now() + 20_000);
  } finally {
    debug.disconnect();
  }
  expect(recorder.buffered).toBe(0);
  expect(await outcome('applied_late')).toBeGreaterThan(0);
  expect((await outcome('applied')) + (await outcome('applied_late'))).toBe(sent.length);
  await expectExactLedger(store, sent, accountIds);
  figures.slow = { records: sent.length, appliedLate: await outcome('applied_late') };
  await store.close();
});

describe("the app's shutdown (what SIGTERM runs) applies the buffered usage", () => {
  it('closes while a batch is in flight against a paused Redis: every record applied before the store closes', async () => {
    const app = await startAppUnderTest({ redisUrl: redis.url });
    const store = await RedisStore.connect({ url: redis.url, commandTimeoutMs: 1000 });
    const pauser = new Redis(redis.url, { disconnectTimeout: 50 });
    try {
      const accountIds = await seedAccounts(store, 'close');
      const sent = forAccounts(
        Array.from({ length: 500 }, () => ({ ...record('close'), atMs: Date.now() })),
        accountIds,
      );
      // Redis holds every command for 400 ms: the first batch leaves and waits there while the app closes.
      await pauser.call('CLIENT', 'PAUSE', '400', 'ALL');
      for (const r of sent) app.app.usage.record(r);
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(app.app.usage.buffered).toBe(500);
      const closing = Date.now();
      await app.close();
      figures.closeMidFlush = { records: sent.length, closeMs: Date.now() - closing };
      for (const accountId of accountIds) {
        const cost = sent.filter((r) => r.accountId === accountId).reduce((sum, r) => sum + r.costMinorUnits, 0);
        expect((await store.getAccount(accountId))?.creditBalance).toBe(START_BALANCE - cost);
      }
      expect(app.logs.events('usage_unapplied')).toEqual([]);
    } finally {
      pauser.disconnect();
      await store.close();
    }
  });

  it('closes while Redis is down; Redis returns before the shutdown deadline and every record is applied', async () => {
    const app = await startAppUnderTest({ redisUrl: redis.url, env: { SHUTDOWN_TIMEOUT_MS: '15000' } });
    let store = await RedisStore.connect({ url: redis.url, commandTimeoutMs: 1000 });
    const accountIds = await seedAccounts(store, 'down');
    await store.close();
    const sent = forAccounts(
      Array.from({ length: 300 }, () => ({ ...record('down'), atMs: Date.now() })),
      accountIds,
    );
    const port = redis.port;
    process.kill(redis.pid!, 'SIGKILL');
    await redis.stop();
    for (const r of sent) app.app.usage.record(r);
    const closing = app.close();
    await new Promise((resolve) => setTimeout(resolve, 700));
    expect(app.app.usage.buffered).toBe(300);
    redis = await startRedis(port);
    await closing;
    store = await RedisStore.connect({ url: redis.url, commandTimeoutMs: 1000 });
    for (const accountId of accountIds) {
      const cost = sent.filter((r) => r.accountId === accountId).reduce((sum, r) => sum + r.costMinorUnits, 0);
      expect((await store.getAccount(accountId))?.creditBalance).toBe(START_BALANCE - cost);
    }
    expect(app.logs.events('usage_unapplied')).toEqual([]);
    await store.close();
  });
});
