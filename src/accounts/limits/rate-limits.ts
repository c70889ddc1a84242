/**
 * Request rate limits. A plan is a list of {limit, window} per scope: `key`
 * limits apply to each key on its own, `account` limits to all of an
 * account's keys together (so more keys never multiply the allowance).
 */
export type LimitScope = 'key' | 'account';

export interface RateLimit {
  /** Requests allowed per window (also the largest burst). */
  limit: number;
  windowSeconds: number;
}

export interface RatePlan {
  key: readonly RateLimit[];
  account: readonly RateLimit[];
}

/** Per-account overrides; an absent scope falls back to the default plan. */
export interface RatePlanOverride {
  key?: readonly RateLimit[];
  account?: readonly RateLimit[];
}

/** The state of one limit after a decision, for rate-limit headers. */
export interface LimitState {
  scope: LimitScope;
  limit: number;
  windowSeconds: number;
  /** Requests that could still be made right now. */
  remaining: number;
  /** Milliseconds until the limit is back to its full allowance. */
  resetMs: number;
}

/** The limit that refused a request. */
export interface LimitHit extends LimitState {
  /** Milliseconds until one more request would be allowed. */
  retryAfterMs: number;
}

/** A limit's state as the one that refused a request. Fields listed, not spread: see eslint.config.mjs on hidden classes. */
export function limitHit({ scope, limit, windowSeconds, remaining, resetMs }: LimitState, retryAfterMs: number): LimitHit {
  return { scope, limit, windowSeconds, remaining, resetMs, retryAfterMs };
}
