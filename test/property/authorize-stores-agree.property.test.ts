import fc from 'fast-check';
import { ManualClock } from '../../src/platform/clock';
import type { RateLimit, RatePlan } from '../../src/accounts/limits/rate-limits';
import type { TokenBudget, TokenBudgetPlan } from '../../src/accounts/limits/token-budgets';
import type { UsageRecord } from '../../src/metering/usage-record';
import type { PlacedHold } from '../../src/accounts/credit-holds';
import { MemoryStore } from '../../src/store/memory-store';
import { RedisStore } from '../../src/store/redis/redis-store';
import type { Account, StoredKey } from '../../src/keys/key-records';
import { startTestRedis, type TestRedis } from '../support/redis-server';

/**
 * The Redis authorize script takes the default plan packed in its
 * arguments, with a straight-line path for plan limits and a table-driven
 * one for overrides (src/store/redis/lua/authorize.lua), and it also reads
 * the token budgets (the plan's, or overrides) and the month's spend against the spend
 * caps. Whatever the plans, the overrides, the caps, the usage applied in
 * between (budgets in debt, spend reaching a cap) and the timing (across a
 * month's end too), it must answer exactly as the in-memory store
 * (authorizeAccountState): same outcome, same limit or budget named, same
 * remaining, reset and retry times.
 */
let redis: TestRedis;
let store: RedisStore;
let now = Date.parse('2026-11-23T12:00:00.000Z');

beforeAll(async () => {
  redis = await startTestRedis();
  store = await RedisStore.connect({ url: redis.url, commandTimeoutMs: 2000, clockOverride: () => now });
});
afterAll(async () => {
  await store.close();
  await redis.stop();
});

const WINDOWS = [1, 2, 10, 60, 3600, 86_400];
const limits = fc
  .uniqueArray(fc.record({ limit: fc.integer({ min: 1, max: 6 }), windowSeconds: fc.constantFrom(...WINDOWS) }), {
    maxLength: 3,
    selector: (limit) => limit.windowSeconds,
  })
  .map((list): RateLimit[] => list);
const budgets = fc
  .uniqueArray(
    fc.record({
      tokens: fc.oneof(fc.integer({ min: 1, max: 50 }), fc.integer({ min: 1, max: 5_000 }), fc.constant(1_000_000_000)),
      windowSeconds: fc.constantFrom(...WINDOWS),
    }),
    // Up to three: the script checks up to two per scope in straight-line blocks, more through a function.
    { maxLength: 3, selector: (budget) => budget.windowSeconds },
  )
  .map((list): TokenBudget[] => list);
const cap = fc.option(fc.integer({ min: 0, max: 300 }), { nil: undefined });
/** Starts near the ends of a month and of a year too, so that spend caps see the month roll over. */
const STARTS = ['2026-11-23T12:00:00.000Z', '2026-11-30T23:59:55.000Z', '2026-12-31T23:59:58.500Z'].map(Date.parse);
const scenario = fc.record({
  start: fc.constantFrom(...STARTS),
  plan: fc.record({ key: limits, account: limits }),
  budgetPlan: fc.record({ key: budgets, account: budgets }),
  keyOwnBudgets: fc.option(budgets, { nil: undefined }),
  accountBudgets: fc.option(fc.record({ key: fc.option(budgets, { nil: undefined }), account: fc.option(budgets, { nil: undefined }) }), {
    nil: undefined,
  }),
  accountCap: cap,
  keyCap: cap,
  keyOwn: fc.option(limits, { nil: undefined }),
  accountOverride: fc.option(fc.record({ key: fc.option(limits, { nil: undefined }), account: fc.option(limits, { nil: undefined }) }), {
    nil: undefined,
  }),
  /** Per step: which of the two keys, how many ms pass before it, and whether it is a Check or usage arriving (tokens, cost). */
  /** A prepaid balance (holds then hold money), or postpaid. */
  balance: fc.option(fc.integer({ min: 0, max: 400 }), { nil: undefined }),
  requests: fc.array(
    fc.record({
      key: fc.integer({ min: 0, max: 1 }),
      // Now and then past a credit hold's slot (720 s), so held sums move along and lapse.
      afterMs: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 3000 }), fc.constant(700_000)),
      /** The credit hold a Check brings (a metered route), if any. */
      hold: fc.option(fc.record({ minorUnits: fc.integer({ min: 0, max: 150 }), tokens: fc.integer({ min: 0, max: 3000 }) }), {
        nil: undefined,
      }),
      usage: fc.option(fc.record({ tokens: fc.integer({ min: 0, max: 3000 }), cost: fc.integer({ min: 0, max: 120 }) }), {
        nil: undefined,
        freq: 3,
      }),
    }),
    {
      minLength: 1,
      maxLength: 14,
    },
  ),
});

