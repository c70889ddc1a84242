import type { LimitScope } from './rate-limits';

/**
 * Token budgets: how many tokens (input, output, cached input and cache
 * creation together) a key, or all of an account's keys together, may use
 * per window, e.g. 100,000 per minute and 5,000,000 per day. Scopes and
 * overrides work as for request limits (src/accounts/limits/rate-limits.ts): `key`
 * budgets apply to each key on its own, `account` budgets to all its keys
 * together. A budget refills continuously (GCRA, like request limits), and
 * usage is consumed when the answer's usage is applied, after the fact: an
 * answer bigger than what is left puts the bucket in debt, and the budget
 * stays exhausted until the debt has refilled.
 */
export interface TokenBudget {
  tokens: number;
  windowSeconds: number;
}

export interface TokenBudgetPlan {
  key: readonly TokenBudget[];
  account: readonly TokenBudget[];
}

/** Per-account overrides; an absent scope falls back to the default plan. */
export interface TokenBudgetOverride {
  key?: readonly TokenBudget[];
  account?: readonly TokenBudget[];
}

/** One budget as it stands now: for token rate-limit headers and views. */
export interface TokenBudgetState {
  scope: LimitScope;
  tokens: number;
  windowSeconds: number;
  /** Tokens that could still be used right now (0 when exhausted or in debt). */
  remaining: number;
  /** Milliseconds until the budget is full again. */
  resetMs: number;
  /** Milliseconds until at least one token is available again; 0 when one is. */
  retryAfterMs: number;
}

export const NO_TOKEN_BUDGETS: TokenBudgetPlan = Object.freeze({ key: Object.freeze([]), account: Object.freeze([]) });

/**
 * The largest budget: 10^9 tokens per window (as request limits), and at
 * most 10^6 tokens per second of window. Both keep the bucket arithmetic
 * exact in a Lua double (src/accounts/limits/token-budget.ts): a budget refills
 * less than one token per microsecond, and every intermediate product stays
 * below 2^53.
 */
export const MAX_BUDGET_TOKENS = 1_000_000_000;
export const MAX_BUDGET_TOKENS_PER_SECOND = 1_000_000;
