import Redis from 'ioredis';
import { ManualClock } from '../../src/platform/clock';
import type { AuthorizeOutcome } from '../../src/check/ports';
import {
  HOLD_LIFETIME_US,
  HOLD_LONGEST_LIFETIME_US,
  HOLD_SLOT_US,
  HOLD_SLOTS,
  holdSlotAt,
  type CreditHold,
  type PlacedHold,
} from '../../src/accounts/credit-holds';
import type { Account, StoredKey } from '../../src/keys/key-records';
import type { RatePlan } from '../../src/accounts/limits/rate-limits';
import { NO_TOKEN_BUDGETS, type TokenBudgetPlan } from '../../src/accounts/limits/token-budgets';
import type { UsageRecord } from '../../src/metering/usage-record';
import { generateCustomerKey, hashCustomerKey } from '../../src/keys/customer-key';
import { MemoryStore } from '../../src/store/memory-store';
import { redisKeys } from '../../src/store/redis/redis-keys';
import { parsePackedHoldSlots } from '../../src/store/redis/redis-records';
import { RedisStore } from '../../src/store/redis/redis-store';
import type { Store } from '../../src/ports/store';
import { startTestRedis, type TestRedis } from '../support/redis-server';

/**
 * Credit holds in both stores (issue 35 §1): an allowed Check holds its
 * estimate until its answer is metered, so the Checks of a burst see each
 * other. Each case runs on the in-memory store and on real Redis with the
 * same injected clock, so the two behave the same; the Redis cases also look
 * at what is left in Redis.
 */
const T0 = Date.parse('2026-11-22T12:00:00Z');
const NO_LIMITS: RatePlan = { key: [], account: [] };
const LIFETIME_MS = HOLD_LIFETIME_US / 1000;
/** When a hold placed at T0 lapses: the end of the last slot it counts in. */
const T0_LAPSES_AT = ((holdSlotAt(T0 * 1000) + HOLD_SLOTS) * HOLD_SLOT_US) / 1000;

let redis: TestRedis;
let raw: Redis;
const opened: Store[] = [];
beforeAll(async () => {
  redis = await startTestRedis();
  raw = new Redis(redis.url);
});
afterAll(async () => {
  raw?.disconnect();
  await Promise.all(opened.map((store) => store.close()));
  await redis?.stop();
});

const implementations: [string, (clock: ManualClock) => Promise<Store>][] = [
  ['memory', async (clock) => new MemoryStore(clock)],
  [
    'redis',
    async (clock) => {
      const store = await RedisStore.connect({ url: redis.url, commandTimeoutMs: 1000, clockOverride: () => clock.now() });
      opened.push(store);
      return store;
    },
  ],
];

let counter = 0;
const unique = (base: string) => `${base}-${process.pid}-${(counter += 1)}`;

/** An account (with `extra`) and one live key of it (with `keyExtra`): their ids. */
async function seedAccountWithKey(store: Store, base: string, extra: Partial<Account> = {}, keyExtra: Partial<StoredKey> = {}) {
  const accountId = unique(base);
  await store.createAccount({ id: accountId, name: accountId, status: 'active', createdAt: '2026-11-22T00:00:00.000Z', ...extra });
  const key = generateCustomerKey('live');
  const record: StoredKey = {
    id: `key_${hashCustomerKey(key).slice(0, 12)}`,
    accountId,
    prefix: key.slice(0, 12),
    name: 'ci',
    environment: 'live',
    status: 'active',
    createdAt: '2026-11-22T00:00:01.000Z',
    ...keyExtra,
  };
  expect(await store.insertKey(hashCustomerKey(key), record)).toBe('created');
  return { accountId, keyId: record.id };
}

