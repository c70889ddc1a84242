import type { LimitScope } from './rate-limits';
import type { TokenBudget, TokenBudgetOverride, TokenBudgetPlan, TokenBudgetState } from './token-budgets';

/**
 * Token budgets as GCRA buckets, like request limits (gcra.ts): a bucket is
 * its theoretical arrival time (TAT). A budget of T tokens per window W
 * refills one token every W/T µs, and using n tokens moves the TAT n × W/T
 * µs later. W/T is seldom a whole number of µs (10^9 tokens a day: 86.4 µs),
 * so the TAT keeps the fraction of a µs too, as a numerator over T: any
 * number of records moves a bucket by exactly the sum of their tokens, and
 * with the clock standing still a full budget has exactly T − Σn left.
 * Computed exactly here (BigInt); the Lua mirror (src/store/redis/lua/lib/token-consume.lua)
 * splits each product so no intermediate passes
 * 2^53, which the budget bounds (MAX_BUDGET_TOKENS, _PER_SECOND) guarantee.
 */
export interface TokenBucket {
  /** Whole µs of the TAT. */
  tatUs: number;
  /** The TAT's fraction of a µs, as a numerator over the budget's tokens: 0 ≤ fraction < T. */
  fraction: number;
}

const US_PER_SECOND = 1_000_000n;

/**
 * The bucket after using `tokens` tokens now: debt adds up, and time already
 * refilled is not lent ahead. A fraction that does not fit the budget (its
 * size was changed since) is dropped: less than a µs.
 */
export function consumeTokenBudget(stored: TokenBucket | undefined, nowUs: number, budget: TokenBudget, tokens: number): TokenBucket {
  const size = BigInt(budget.tokens);
  const from = stored && stored.tatUs >= nowUs ? stored : { tatUs: nowUs, fraction: 0 };
  const fraction = BigInt(from.fraction < budget.tokens ? from.fraction : 0);
  const scaled = BigInt(from.tatUs) * size + fraction + BigInt(tokens) * BigInt(budget.windowSeconds) * US_PER_SECOND;
  return { tatUs: Number(scaled / size), fraction: Number(scaled % size) };
}

/**
 * A budget as it stands at `nowUs`: the whole tokens available, T minus the
 * tokens not yet wholly refilled (one that has only begun to refill is not
 * back yet, as a request limit needs a whole interval back). Exhausted while
 * not one whole token is available, so a key that has used its whole budget
 * is refused until a whole token has refilled; `retryAfterMs` is that wait.
 * With the clock standing still, Σn tokens used leave exactly T − Σn.
 */
export function tokenBudgetState(scope: LimitScope, stored: TokenBucket | undefined, nowUs: number, budget: TokenBudget): TokenBudgetState {
  const size = BigInt(budget.tokens);
  const windowUs = BigInt(budget.windowSeconds) * US_PER_SECOND;
  const fraction = stored && stored.fraction < budget.tokens ? BigInt(stored.fraction) : 0n;
  // The debt in 1/T µs: how far the TAT is ahead of now.
  const debt = stored && stored.tatUs >= nowUs ? BigInt(stored.tatUs - nowUs) * size + fraction : 0n;
  const unrefilled = (debt + windowUs - 1n) / windowUs;
  const remaining = unrefilled >= size ? 0 : Number(size - unrefilled);
  const msOf = (scaled: bigint) => Number((scaled + size * 1000n - 1n) / (size * 1000n));
  return {
    scope,
    tokens: budget.tokens,
    windowSeconds: budget.windowSeconds,
    remaining,
    resetMs: msOf(debt),
    // One whole token is back once the debt is at most T − 1 tokens' worth: (debt − (T − 1)·W)/T µs.
    retryAfterMs: remaining > 0 ? 0 : msOf(debt - size * windowUs + windowUs),
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
