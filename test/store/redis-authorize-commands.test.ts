import { dayStartOf, hourStartOf } from '../../src/keys/request-counts';
import { NO_TOKEN_BUDGETS, type TokenBudgetPlan } from '../../src/accounts/limits/token-budgets';
import Redis from 'ioredis';
import { generateCustomerKey, hashCustomerKey } from '../../src/keys/customer-key';
import type { RatePlan } from '../../src/accounts/limits/rate-limits';
import { parsePackedHoldSlots } from '../../src/store/redis/redis-records';
import { redisKeys } from '../../src/store/redis/redis-keys';
import { RedisStore } from '../../src/store/redis/redis-store';
import { startTestRedis, type TestRedis } from '../support/redis-server';

/**
 * What one decision costs Redis: every command it executes, the script's own
 * included (INFO commandstats counts both), for each class of the traffic
 * mix: four for an allowed decision (token budgets in the plan included),
 * three for a refused one (an exhausted budget included), and no TIME: the
 * decision time comes with the call (RedisClock), one for a key
 * hash the service has not cached, none for a malformed key (it never
 * reaches the store). The last-used batches add one script per batch and
 * two commands per key, plus with request counts one HINCRBY per key and
 * count hash and one PEXPIRE per count hash. And the buckets packed into the account hash do not
 * pile up: buckets whose time has passed (a rotated key's, say) are deleted
 * by a later decision.
 */
let redis: TestRedis;
let store: RedisStore;
/** As production runs it: no clock override, so Redis's clock as RedisClock carries it. */
let liveStore: RedisStore;
let stats: Redis;
let nowMs = Date.parse('2026-11-23T12:00:00.000Z');

const plan: RatePlan = Object.freeze({ key: [{ limit: 3, windowSeconds: 60 }], account: [{ limit: 100, windowSeconds: 3600 }] });
const budgets: TokenBudgetPlan = Object.freeze({
  key: Object.freeze([{ tokens: 100_000, windowSeconds: 60 }]),
  account: Object.freeze([{ tokens: 5_000_000, windowSeconds: 86_400 }]),
});

beforeAll(async () => {
  redis = await startTestRedis();
  store = await RedisStore.connect({ url: redis.url, commandTimeoutMs: 1000, clockOverride: () => nowMs });
  // Its clock's own TIME samples (once a second) would blur the count: one at the start is all it takes here.
  liveStore = await RedisStore.connect({ url: redis.url, commandTimeoutMs: 1000, clockSampleIntervalMs: 3_600_000 });
  stats = new Redis(redis.url, { disconnectTimeout: 50 });
});

afterAll(async () => {
  stats.disconnect();
  await store.close();
  await liveStore.close();
  await redis.stop();
});

async function newAccountWithKey(name: string, keyLimits?: RatePlan['key']): Promise<{ accountId: string; keyId: string }> {
  const suffix = `${Date.now()}${Math.floor(Math.random() * 1e6)}`;
  const accountId = `acct_${name}${suffix}`;
  expect(await store.createAccount({ id: accountId, name, status: 'active', createdAt: '2026-11-23T12:00:00.000Z' })).toBe(true);
  const keyId = await newKey(accountId, keyLimits);
  return { accountId, keyId };
}

async function newKey(accountId: string, keyLimits?: RatePlan['key']): Promise<string> {
  const key = generateCustomerKey('live');
  const keyId = `key_${Math.floor(Math.random() * 1e9)}`;
  const record = {
    id: keyId,
    accountId,
    prefix: key.slice(0, 12),
    name: 'commands',
    environment: 'live' as const,
    status: 'active' as const,
    createdAt: '2026-11-23T12:00:00.000Z',
    ...(keyLimits ? { limits: keyLimits } : {}),
  };
  expect(await store.insertKey(hashCustomerKey(key), record)).toBe('created');
  return keyId;
}

/** Every command Redis executed during `run` (client and in-script), by name. */
async function commandsDuring(run: () => Promise<unknown>): Promise<Record<string, number>> {
  await stats.config('RESETSTAT');
  await run();
  const info = await stats.info('commandstats');
  return Object.fromEntries(
    [...info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)]
      .filter((m) => !/^(config|info)(\||$)/.test(m[1]!))
      .map((m) => [m[1]!, Number(m[2])]),
  );
}

const total = (calls: Record<string, number>) => Object.values(calls).reduce((sum, n) => sum + n, 0);

