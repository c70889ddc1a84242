import { CREDIT_LIMIT_MINOR_UNITS } from '../credit';
import type { Account, StoredKey } from '../../keys/key-records';
import type { TokenBudget, TokenBudgetPlan } from './token-budgets';
import type { LimitScope } from './rate-limits';
import { totalTokens } from '../../metering/usage';
import type { UsageBilling, UsageRecord } from '../../metering/usage-record';
import { consumeTokenBudget, effectiveTokenBudgets, tokenBucketName, tokenBudgetState, type TokenBucket } from './token-budget';

/**
 * What one usage record does to its account, as one pure function: debit a
 * prepaid balance (or count post-paid spend), add to the month's spend of the
 * account and of the key, and consume the token budgets that apply. The
 * in-memory store runs this; the Redis store runs the same rules in its Lua
 * script (gwaApplyUsage, src/store/redis/lua/apply-usage.lua), and both pass one
 * contract suite. Idempotency and the usage aggregates are the stores' part.
 */
export interface UsageAccountState {
  account: Account;
  /** Null when the key's record is gone: the account's or the plan's key budgets apply. */
  key: StoredKey | null;
  /** Stored token buckets by bucket name. */
  buckets: ReadonlyMap<string, TokenBucket>;
  /** The spend so far in the record's month. */
  accountMonthSpend: number;
  keyMonthSpend: number;
}

export interface UsageAccountWrites {
  billing: UsageBilling;
  /** The prepaid balance after the debit; absent for a post-paid account. */
  creditBalance?: number;
  /** The part of the cost the balance could not take (see UsageApplyOutcome). */
  creditShortfall: number;
  accountMonthSpend: number;
  keyMonthSpend: number;
  buckets: TokenBucketWrite[];
}

export interface TokenBucketWrite extends TokenBucket {
  bucket: string;
  /** How long the bucket matters: after this it is equivalent to an empty bucket. */
  ttlMs: number;
  scope: LimitScope;
  budget: TokenBudget;
  /** This record exhausted the budget: it had a whole token left before, and has none after (budget.reached). */
  reached: boolean;
}

/**
 * Spend sums stay exact: past 2^53 − 1 minor units in one month they stop
 * growing (at 10^-6 of a currency unit per minor unit that is 9 × 10^9 units).
 */
export const MAX_MONTH_SPEND = Number.MAX_SAFE_INTEGER;

/**
 * The account's running shortfall stops at the same bound: each record's own
 * shortfall stays exact in its usage stream entry, which is what billing reads.
 */
export const MAX_CREDIT_SHORTFALL = Number.MAX_SAFE_INTEGER;

export function applyUsageToAccountState(
  state: UsageAccountState,
  record: UsageRecord,
  nowUs: number,
  plan: TokenBudgetPlan,
): UsageAccountWrites {
  const cost = record.costMinorUnits;
  let billing: UsageBilling = 'postpaid';
  let creditBalance: number | undefined;
  let creditShortfall = 0;
  if (state.account.creditBalance !== undefined) {
    billing = 'prepaid';
    // The balance never leaves ±10^15 (src/accounts/credit.ts); what does not fit is kept as a shortfall.
    const debited = state.account.creditBalance - cost;
    creditBalance = Math.max(debited, -CREDIT_LIMIT_MINOR_UNITS);
    creditShortfall = creditBalance - debited;
  }
  const tokens = totalTokens(record.tokens);
  const buckets: TokenBucketWrite[] = [];
  if (tokens > 0) {
    const budgets = effectiveTokenBudgets(plan, state.account.tokenBudgets, state.key?.tokenBudgets);
    for (const scope of ['key', 'account'] as const) {
      for (const budget of budgets[scope]) {
        const bucket = tokenBucketName(scope, record.keyId, budget.windowSeconds);
        const stored = state.buckets.get(bucket);
        const moved = consumeTokenBudget(stored, nowUs, budget, tokens);
        const reached =
          tokenBudgetState(scope, stored, nowUs, budget).remaining > 0 && tokenBudgetState(scope, moved, nowUs, budget).remaining === 0;
        buckets.push({ bucket, ...moved, ttlMs: Math.ceil((moved.tatUs - nowUs) / 1000) + 1, scope, budget, reached });
      }
    }
  }
  return {
    billing,
    ...(creditBalance !== undefined ? { creditBalance } : {}),
    creditShortfall,
    accountMonthSpend: Math.min(state.accountMonthSpend + cost, MAX_MONTH_SPEND),
    keyMonthSpend: Math.min(state.keyMonthSpend + cost, MAX_MONTH_SPEND),
    buckets,
  };
}