let run = 0;
/** What the runs reached, so the property is known to cover each rule. */
const seen = new Set<string>();

it('decides every request exactly as the in-memory store, for any plan, overrides and timing', async () => {
  await fc.assert(
    fc.asyncProperty(scenario, async (drawn) => {
      const { plan, keyOwn, accountOverride, requests, budgetPlan, keyOwnBudgets, accountBudgets, accountCap, keyCap, balance } = drawn;
      run += 1;
      now = drawn.start;
      const clock = new ManualClock(now);
      const memory = new MemoryStore(clock);
      const accountId = `acct_prop${process.pid}_${run}`;
      const account: Account = {
        id: accountId,
        name: 'property',
        status: 'active',
        createdAt: '2026-11-23T12:00:00.000Z',
        ...(accountOverride
          ? {
              limits: {
                ...(accountOverride.key ? { key: accountOverride.key } : {}),
                ...(accountOverride.account ? { account: accountOverride.account } : {}),
              },
            }
          : {}),
        ...(accountBudgets
          ? {
              tokenBudgets: {
                ...(accountBudgets.key ? { key: accountBudgets.key } : {}),
                ...(accountBudgets.account ? { account: accountBudgets.account } : {}),
              },
            }
          : {}),
        ...(accountCap !== undefined ? { monthlySpendCap: accountCap } : {}),
        ...(balance !== undefined ? { creditBalance: balance } : {}),
      };
      const keys: StoredKey[] = [0, 1].map((i) => ({
        id: `key_prop${process.pid}_${run}_${i}`,
        accountId,
        prefix: `gk_live_pr${i}x`,
        name: 'property',
        environment: 'live',
        status: 'active',
        createdAt: '2026-11-23T12:00:00.000Z',
        // The first key has its own limits when the scenario says so.
        ...(i === 0 && keyOwn ? { limits: keyOwn } : {}),
        ...(i === 0 && keyOwnBudgets ? { tokenBudgets: keyOwnBudgets } : {}),
        ...(i === 1 && keyCap !== undefined ? { monthlySpendCap: keyCap } : {}),
      }));
      for (const target of [memory, store]) {
        expect(await target.createAccount(account)).toBe(true);
        for (const key of keys) expect(await target.insertKey(`hash_${key.id}`, key)).toBe('created');
      }
      // Frozen, as the settings' plan is: the packed plan is cached for it.
      const defaultPlan: RatePlan = Object.freeze({ key: Object.freeze(plan.key), account: Object.freeze(plan.account) });
      const defaultTokenBudgets: TokenBudgetPlan = Object.freeze({
        key: Object.freeze(budgetPlan.key),
        account: Object.freeze(budgetPlan.account),
      });
      // Each key's allowed holds not yet metered: a usage record releases the oldest, as its answer would.
      const inFlight: [{ requestId: string; held: PlacedHold }[], { requestId: string; held: PlacedHold }[]] = [[], []];
      for (const [i, request] of requests.entries()) {
        now += request.afterMs;
        clock.set(now);
        const keyId = keys[request.key]!.id;
        if (request.usage) {
          const answered = inFlight[request.key]!.shift();
          const record: UsageRecord = {
            requestId: answered?.requestId ?? `req_${run}_${i}`,
            ...(answered ? { hold: answered.held } : {}),
            accountId,
            keyId,
            keyPrefix: keys[request.key]!.prefix,
            family: 'chat-completions',
            style: 'chat',
            model: 'gpt-4o-mini',
            tokens: { inputTokens: request.usage.tokens, outputTokens: 0, cachedInputTokens: 0, cacheCreationTokens: 0 },
            costMinorUnits: request.usage.cost,
            estimated: false,
            atMs: now,
          };
          expect(await store.applyUsage(record, defaultTokenBudgets)).toEqual(await memory.applyUsage(record, defaultTokenBudgets));
        } else {
          const requestId = `req_${run}_${i}`;
          const ids = {
            accountId,
            keyId,
            defaultPlan,
            defaultTokenBudgets,
            ...(request.hold ? { hold: { requestId, ...request.hold } } : {}),
          };
          const outcome = await memory.authorize(ids);
          expect(await store.authorize(ids)).toEqual(outcome);
          seen.add(outcome.kind === 'allow' && outcome.tightestBudget ? 'allow with a token budget' : outcome.kind);
          if (outcome.kind === 'allow' && outcome.held) {
            seen.add('allow holding');
            inFlight[request.key]!.push({ requestId, held: outcome.held });
          }
        }
      }
    }),
    { numRuns: 300, seed: 1414 },
  );
  expect([...seen].sort()).toEqual(
    [
      'allow',
      'allow holding',
      'allow with a token budget',
      'budget_exceeded',
      'credit_exhausted',
      'rate_limited',
      'token_budget_exhausted',
    ].sort(),
  );
});
