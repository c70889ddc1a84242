import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import type { LimitScope, RatePlan } from '../../src/accounts/limits/rate-limits';
import {
  MAX_BUDGET_TOKENS,
  MAX_BUDGET_TOKENS_PER_SECOND,
  type TokenBudget,
  type TokenBudgetPlan,
} from '../../src/accounts/limits/token-budgets';
import { generateCustomerKey } from '../../src/keys/customer-key';
import { MAX_WINDOW_SECONDS } from '../../src/accounts/limits/rate-limit';
import { tokenBudgetState, type TokenBucket } from '../../src/accounts/limits/token-budget';
import { redisKeys } from '../../src/store/redis/redis-keys';
import { packTokenBuckets } from '../../src/store/redis/redis-records';
import { RedisStore } from '../../src/store/redis/redis-store';
import { insertKey } from '../support/pipeline-fixture-world';
import { storeOnTestRedis } from '../support/store-on-test-redis';

/**
 * The authorize script counts a token budget's tokens not yet refilled with
 * one division where the debt times the tokens cannot pass 2^53, and with
 * the split product where it can
 * (src/store/redis/lua/authorize/token-unrefilled.lua). Usage through the property
 * test leaves small debts only, so here a bucket of any debt (below,
 * at and past the branch's bound, past the window) and fraction is written
 * straight into the account hash, and the decision must state the budget
 * exactly as the BigInt tokenBudgetState() does: remaining, reset and
 * retry, allowed or refused. Both places the check is generated are
 * decided: an account's first decision (the sweep's path) and the next
 * (the straight-line path).
 */
const NOW_MS = Date.parse('2026-11-28T12:00:00.000Z');
const NOW_US = NOW_MS * 1000;
const RATE_PLANS: RatePlan[] = [
  { key: [], account: [] },
  { key: [{ limit: 1_000_000, windowSeconds: 60 }], account: [{ limit: 1_000_000, windowSeconds: 3600 }] },
];

const world = storeOnTestRedis({ commandTimeoutMs: 2000, clockOverride: () => NOW_MS });

interface Case {
  scope: LimitScope;
  budget: TokenBudget;
  /** µs the bucket's TAT is ahead of now; undefined: no bucket. */
  debtUs: number | undefined;
  fraction: number;
}

function gcd(a: number, b: number): number {
  return b === 0 ? a : gcd(b, a % b);
}

/** The debt below which luaUnrefilled takes one division for this budget. */
const exactBelow = (budget: TokenBudget) => Math.floor((2 ** 53 - budget.tokens - budget.windowSeconds * 1_000_000) / budget.tokens);

/** A share from 0 to `most`, uniform in millionths (fc.double favours tiny values, which would leave the big debts out). */
const perMillion = (most: number) => fc.integer({ min: 0, max: Math.round(most * 1e6) }).map((n) => n / 1e6);

const budgetArbitrary = fc
  .record({ windowSeconds: fc.integer({ min: 1, max: MAX_WINDOW_SECONDS }), share: fc.oneof(perMillion(1), fc.constant(1)) })
  .map(({ windowSeconds, share }): TokenBudget => {
    const most = Math.min(MAX_BUDGET_TOKENS, windowSeconds * MAX_BUDGET_TOKENS_PER_SECOND);
    return { windowSeconds, tokens: Math.max(1, Math.round(most * share)) };
  });

function sampledCases(): Case[] {
  return fc
    .sample(fc.tuple(budgetArbitrary, perMillion(1.1), perMillion(0.999999), fc.constantFrom<LimitScope>('key', 'account')), {
      numRuns: 160,
      seed: 2811,
    })
    .map(([budget, debtShare, fractionShare, scope]) => ({
      scope,
      budget,
      debtUs: Math.floor(budget.windowSeconds * 1_000_000 * debtShare),
      fraction: Math.floor(budget.tokens * fractionShare),
    }));
}

