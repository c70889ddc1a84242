import type { TokenBudget, TokenBudgetPlan } from '../../src/accounts/limits/token-budgets';
import { NO_TOKEN_BUDGETS } from '../../src/accounts/limits/token-budgets';
import type { RatePlan } from '../../src/accounts/limits/rate-limits';
import type { UsageRecord } from '../../src/metering/usage-record';
import { generateCustomerKey } from '../../src/keys/customer-key';
import { consumeTokenBudget, tokenBudgetState, type TokenBucket } from '../../src/accounts/limits/token-budget';
import { redisKeys } from '../../src/store/redis/redis-keys';
import { parsePackedTokenBuckets } from '../../src/store/redis/redis-records';
import { insertKey } from '../support/pipeline-fixture-world';
import { storeOnTestRedis } from '../support/store-on-test-redis';

/**
 * The token buckets are packed like the request buckets: one account hash
 * field per key, `tp:k:<keyId>`, and one for the account, `tp:a`, each
 * holding all of its windows (redisKeys.keyTokenBucketField), and the usage
 * script's hourly sweep drops spent ones. Every expected bucket comes from
 * the BigInt arithmetic of src/accounts/limits/token-budget.ts.
 */

let nowMs = Date.parse('2026-11-28T12:00:00.000Z');
const nowUs = () => nowMs * 1000;

const NO_LIMITS: RatePlan = Object.freeze({ key: [], account: [] });
const MINUTE: TokenBudget = { tokens: 1_000, windowSeconds: 60 };
const HOUR: TokenBudget = { tokens: 5_000, windowSeconds: 3_600 };
const DAY: TokenBudget = { tokens: 100_000, windowSeconds: 86_400 };
const PLAN: TokenBudgetPlan = Object.freeze({ key: [MINUTE, DAY], account: [DAY] });

const world = storeOnTestRedis({ commandTimeoutMs: 1000, clockOverride: () => nowMs });

let accounts = 0;

async function accountWithKey(): Promise<{ accountId: string; keyId: string }> {
  accounts += 1;
  const accountId = `acct_tokenlayout${process.pid}_${accounts}`;
  expect(await world.store.createAccount({ id: accountId, name: 'tokens', status: 'active', createdAt: '2026-11-28T00:00:00.000Z' })).toBe(
    true,
  );
  const key = await insertKey(world.store, generateCustomerKey('live'), { accountId, id: `key_tokenlayout${accounts}` });
  return { accountId, keyId: key.id };
}

async function use(ids: { accountId: string; keyId: string }, tokens: number, budgets: TokenBudgetPlan): Promise<void> {
  const record: UsageRecord = {
    requestId: `req_${nowMs}_${Math.random()}`,
    accountId: ids.accountId,
    keyId: ids.keyId,
    keyPrefix: 'gk_live_AbC4',
    family: 'messages',
    style: 'messages',
    model: 'claude-sonnet-4-5',
    tokens: { inputTokens: tokens, outputTokens: 0, cachedInputTokens: 0, cacheCreationTokens: 0 },
    costMinorUnits: 1,
    estimated: false,
    atMs: nowMs,
  };
  expect((await world.store.applyUsage(record, budgets)).kind).toBe('applied');
}

/** The token bucket fields of the account hash, each as window → bucket in the order stored. */
async function tokenFields(accountId: string): Promise<Record<string, [number, TokenBucket][]>> {
  const hash = await world.client.hgetallBuffer(redisKeys.account(accountId));
  return Object.fromEntries(
    Object.entries(hash)
      .filter(([field]) => field.startsWith(redisKeys.tokenBucketFieldPrefix()))
      .map(([field, value]) => [field, [...(parsePackedTokenBuckets(value) ?? new Map<number, TokenBucket>()).entries()]]),
  );
}

const decide = (ids: { accountId: string; keyId: string }, budgets: TokenBudgetPlan) =>
  world.store.authorize({ ...ids, defaultPlan: NO_LIMITS, defaultTokenBudgets: budgets });

it('packs each key’s budgets into one field and the account’s into another, the budgets in force first in their order', async () => {
  const ids = await accountWithKey();
  await use(ids, 7, PLAN);
  const moved = (budget: TokenBudget) => consumeTokenBudget(undefined, nowUs(), budget, 7);
  expect(await tokenFields(ids.accountId)).toEqual({
    [redisKeys.keyTokenBucketField(ids.keyId)]: [
      [60, moved(MINUTE)],
      [86_400, moved(DAY)],
    ],
    [redisKeys.accountTokenBucketField()]: [[86_400, moved(DAY)]],
  });
  // The minute budget has the fewest tokens left: 993, as the BigInt arithmetic states it.
  expect(await decide(ids, PLAN)).toMatchObject({ kind: 'allow', tightestBudget: tokenBudgetState('key', moved(MINUTE), nowUs(), MINUTE) });
  expect(await world.store.readTokenBudgets(ids.keyId, PLAN)).toEqual([
    tokenBudgetState('key', moved(MINUTE), nowUs(), MINUTE),
    tokenBudgetState('key', moved(DAY), nowUs(), DAY),
    tokenBudgetState('account', moved(DAY), nowUs(), DAY),
  ]);
});

it('keeps a window no longer in force while its time is ahead, and the Check finds a budget wherever it is in the field', async () => {
  const ids = await accountWithKey();
  await use(ids, 900, { key: [MINUTE, DAY], account: [] });
  const minute = consumeTokenBudget(undefined, nowUs(), MINUTE, 900);
  // The plan changes: the minute budget is gone, an hour one comes.
  await use(ids, 400, { key: [DAY, HOUR], account: [] });
  const day = consumeTokenBudget(consumeTokenBudget(undefined, nowUs(), DAY, 900), nowUs(), DAY, 400);
  expect(await tokenFields(ids.accountId)).toEqual({
    [redisKeys.keyTokenBucketField(ids.keyId)]: [
      [86_400, day],
      [3_600, consumeTokenBudget(undefined, nowUs(), HOUR, 400)],
      [60, minute],
    ],
  });
  // Back to the minute budget alone: its 900 tokens still count, read from the field's third entry.
  const minuteOnly: TokenBudgetPlan = { key: [MINUTE], account: [] };
  expect(await decide(ids, minuteOnly)).toMatchObject({
    kind: 'allow',
    tightestBudget: { scope: 'key', tokens: 1_000, remaining: 100 },
  });
  // A minute on, it has refilled and is dropped from the field when the next record is applied; the hour's 400 tokens
  // (288 s) are still ahead.
  nowMs += 61_000;
  await use(ids, 1, { key: [DAY], account: [] });
  const fields = await tokenFields(ids.accountId);
  expect(fields[redisKeys.keyTokenBucketField(ids.keyId)]!.map(([window]) => window)).toEqual([86_400, 3_600]);
});

it('deletes a packed field whose buckets have all refilled when the sweep runs', async () => {
  const ids = await accountWithKey();
  await use(ids, 100, { key: [MINUTE], account: [] });
  expect(Object.keys(await tokenFields(ids.accountId))).toEqual([redisKeys.keyTokenBucketField(ids.keyId)]);
  nowMs += 3_600_000 + 1_000;
  await use(ids, 100, NO_TOKEN_BUDGETS);
  expect(await tokenFields(ids.accountId)).toEqual({});
});