it("an allowed decision with key and account limits executes 4 commands, script included, and no TIME: Redis's clock comes with the call", async () => {
  const { accountId, keyId } = await newAccountWithKey('allowed');
  // The first call loads the script (NOSCRIPT, then EVAL): not the steady state.
  expect((await liveStore.authorize({ accountId, keyId, defaultPlan: plan, defaultTokenBudgets: NO_TOKEN_BUDGETS })).kind).toBe('allow');
  const calls = await commandsDuring(async () => {
    expect((await liveStore.authorize({ accountId, keyId, defaultPlan: plan, defaultTokenBudgets: NO_TOKEN_BUDGETS })).kind).toBe('allow');
  });
  expect(calls).toEqual({ evalsha: 1, hmget: 2, hset: 1 });
});

it('an allowed decision with token budgets in the plan still executes 4 commands: the buckets come with the account read', async () => {
  const { accountId, keyId } = await newAccountWithKey('budgets');
  const ids = { accountId, keyId, defaultPlan: plan, defaultTokenBudgets: budgets };
  expect((await liveStore.authorize(ids)).kind).toBe('allow');
  const calls = await commandsDuring(async () => {
    expect(await liveStore.authorize(ids)).toMatchObject({ kind: 'allow', tightestBudget: { remaining: 100_000 } });
  });
  expect(calls).toEqual({ evalsha: 1, hmget: 2, hset: 1 });
});

it('a refusal by an exhausted token budget executes at most 3 commands: no write', async () => {
  const { accountId, keyId } = await newAccountWithKey('exhausted');
  const ids = { accountId, keyId, defaultPlan: plan, defaultTokenBudgets: budgets };
  const tokens = { inputTokens: 100_000, outputTokens: 0, cachedInputTokens: 0, cacheCreationTokens: 0 };
  await store.applyUsage(
    {
      requestId: `req_${keyId}`,
      accountId,
      keyId,
      keyPrefix: 'gk_live_AbC4',
      family: 'chat-completions',
      style: 'chat',
      model: 'm',
      tokens,
      costMinorUnits: 0,
      estimated: false,
      atMs: nowMs,
    },
    budgets,
  );
  expect((await store.authorize(ids)).kind).toBe('token_budget_exhausted');
  const calls = await commandsDuring(async () => {
    expect((await store.authorize(ids)).kind).toBe('token_budget_exhausted');
  });
  expect(calls.evalsha).toBe(1);
  expect(calls.hset).toBeUndefined();
  expect(total(calls)).toBeLessThanOrEqual(3);
});

it("a spend cap costs one more read, of the month's spend, only on an account or key that has one", async () => {
  const { accountId, keyId } = await newAccountWithKey('capped');
  expect(await store.updateAccount(accountId, { monthlySpendCap: 1_000 })).not.toBeNull();
  const ids = { accountId, keyId, defaultPlan: plan, defaultTokenBudgets: NO_TOKEN_BUDGETS };
  expect((await store.authorize(ids)).kind).toBe('allow');
  const calls = await commandsDuring(async () => {
    expect((await store.authorize(ids)).kind).toBe('allow');
  });
  expect(calls.hmget).toBe(3);
  expect(total(calls)).toBeLessThanOrEqual(5);
});

it('a key with its own limits refused by them executes at most 3 commands: no write', async () => {
  const { accountId, keyId } = await newAccountWithKey('refused', [
    { limit: 1, windowSeconds: 10 },
    { limit: 5, windowSeconds: 60 },
  ]);
  expect((await store.authorize({ accountId, keyId, defaultPlan: plan, defaultTokenBudgets: NO_TOKEN_BUDGETS })).kind).toBe('allow');
  const calls = await commandsDuring(async () => {
    expect((await store.authorize({ accountId, keyId, defaultPlan: plan, defaultTokenBudgets: NO_TOKEN_BUDGETS })).kind).toBe(
      'rate_limited',
    );
  });
  expect(calls.evalsha).toBe(1);
  expect(calls.hset).toBeUndefined();
  expect(total(calls)).toBeLessThanOrEqual(3);
});

it('a refusal for key status or billing executes at most 3 commands', async () => {
  const { accountId, keyId } = await newAccountWithKey('suspended');
  expect(await store.updateAccount(accountId, { status: 'suspended' })).not.toBeNull();
  expect((await store.authorize({ accountId, keyId, defaultPlan: plan, defaultTokenBudgets: NO_TOKEN_BUDGETS })).kind).toBe(
    'account_suspended',
  );
  const calls = await commandsDuring(async () => {
    expect((await store.authorize({ accountId, keyId, defaultPlan: plan, defaultTokenBudgets: NO_TOKEN_BUDGETS })).kind).toBe(
      'account_suspended',
    );
  });
  expect(calls.evalsha).toBe(1);
  expect(total(calls)).toBeLessThanOrEqual(3);
});