describe.each(implementations)('credit holds: %s', (name, open) => {
  let store: Store;
  let clock: ManualClock;
  beforeEach(async () => {
    clock = new ManualClock(T0);
    store = await open(clock);
  });

  const seed = (extra: Partial<Account> = {}, keyExtra: Partial<StoredKey> = {}) => seedAccountWithKey(store, 'holder', extra, keyExtra);

  type Ids = Awaited<ReturnType<typeof seed>>;
  const hold = (requestId: string, minorUnits: number, tokens = 0): CreditHold => ({ requestId, minorUnits, tokens });
  /** What each allowed Check held, by request id: what Check tells metering (HOLD_HEADER), and the record releases. */
  let placed: Map<string, PlacedHold>;
  beforeEach(() => {
    placed = new Map();
  });
  const check = async (ids: Ids, held: CreditHold, budgets: TokenBudgetPlan = NO_TOKEN_BUDGETS): Promise<AuthorizeOutcome['kind']> => {
    const outcome = await store.authorize({ ...ids, defaultPlan: NO_LIMITS, defaultTokenBudgets: budgets, hold: held });
    if (outcome.kind === 'allow' && outcome.held) placed.set(held.requestId, outcome.held);
    return outcome.kind;
  };
  const meter = async (ids: Ids, requestId: string, costMinorUnits: number, tokens = 0, budgets: TokenBudgetPlan = NO_TOKEN_BUDGETS) => {
    const heldFor = placed.get(requestId);
    const record: UsageRecord = {
      requestId,
      ...(heldFor ? { hold: heldFor } : {}),
      ...ids,
      keyPrefix: 'gk_live_AbC4',
      family: 'chat-completions',
      style: 'chat',
      tokens: { inputTokens: tokens, outputTokens: 0, cachedInputTokens: 0, cacheCreationTokens: 0 },
      costMinorUnits,
      estimated: false,
      atMs: clock.now(),
    };
    expect((await store.applyUsage(record, budgets)).kind).toBe('applied');
  };
  const balance = async (accountId: string) => (await store.getAccount(accountId))?.creditBalance;
  /** Redis only: the money and tokens the sums at the end of the account's and the key's bucket fields hold, over all slots. */
  const redisHeld = async (ids: Ids) => {
    const [accountField, keyField] = await raw.hmgetBuffer(
      redisKeys.account(ids.accountId),
      redisKeys.accountBucketField(),
      redisKeys.keyBucketField(ids.keyId),
    );
    const total = (field: Buffer | null | undefined) => {
      const slots = parsePackedHoldSlots(field);
      if (!slots) return undefined;
      return { minorUnits: slots.money.reduce((a, b) => a + b, 0), tokens: slots.tokens.reduce((a, b) => a + b, 0) };
    };
    return { account: total(accountField), key: total(keyField) };
  };

  it('admits a request only while the balance covers the holds in flight and its own; metering releases the hold and debits the real cost', async () => {
    const ids = await seed({ creditBalance: 100 });
    expect(await check(ids, hold('a', 60))).toBe('allow');
    // 100 − 60 held < 60: without holds this one would pass on the 100 not yet debited.
    expect(await check(ids, hold('b', 60))).toBe('credit_exhausted');
    await meter(ids, 'a', 30);
    expect(await balance(ids.accountId)).toBe(70);
    expect(await check(ids, hold('c', 60))).toBe('allow');
    // The key has no cap or budgets of its own: only the account sums its holds.
    if (name === 'redis') expect(await redisHeld(ids)).toEqual({ account: { minorUnits: 60, tokens: 0 }, key: undefined });
    await meter(ids, 'c', 75);
    // The answer cost more than its hold: the balance goes below zero by that excess only.
    expect(await balance(ids.accountId)).toBe(-5);
    if (name === 'redis') expect(await redisHeld(ids)).toEqual({ account: { minorUnits: 0, tokens: 0 }, key: undefined });
  });

  it('judges a Check that brings no hold (a route that is not metered) without the holds in flight, in both stores', async () => {
    const ids = await seed({ creditBalance: 70 });
    expect(await check(ids, hold('a', 60))).toBe('allow');
    // 70 − 60 held < 30: a metered request is refused; one on a route that is never charged is not.
    expect(await check(ids, hold('b', 30))).toBe('credit_exhausted');
    const unheld = await store.authorize({ ...ids, defaultPlan: NO_LIMITS, defaultTokenBudgets: NO_TOKEN_BUDGETS });
    expect(unheld.kind).toBe('allow');
    await meter(ids, 'a', 80);
    // Nothing is left: now it is refused too, on the balance alone.
    expect((await store.authorize({ ...ids, defaultPlan: NO_LIMITS, defaultTokenBudgets: NO_TOKEN_BUDGETS })).kind).toBe(
      'credit_exhausted',
    );
  });

  it('leaves no hold for a refused Check', async () => {
    const ids = await seed({ creditBalance: 100, limits: { key: [{ limit: 1, windowSeconds: 60 }], account: [] } });
    expect(await check(ids, hold('a', 40))).toBe('allow');
    // Refused by the rate limit, after the balance passed it (100 − 40 ≥ 40): it must not hold anything.
    expect(await check(ids, hold('b', 40))).toBe('rate_limited');
    clock.advance(60_000);
    // 100 − 40 held ≥ 40; had b held its 40 too, 20 would be left and c refused.
    expect(await check(ids, hold('c', 40))).toBe('allow');
    clock.advance(60_000);
    await meter(ids, 'a', 0);
    await meter(ids, 'c', 0);
    clock.advance(60_000);
    expect(await check(ids, hold('d', 100))).toBe('allow');
    if (name === 'redis') expect((await redisHeld(ids)).account).toEqual({ minorUnits: 100, tokens: 0 });
  });

  it('releases a hold whose answer never came once its slots have passed (720 to 1440 s), and still debits an answer metered after that', async () => {
    expect(T0_LAPSES_AT - T0).toBeGreaterThanOrEqual(LIFETIME_MS);
    expect(T0_LAPSES_AT - T0).toBeLessThanOrEqual(HOLD_LONGEST_LIFETIME_US / 1000);
    const ids = await seed({ creditBalance: 100 });
    expect(await check(ids, hold('a', 100))).toBe('allow');
    clock.set(T0_LAPSES_AT - 1);
    expect(await check(ids, hold('b', 100))).toBe('credit_exhausted');
    clock.set(T0_LAPSES_AT);
    expect(await check(ids, hold('b', 100))).toBe('allow');
    if (name === 'redis') expect((await redisHeld(ids)).account).toEqual({ minorUnits: 100, tokens: 0 });
    // a's answer after all, late: its real cost is debited; b's hold stays whole.
    await meter(ids, 'a', 30);
    expect(await balance(ids.accountId)).toBe(70);
    expect(await check(ids, hold('c', 1))).toBe('credit_exhausted');
    await meter(ids, 'b', 0);
    expect(await check(ids, hold('c', 70))).toBe('allow');
  });

  it('holds twice for a request id checked twice, releases one hold with its answer and lets the other lapse', async () => {
    // Envoy checks each request once; a repeated id is held again (there is no record per hold to find it by), which
    // errs toward refusing, never toward overdrawing.
    const ids = await seed({ creditBalance: 120 });
    expect(await check(ids, hold('a', 60))).toBe('allow');
    expect(await check(ids, hold('a', 60))).toBe('allow');
    expect(await check(ids, hold('b', 1))).toBe('credit_exhausted');
    await meter(ids, 'a', 60);
    // One hold of a released, the balance down by the one answer: 60 − 60 held.
    expect(await balance(ids.accountId)).toBe(60);
    expect(await check(ids, hold('b', 1))).toBe('credit_exhausted');
    // A release repeated (a command resent after a lost reply) takes nothing more.
    await store.releaseHold(ids.accountId, ids.keyId, 'a', placed.get('a')!);
    expect(await check(ids, hold('b', 1))).toBe('credit_exhausted');
    clock.set(T0_LAPSES_AT);
    expect(await check(ids, hold('b', 60))).toBe('allow');
  });

  it('counts holds against monthly spend caps, the key and the account', async () => {
    const ids = await seed({ monthlySpendCap: 100 }, { monthlySpendCap: 50 });
    expect(await check(ids, hold('a', 50))).toBe('allow');
    expect(await check(ids, hold('b', 1))).toBe('budget_exceeded');
    await meter(ids, 'a', 10);
    expect(await check(ids, hold('b', 40))).toBe('allow');
    expect(await check(ids, hold('c', 1))).toBe('budget_exceeded');
    const other = await seed({ monthlySpendCap: 100 });
    expect(await check(other, hold('a', 60))).toBe('allow');
    expect(await check(other, hold('b', 41))).toBe('budget_exceeded');
    expect(await check(other, hold('b', 40))).toBe('allow');
  });

  it("releases a key's lapsed holds from its spend cap as from the account's, and keeps other keys' holds off it", async () => {
    const ids = await seed({ creditBalance: 1_000 }, { monthlySpendCap: 50 });
    const key = generateCustomerKey('live');
    const other = { accountId: ids.accountId, keyId: `${ids.keyId}_2` };
    const otherRecord: StoredKey = {
      id: other.keyId,
      accountId: ids.accountId,
      prefix: key.slice(0, 12),
      name: 'ci',
      environment: 'live',
      status: 'active',
      createdAt: '2026-11-22T00:00:01.000Z',
    };
    expect(await store.insertKey(hashCustomerKey(key), otherRecord)).toBe('created');
    expect(await check(ids, hold('a', 50))).toBe('allow');
    expect(await check(ids, hold('b', 50))).toBe('budget_exceeded');
    // The other key's holds count for the account, not for the capped key.
    expect(await check(other, hold('y', 500))).toBe('allow');
    clock.set(T0_LAPSES_AT);
    expect(await check(ids, hold('b', 50))).toBe('allow');
    expect(await check(ids, hold('c', 1))).toBe('budget_exceeded');
    await meter(ids, 'b', 0);
    expect(await check(ids, hold('c', 50))).toBe('allow');
  });

  // The sums' layout in the bucket fields is Redis's own: the memory store has none, so these exist for Redis only (not skipped).
  const onRedis = (title: string, test: () => Promise<void>): void => {
    if (name === 'redis') it(title, test);
  };

  onRedis(
    'keeps the sums at the end of the bucket fields, in the account hash alone, and keeps them when a decision holds nothing',
    async () => {
      const ids = await seed(
        { creditBalance: 1_000, limits: { key: [{ limit: 100, windowSeconds: 60 }], account: [{ limit: 100, windowSeconds: 60 }] } },
        { monthlySpendCap: 1_000 },
      );
      const before = (await raw.keys(`*${ids.accountId}*`)).sort();
      expect(await check(ids, hold('a', 10, 0))).toBe('allow');
      expect(await check(ids, hold('b', 20, 0))).toBe('allow');
      // No key of its own: a hold is two sums in fields every decision reads and writes already.
      expect((await raw.keys(`*${ids.accountId}*`)).sort()).toEqual(before);
      expect(await redisHeld(ids)).toEqual({ account: { minorUnits: 30, tokens: 0 }, key: { minorUnits: 30, tokens: 0 } });
      // A decision that brings no hold writes the windows and keeps the sums.
      expect((await store.authorize({ ...ids, defaultPlan: NO_LIMITS, defaultTokenBudgets: NO_TOKEN_BUDGETS })).kind).toBe('allow');
      expect(await redisHeld(ids)).toEqual({ account: { minorUnits: 30, tokens: 0 }, key: { minorUnits: 30, tokens: 0 } });
      await meter(ids, 'a', 10);
      expect(await redisHeld(ids)).toEqual({ account: { minorUnits: 20, tokens: 0 }, key: { minorUnits: 20, tokens: 0 } });
      await meter(ids, 'b', 10);
      expect(await redisHeld(ids)).toEqual({ account: { minorUnits: 0, tokens: 0 }, key: { minorUnits: 0, tokens: 0 } });
    },
  );

  onRedis('lets the hourly sweep delete a bucket field only once its windows and its holds have passed', async () => {
    const ids = await seed({ creditBalance: 1_000 });
    expect(await check(ids, hold('a', 10))).toBe('allow');
    const field = redisKeys.accountBucketField();
    // Past the windows (none in this plan) but not the hold: the sweep keeps the field.
    clock.advance(LIFETIME_MS - 1);
    await raw.hdel(redisKeys.account(ids.accountId), 'bucketSweepAtUs');
    expect(await check(ids, hold('b', 10))).toBe('allow');
    expect(await raw.hexists(redisKeys.account(ids.accountId), field)).toBe(1);
    await meter(ids, 'b', 1);
    clock.set(T0_LAPSES_AT + HOLD_SLOT_US / 1000);
    await raw.hdel(redisKeys.account(ids.accountId), 'bucketSweepAtUs');
    expect((await store.authorize({ ...ids, defaultPlan: NO_LIMITS, defaultTokenBudgets: NO_TOKEN_BUDGETS })).kind).toBe('allow');
    expect(await raw.hexists(redisKeys.account(ids.accountId), field)).toBe(0);
  });

  it('counts the holds already in flight against a spend cap or budgets given to their key while they are', async () => {
    // No cap when a and b were placed: in Redis they counted for the account alone (their key had no sums).
    const ids = await seed({ creditBalance: 1_000 });
    expect(await check(ids, hold('a', 50))).toBe('allow');
    expect(await check(ids, hold('b', 40))).toBe('allow');
    await store.updateKey(ids.keyId, { monthlySpendCap: 100 });
    // 90 held + 20 > 100: refused, as if the cap had been there all along.
    expect(await check(ids, hold('c', 20))).toBe('budget_exceeded');
    expect(await check(ids, hold('d', 10))).toBe('allow');
    await meter(ids, 'a', 50);
    await meter(ids, 'b', 40);
    await meter(ids, 'd', 10);
    // The month's spend is now the whole cap: nothing held, and nothing more passes.
    expect(await check(ids, hold('e', 1))).toBe('budget_exceeded');
    if (name === 'redis') expect((await redisHeld(ids)).key).toEqual({ minorUnits: 0, tokens: 0 });

    // Which holds in flight are the key's is kept nowhere: another key's count against the new cap too, until their
    // slots pass, and never fewer than the key's own.
    const shared = await seed({ creditBalance: 1_000 });
    const otherKey = generateCustomerKey('live');
    const other = { accountId: shared.accountId, keyId: `${shared.keyId}_2` };
    expect(
      await store.insertKey(hashCustomerKey(otherKey), {
        id: other.keyId,
        accountId: shared.accountId,
        prefix: otherKey.slice(0, 12),
        name: 'other',
        environment: 'live',
        status: 'active',
        createdAt: '2026-11-22T00:00:01.000Z',
      }),
    ).toBe('created');
    expect(await check(other, hold('o1', 80))).toBe('allow');
    await store.updateKey(shared.keyId, { monthlySpendCap: 100 });
    expect(await check(shared, hold('s1', 30))).toBe('budget_exceeded');
    expect(await check(shared, hold('s2', 20))).toBe('allow');
    clock.set(T0_LAPSES_AT);
    expect(await check(shared, hold('s3', 80))).toBe('allow');

    // Tokens likewise, for budgets given to the key: t1 held its tokens against the account's budget alone.
    const budgets: TokenBudgetPlan = NO_TOKEN_BUDGETS;
    const tokensIds = await seed({ creditBalance: 1_000_000, tokenBudgets: { account: [{ tokens: 1_000_000, windowSeconds: 60 }] } });
    expect(await check(tokensIds, hold('t1', 1, 600), budgets)).toBe('allow');
    await store.updateKey(tokensIds.keyId, { tokenBudgets: [{ tokens: 1_000, windowSeconds: 60 }] });
    expect(await check(tokensIds, hold('t2', 1, 600), budgets)).toBe('allow');
    // 1,200 tokens held of the key's 1,000: none left.
    expect(await check(tokensIds, hold('t3', 1, 600), budgets)).toBe('token_budget_exhausted');
  });

  it('keeps the holds in flight while a decision holds nothing, as when the account is postpaid for a while', async () => {
    const windows = [{ limit: 1_000, windowSeconds: 60 }];
    for (const limits of [undefined, { key: windows, account: windows }]) {
      const ids = await seed({ creditBalance: 100, ...(limits ? { limits } : {}) });
      const id = (name: string) => `${name}-${ids.accountId}`;
      expect(await check(ids, hold(id('a'), 90))).toBe('allow');
      await store.updateAccount(ids.accountId, { creditBalance: null });
      // A hold sent to an account that counts none: nothing is held, and a's 90 must stay in the sums.
      expect(await check(ids, hold(id('x'), 90))).toBe('allow');
      await store.updateAccount(ids.accountId, { creditBalance: 1_000 });
      expect(await check(ids, hold(id('b'), 900))).toBe('allow');
      // 1,000 − (90 + 900) < 50.
      expect(await check(ids, hold(id('c'), 50))).toBe('credit_exhausted');
      await meter(ids, id('a'), 0);
      // a released from its own sums, b's 900 still held: 1,000 − 900 < 150.
      expect(await check(ids, hold(id('d'), 150))).toBe('credit_exhausted');
      expect(await check(ids, hold(id('e'), 100))).toBe('allow');
    }
  });

  it("counts a key's holds from the account's again when a cap it lost is given back, with or without key windows", async () => {
    for (const limits of [undefined, { key: [{ limit: 1_000, windowSeconds: 60 }], account: [] }]) {
      const ids = await seed({ creditBalance: 100_000, ...(limits ? { limits } : {}) }, { monthlySpendCap: 100 });
      expect(await check(ids, hold(`a-${counter}`, 60))).toBe('allow');
      await store.updateKey(ids.keyId, { monthlySpendCap: null });
      expect(await check(ids, hold(`b-${counter}`, 60))).toBe('allow');
      await store.updateKey(ids.keyId, { monthlySpendCap: 100 });
      // 120 of this key's in flight: its cap of 100 admits nothing more.
      expect(await check(ids, hold(`c-${counter}`, 30))).toBe('budget_exceeded');
    }
  });

  it('counts held tokens as used against the token budgets', async () => {
    const budgets: TokenBudgetPlan = { key: [{ tokens: 1_000, windowSeconds: 60 }], account: [] };
    const ids = await seed();
    expect(await check(ids, hold('a', 0, 600), budgets)).toBe('allow');
    expect(await check(ids, hold('b', 0, 600), budgets)).toBe('allow');
    // 1,200 tokens held of 1,000: none left for c until an answer comes.
    expect(await check(ids, hold('c', 0, 600), budgets)).toBe('token_budget_exhausted');
    await meter(ids, 'a', 0, 100, budgets);
    expect(await check(ids, hold('c', 0, 600), budgets)).toBe('allow');
    // A postpaid account without a cap or a budget holds nothing.
    const free = await seed();
    for (const id of ['free-a', 'free-b', 'free-c']) expect(await check(free, hold(id, 1_000_000, 1_000_000))).toBe('allow');
    expect(placed.has('free-a')).toBe(false);
    if (name === 'redis') expect(await redisHeld(free)).toEqual({ account: undefined, key: undefined });
  });
});