function edgeCases(): Case[] {
  const day: TokenBudget = { tokens: MAX_BUDGET_TOKENS, windowSeconds: 86_400 };
  const widest: TokenBudget = { tokens: MAX_BUDGET_TOKENS, windowSeconds: MAX_WINDOW_SECONDS };
  const oneAMinute: TokenBudget = { tokens: 1, windowSeconds: 60 };
  const fastest: TokenBudget = { tokens: MAX_BUDGET_TOKENS_PER_SECOND, windowSeconds: 1 };
  const cases: Case[] = [];
  for (const budget of [day, widest]) {
    const bound = exactBelow(budget);
    const windowUs = budget.windowSeconds * 1_000_000;
    // Past the bound, debts where d × tokens is a whole number of windows: a product rounded in doubles would lose the
    // fraction's 1 / tokens µs and count one token fewer.
    const aligned = windowUs / gcd(budget.tokens, windowUs);
    const past = aligned * Math.ceil((bound * 3) / aligned);
    // Around the window's end, and past it by a few ms: the retry time's last µs decides its ms there.
    const q = Math.floor(windowUs / budget.tokens);
    const nearEnd = [-q - 1, -q, -q + 1, -1, 0, 1, 998 - q, 999 - q, 1000 - q].map((offset) => windowUs + offset);
    for (const debtUs of [0, 1, bound - 1, bound, bound + 1, past - 1, past, past + 1, ...nearEnd]) {
      for (const fraction of [0, 1, budget.tokens - 1]) cases.push({ scope: 'key', budget, debtUs, fraction });
    }
  }
  for (const budget of [oneAMinute, fastest]) {
    const windowUs = budget.windowSeconds * 1_000_000;
    for (const debtUs of [0, 1, windowUs / budget.tokens - 1, windowUs / budget.tokens, windowUs - 1, windowUs]) {
      for (const fraction of [0, budget.tokens - 1]) cases.push({ scope: 'account', budget, debtUs, fraction });
    }
  }
  // No bucket (a full budget), and a bucket whose TAT has passed.
  cases.push({ scope: 'key', budget: day, debtUs: undefined, fraction: 0 });
  cases.push({ scope: 'account', budget: day, debtUs: -1, fraction: 5 });
  return cases;
}

let run = 0;

async function decide(c: Case, ratePlan: RatePlan): Promise<{ first: unknown; second: unknown; expected: unknown }> {
  run += 1;
  const accountId = `acct_tbexact${process.pid}_${run}`;
  expect(await world.store.createAccount({ id: accountId, name: 'exact', status: 'active', createdAt: '2026-11-28T00:00:00.000Z' })).toBe(
    true,
  );
  const key = await insertKey(world.store, generateCustomerKey('live'), { accountId, id: `key_tbexact${run}` });
  const stored: TokenBucket | undefined = c.debtUs === undefined ? undefined : { tatUs: NOW_US + c.debtUs, fraction: c.fraction };
  if (stored) {
    const field = c.scope === 'key' ? redisKeys.keyTokenBucketField(key.id) : redisKeys.accountTokenBucketField();
    await world.client.hset(redisKeys.account(accountId), field, packTokenBuckets([{ windowSeconds: c.budget.windowSeconds, ...stored }]));
  }
  const defaultTokenBudgets: TokenBudgetPlan = Object.freeze({
    key: Object.freeze(c.scope === 'key' ? [c.budget] : []),
    account: Object.freeze(c.scope === 'account' ? [c.budget] : []),
  });
  const ids = { accountId, keyId: key.id, defaultPlan: ratePlan, defaultTokenBudgets };
  // An allow is compared on its budget alone (with request limits it names the tightest limit too).
  const budgetOf = (outcome: Awaited<ReturnType<RedisStore['authorize']>>) =>
    outcome.kind === 'allow' ? { kind: outcome.kind, budget: outcome.tightestBudget } : outcome;
  const state = tokenBudgetState(c.scope, stored, NOW_US, c.budget);
  const expected =
    state.remaining > 0 ? { kind: 'allow', budget: state } : { kind: 'token_budget_exhausted', prefix: key.prefix, budget: state };
  const first = budgetOf(await world.store.authorize(ids));
  const second = budgetOf(await world.store.authorize(ids));
  return { first, second, expected };
}

it.each(RATE_PLANS.map((plan) => [plan.key.length === 0 ? 'no request limits' : 'request limits too', plan] as const))(
  'states every plan budget exactly as the BigInt arithmetic, at any debt and fraction (%s)',
  async (_name, ratePlan) => {
    const cases = [...edgeCases(), ...sampledCases()];
    // The branch's bound is reached on both sides, and some debts pass it: the split product is decided too.
    expect(
      cases.filter((c) => c.debtUs !== undefined && c.debtUs >= exactBelow(c.budget) && c.debtUs < c.budget.windowSeconds * 1e6).length,
    ).toBeGreaterThan(40);
    const mismatches: unknown[] = [];
    const kinds = new Set<string>();
    for (const c of cases) {
      const { first, second, expected } = await decide(c, ratePlan);
      kinds.add((expected as { kind: string }).kind);
      if (!isDeepStrictEqual(first, expected) || !isDeepStrictEqual(second, expected)) {
        mismatches.push({ case: c, first, second, expected });
      }
    }
    expect(mismatches).toEqual([]);
    expect([...kinds].sort()).toEqual(['allow', 'token_budget_exhausted']);
  },
);