it('a key hash the service has not cached costs one GET; a known hash whose record is gone, two commands', async () => {
  const unknown = await commandsDuring(async () => {
    expect(await store.resolveKeyHash(hashCustomerKey(generateCustomerKey('live')))).toBeNull();
  });
  expect(unknown).toEqual({ get: 1 });
  const { accountId } = await newAccountWithKey('gone');
  const gone = await commandsDuring(async () => {
    expect(
      (await store.authorize({ accountId, keyId: 'key_never_stored', defaultPlan: plan, defaultTokenBudgets: NO_TOKEN_BUDGETS })).kind,
    ).toBe('unknown_key');
  });
  expect(total(gone)).toBeLessThanOrEqual(2);
});

it('a last-used batch executes one script and at most two commands per key, however many keys', async () => {
  const { accountId, keyId } = await newAccountWithKey('used');
  const others = await Promise.all(Array.from({ length: 9 }, () => newKey(accountId)));
  const uses = [keyId, ...others].map((id) => ({ accountId, keyId: id, atMs: nowMs }));
  await store.recordLastUsed(uses.slice(0, 1)); // loads the script: not the steady state
  const calls = await commandsDuring(() => store.recordLastUsed(uses));
  expect(calls.evalsha).toBe(1);
  expect(total(calls)).toBeLessThanOrEqual(1 + 2 * uses.length);
  // Again with the same times: nothing is later, so nothing is written.
  const again = await commandsDuring(() => store.recordLastUsed(uses));
  expect(again).toEqual({ evalsha: 1, hmget: uses.length });
});

it('a batch with request counts is still one script, and writes the counts within the account hash tag', async () => {
  const { accountId, keyId } = await newAccountWithKey('counted');
  const others = await Promise.all(Array.from({ length: 4 }, () => newKey(accountId)));
  const uses = [keyId, ...others].map((id) => ({ accountId, keyId: id, atMs: nowMs, requests: 2 }));
  await store.recordLastUsed(uses.slice(0, 1)); // loads the script: not the steady state
  const calls = await commandsDuring(() => store.recordLastUsed(uses, { id: `batch-${accountId}`, hourStartMs: hourStartOf(nowMs) }));
  expect(calls.evalsha).toBe(1);
  expect(calls.hincrby).toBe(2 * uses.length);
  expect(calls.pexpire).toBe(2);
  const written = (await stats.keys(`*${accountId}*`)).filter((name) => !name.endsWith(':account') && !name.includes(':key'));
  expect(written.length).toBeGreaterThan(0);
  for (const name of written) expect(name.startsWith(redisKeys.accountTag(accountId))).toBe(true);
  expect(Object.keys(calls).filter((name) => name !== 'evalsha' && !['set', 'hmget', 'hset', 'hincrby', 'pexpire'].includes(name))).toEqual(
    [],
  );
});

it('gives each count hash its lifetime once per batch: two PEXPIREs per account (hour and day), however many keys', async () => {
  const first = await newAccountWithKey('lifetimeA');
  const second = await newAccountWithKey('lifetimeB');
  const firstOthers = await Promise.all(Array.from({ length: 7 }, () => newKey(first.accountId)));
  const secondOthers = await Promise.all(Array.from({ length: 3 }, () => newKey(second.accountId)));
  const uses = [
    ...[first.keyId, ...firstOthers].map((id) => ({ accountId: first.accountId, keyId: id, atMs: nowMs, requests: 1 })),
    ...[second.keyId, ...secondOthers].map((id) => ({ accountId: second.accountId, keyId: id, atMs: nowMs, requests: 3 })),
  ];
  await store.recordLastUsed(uses.slice(0, 1)); // loads the script: not the steady state
  const oneAccount = await commandsDuring(() =>
    store.recordLastUsed(uses.slice(0, 8), { id: `lifetime-1-${first.accountId}`, hourStartMs: hourStartOf(nowMs) }),
  );
  expect(oneAccount.hincrby).toBe(2 * 8);
  expect(oneAccount.pexpire).toBe(2);
  const twoAccounts = await commandsDuring(() =>
    store.recordLastUsed(uses, { id: `lifetime-2-${first.accountId}`, hourStartMs: hourStartOf(nowMs) }),
  );
  expect(twoAccounts.hincrby).toBe(2 * uses.length);
  expect(twoAccounts.pexpire).toBe(4);
  for (const { accountId } of [first, second])
    for (const granularity of ['hour', 'day'] as const) {
      const ttlMs = await stats.pttl(
        redisKeys.requestCounts(accountId, granularity, granularity === 'hour' ? hourStartOf(nowMs) : dayStartOf(nowMs)),
      );
      expect(ttlMs).toBeGreaterThan(0);
    }
  expect(await store.readRequestCounts(second.accountId, 'hour', [hourStartOf(nowMs)])).toEqual([
    Object.fromEntries([second.keyId, ...secondOthers].map((id) => [id, 3])),
  ]);
});

