import type { LimitScope } from '../domain/rate-limits';
import type { TokenBudget, TokenBudgetOverride, TokenBudgetPlan, TokenBudgetState } from '../domain/token-budgets';

/**
 * Token budgets as GCRA buckets, in whole microseconds like request limits
 * (gcra.ts), so a bucket is one number: its theoretical arrival time (TAT).
 * A budget of T tokens per window W refills one token every W/T µs; using n
 * tokens moves the TAT n × W/T µs later. W/T is seldom a whole number, so the
 * move is computed exactly (BigInt here; the Lua mirror in
 * src/store/redis/scripts.ts splits the product so that no intermediate
 * passes 2^53) and rounded up once: the budget never forgets a token.
 *
 * With a full budget and the clock standing still, using n tokens leaves
 * exactly T − n remaining (tokenBudgetState), because a budget refills less
 * than one token per µs (MAX_BUDGET_TOKENS_PER_SECOND).
 */

const US_PER_SECOND = 1_000_000n;

/** How far (µs) using `tokens` tokens moves the bucket: ⌈tokens × W / T⌉. */
export function tokenDebtUs(tokens: number, budget: TokenBudget): number {
  const windowUs = BigInt(budget.windowSeconds) * US_PER_SECOND;
  const size = BigInt(budget.tokens);
  return Number((BigInt(tokens) * windowUs + size - 1n) / size);
}

/** The bucket after using `tokens` tokens now: debt adds up, and time already refilled is not lent ahead. */
export function consumeTokenBudget(storedTatUs: number | undefined, nowUs: number, budget: TokenBudget, tokens: number): number {
  return Math.max(storedTatUs ?? nowUs, nowUs) + tokenDebtUs(tokens, budget);
}

/**
 * A budget as it stands at `nowUs`: the tokens still available are T minus
 * the whole tokens not yet refilled, so that using n tokens of a full budget
 * leaves exactly T − n (the move was rounded up; rounding the refill down
 * takes back no more than that). Exhausted while the debt is a whole window
 * or more; one token is back once the debt is under a window.
 */
export function tokenBudgetState(scope: LimitScope, storedTatUs: number | undefined, nowUs: number, budget: TokenBudget): TokenBudgetState {
  const windowUs = budget.windowSeconds * 1_000_000;
  const debtUs = Math.max(0, (storedTatUs ?? nowUs) - nowUs);
  const unrefilled = Number((BigInt(debtUs) * BigInt(budget.tokens)) / BigInt(windowUs));
  const remaining = Math.max(0, budget.tokens - unrefilled);
  return {
    scope,
    tokens: budget.tokens,
    windowSeconds: budget.windowSeconds,
    remaining,
    resetMs: Math.ceil(debtUs / 1000),
    retryAfterMs: remaining > 0 ? 0 : Math.ceil((debtUs - windowUs + 1) / 1000),
  };
}

/** Bucket names within one account's state (the Redis field layout is in src/store/redis/redis-keys.ts). */
export function tokenBucketName(scope: LimitScope, keyId: string, windowSeconds: number): string {
  return scope === 'key' ? `tb:k:${keyId}:${windowSeconds}` : `tb:a:${windowSeconds}`;
}

/** The budgets that apply: key override, else the account's key override, else the plan; likewise for the account scope. */
export function effectiveTokenBudgets(
  plan: TokenBudgetPlan,
  accountOverride: TokenBudgetOverride | undefined,
  keyOverride: readonly TokenBudget[] | undefined,
): TokenBudgetPlan {
  return {
    key: keyOverride ?? accountOverride?.key ?? plan.key,
    account: accountOverride?.account ?? plan.account,
  };
}
