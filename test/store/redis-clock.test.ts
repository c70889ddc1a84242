import Redis from 'ioredis';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { NO_TOKEN_BUDGETS } from '../../src/accounts/limits/token-budgets';
import type { RatePlan } from '../../src/accounts/limits/rate-limits';
import { generateCustomerKey } from '../../src/keys/customer-key';
import { RedisStore } from '../../src/store/redis/redis-store';
import { insertKey } from '../support/pipeline-fixture-world';
import { startTestRedis, type TestRedis } from '../support/redis-server';

/**
 * Checks decide on Redis's clock, carried on each replica between samples
 * (RedisClock), not on the host's: against a real redis-server, stores
 * whose hosts' clocks are an hour ahead or behind both see a key expire
 * when Redis's TIME passes its expiry, to the millisecond the store can
 * tell, and the decision runs no TIME command.
 */
let redis: TestRedis;
let admin: RedisStore;
let stats: Redis;

const plan: RatePlan = Object.freeze({ key: [{ limit: 1000, windowSeconds: 60 }], account: [] });
const HOUR_MS = 3_600_000;

beforeAll(async () => {
  redis = await startTestRedis();
  // Its clock samples once: a later sample (every second by default) is a TIME in the command count of 'runs no TIME of its own'.
  admin = await RedisStore.connect({ url: redis.url, commandTimeoutMs: 1000, clockSampleIntervalMs: 3_600_000 });
  stats = new Redis(redis.url, { disconnectTimeout: 50 });
});

afterAll(async () => {
  stats.disconnect();
  await admin.close();
  await redis.stop();
});

async function redisNowMs(): Promise<number> {
  const [seconds, micros] = await stats.time();
  return Number(seconds) * 1000 + Number(micros) / 1000;
}

/** A key that expires at `expiresAtMs` on Redis's clock. */
async function keyExpiringAt(name: string, expiresAtMs: number) {
  const accountId = `acct_clock_${name}_${Math.floor(Math.random() * 1e9)}`;
  expect(await admin.createAccount({ id: accountId, name, status: 'active', createdAt: '2026-11-23T12:00:00.000Z' })).toBe(true);
  const { id: keyId } = await insertKey(admin, generateCustomerKey('live'), {
    accountId,
    name,
    expiresAt: new Date(expiresAtMs).toISOString(),
  });
  return { accountId, keyId, defaultPlan: plan, defaultTokenBudgets: NO_TOKEN_BUDGETS };
}

describe.each([
  ['an hour ahead', HOUR_MS],
  ['an hour behind', -HOUR_MS],
])("a host whose clock is %s decides on Redis's clock", (_, skewMs) => {
  let store: RedisStore;

  beforeAll(async () => {
    // A wall clock off by skewMs, as a misconfigured host would read it.
    store = await RedisStore.connect({
      url: redis.url,
      commandTimeoutMs: 1000,
      localClockMs: () => performance.timeOrigin + performance.now() + skewMs,
      // The first sample is all these tests need; later ones would show up as TIME in the command count below.
      clockSampleIntervalMs: 3_600_000,
    });
  });

  afterAll(async () => {
    await store.close();
  });

  /**
   * How far the store's carried clock may be from Redis's (half the round trip of its sample), plus 20 ms for the
   * test's own TIME reads: a fixed 20 ms failed when the one sample was taken on a busy machine.
   */
  const marginMs = () => store.decisionClockUncertaintyUs()! / 1000 + 20;

  it('allows a key until its expiry on Redis’s clock and refuses it from then on', async () => {
    // Two seconds ahead: on a loaded machine writing the key and the first decision can take most of a shorter window.
    const expiresAtMs = Math.ceil(await redisNowMs()) + 2_000;
    const ids = await keyExpiringAt('expiring', expiresAtMs);
    // A decision is judged by Redis's time read after it: on a loaded machine the decision itself can come well after
    // a time read before it. One that ended more than the carried clock's margin before the expiry must allow.
    let judged = 0;
    while ((await redisNowMs()) < expiresAtMs - marginMs()) {
      const kind = (await store.authorize(ids)).kind;
      if ((await redisNowMs()) < expiresAtMs - marginMs()) {
        expect(kind).toBe('allow');
        judged += 1;
      }
      await sleep(25);
    }
    expect(judged).toBeGreaterThan(0);
    while ((await redisNowMs()) < expiresAtMs + marginMs()) await sleep(5);
    expect((await store.authorize(ids)).kind).toBe('key_expired');
  });

  it('refuses a key that expired a moment ago on Redis’s clock', async () => {
    const ids = await keyExpiringAt('expired', Math.floor((await redisNowMs()) - marginMs()));
    expect((await store.authorize(ids)).kind).toBe('key_expired');
  });

  it('runs no TIME of its own', async () => {
    const ids = await keyExpiringAt('commands', Math.ceil(await redisNowMs()) + HOUR_MS);
    expect((await store.authorize(ids)).kind).toBe('allow');
    await stats.config('RESETSTAT');
    expect((await store.authorize(ids)).kind).toBe('allow');
    expect(await stats.info('commandstats')).not.toMatch(/^cmdstat_time:/m);
  });
});