it("deletes buckets whose time has passed, such as a rotated key's, so the account hash does not grow", async () => {
  const { accountId, keyId: oldKeyId } = await newAccountWithKey('sweep');
  expect((await store.authorize({ accountId, keyId: oldKeyId, defaultPlan: plan, defaultTokenBudgets: NO_TOKEN_BUDGETS })).kind).toBe(
    'allow',
  );
  const newKeyId = await newKey(accountId);
  expect((await store.authorize({ accountId, keyId: newKeyId, defaultPlan: plan, defaultTokenBudgets: NO_TOKEN_BUDGETS })).kind).toBe(
    'allow',
  );
  const bucketFields = async () =>
    Object.keys(await stats.hgetall(redisKeys.account(accountId)))
      .filter((field) => field.startsWith(redisKeys.keyBucketFieldPrefix()) || field === redisKeys.accountBucketField())
      .sort();
  expect(await bucketFields()).toEqual(
    [redisKeys.keyBucketField(oldKeyId), redisKeys.keyBucketField(newKeyId), redisKeys.accountBucketField()].sort(),
  );
  // Two hours on: every bucket is full again; only the new key is still used.
  nowMs += 2 * 3600 * 1000;
  expect((await store.authorize({ accountId, keyId: newKeyId, defaultPlan: plan, defaultTokenBudgets: NO_TOKEN_BUDGETS })).kind).toBe(
    'allow',
  );
  expect(await bucketFields()).toEqual([redisKeys.keyBucketField(newKeyId), redisKeys.accountBucketField()].sort());
  // The account record itself is untouched by the sweep.
  expect((await store.getAccount(accountId))?.name).toBe('sweep');
});

it('makes the account hash a hashtable on its first decision, which stays one, and the account reads the same', async () => {
  const { accountId, keyId } = await newAccountWithKey('hashtable');
  // Small, so Redis starts it as a listpack, where HMGET compares each field asked for with every field before it.
  expect(await stats.object('ENCODING', redisKeys.account(accountId))).toBe('listpack');
  expect((await store.authorize({ accountId, keyId, defaultPlan: plan, defaultTokenBudgets: NO_TOKEN_BUDGETS })).kind).toBe('allow');
  expect(await stats.object('ENCODING', redisKeys.account(accountId))).toBe('hashtable');
  expect(await stats.hget(redisKeys.account(accountId), redisKeys.hashtableMarkerField())).toBe(redisKeys.hashtableMarkerValue());
  expect(await store.getAccount(accountId)).toEqual({
    id: accountId,
    name: 'hashtable',
    status: 'active',
    createdAt: '2026-11-23T12:00:00.000Z',
  });
  // Two hours on the sweep runs again, and its marker write changes nothing.
  nowMs += 2 * 3600 * 1000;
  expect((await store.authorize({ accountId, keyId, defaultPlan: plan, defaultTokenBudgets: NO_TOKEN_BUDGETS })).kind).toBe('allow');
  expect(await stats.object('ENCODING', redisKeys.account(accountId))).toBe('hashtable');
});

/** The commands of an account's second decision that brings a hold (the first, which loads the script, is not counted). */
async function commandsOfASecondHoldingDecision(ids: { accountId: string; keyId: string }): Promise<Record<string, number>> {
  const decide = (requestId: string) =>
    liveStore.authorize({
      ...ids,
      defaultPlan: plan,
      defaultTokenBudgets: NO_TOKEN_BUDGETS,
      hold: { requestId, minorUnits: 25, tokens: 4_000 },
    });
  expect((await decide('first')).kind).toBe('allow');
  return commandsDuring(async () => {
    expect((await decide('second')).kind).toBe('allow');
  });
}

it('a prepaid decision that holds executes the 4 commands of one that does not: the sums ride in the bucket fields it reads and writes', async () => {
  const prepaid = await newAccountWithKey('holding');
  await stats.hset(redisKeys.account(prepaid.accountId), 'creditBalance', '1000000');
  expect(await commandsOfASecondHoldingDecision(prepaid)).toEqual({ evalsha: 1, hmget: 2, hset: 1 });
  const slots = parsePackedHoldSlots(await stats.hgetBuffer(redisKeys.account(prepaid.accountId), redisKeys.accountBucketField()));
  expect(slots?.money.reduce((a, b) => a + b, 0)).toBe(50);
  // A postpaid account holds nothing: the same commands, and no sums written.
  const postpaid = await newAccountWithKey('postpaid');
  expect(await commandsOfASecondHoldingDecision(postpaid)).toEqual({ evalsha: 1, hmget: 2, hset: 1 });
  expect(
    parsePackedHoldSlots(await stats.hgetBuffer(redisKeys.account(postpaid.accountId), redisKeys.accountBucketField())),
  ).toBeUndefined();
});