describe('credit holds: a Check failed at its deadline (real Redis)', () => {
  // Redis paused past the Check's deadline: the Check fails (Envoy refuses the request), but Redis runs the script once
  // it resumes. What that late run held is let go by the store, as no answer will release it; what it refused held
  // nothing, and nothing is taken.
  async function pausedCheck(store: RedisStore, ids: { accountId: string; keyId: string }, requestId: string, minorUnits: number) {
    await raw.call('CLIENT', 'PAUSE', '400', 'ALL');
    const outcome = store.authorize({
      ...ids,
      defaultPlan: NO_LIMITS,
      defaultTokenBudgets: NO_TOKEN_BUDGETS,
      hold: { requestId, minorUnits, tokens: 0 },
    });
    await expect(outcome).rejects.toThrow(/deadline|timed out|Redis/i);
  }

  it('lets go of the hold of a late allow, and takes nothing for a late refusal', async () => {
    const clock = new ManualClock(T0);
    const store = await RedisStore.connect({ url: redis.url, commandTimeoutMs: 150, clockOverride: () => clock.now() });
    opened.push(store);
    const failures: unknown[] = [];
    store.reportLateHoldReleaseFailuresTo((error) => failures.push(error));
    const ids = await seedAccountWithKey(store, 'late', { creditBalance: 100 });
    const authorize = (requestId: string, minorUnits: number) =>
      store.authorize({
        ...ids,
        defaultPlan: NO_LIMITS,
        defaultTokenBudgets: NO_TOKEN_BUDGETS,
        hold: { requestId, minorUnits, tokens: 0 },
      });
    const held = async () => parsePackedHoldSlots(await raw.hgetBuffer(redisKeys.account(ids.accountId), redisKeys.accountBucketField()));
    const heldNow = async () => (await held())?.money.reduce((a, b) => a + b, 0);

    await pausedCheck(store, ids, 'late-allow', 100);
    // Once Redis resumed, the script ran and held 100; its late allow lets it go again.
    await until(async () => (await heldNow()) === 0, 'the late hold let go');
    expect((await authorize('next', 100)).kind).toBe('allow');
    expect(await heldNow()).toBe(100);

    // Refused late (nothing left): nothing to let go, and next's 100 stay held.
    await pausedCheck(store, ids, 'late-refused', 50);
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(await heldNow()).toBe(100);
    expect((await authorize('again', 1)).kind).toBe('credit_exhausted');
    expect(failures).toEqual([]);
  });
});

async function until(condition: () => Promise<boolean>, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
