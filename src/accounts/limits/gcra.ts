import type { RateLimit } from './rate-limits';

/**
 * Generic cell rate algorithm, in whole microseconds so the in-memory store
 * and the Redis Lua script (which mirrors this) compute identical answers.
 *
 * The stored value is the "theoretical arrival time" (TAT). A limit of N per
 * window allows a burst of N, then one request every window/N: there is no
 * fixed window edge, so the double burst of fixed windows cannot happen.
 */
export interface GcraStep {
  allowed: boolean;
  /** TAT to store if the request is committed (unchanged when refused). */
  newTatUs: number;
  remaining: number;
  /** Until the limit is back to its full allowance. */
  resetUs: number;
  /** Until one more request would be allowed; 0 when allowed. */
  retryAfterUs: number;
}

export function emissionIntervalUs(limit: RateLimit): number {
  return Math.max(1, Math.floor((limit.windowSeconds * 1_000_000) / limit.limit));
}

export function gcraStep(storedTatUs: number | undefined, nowUs: number, limit: RateLimit): GcraStep {
  const windowUs = limit.windowSeconds * 1_000_000;
  const interval = emissionIntervalUs(limit);
  const tat = Math.max(storedTatUs ?? nowUs, nowUs);
  const newTat = tat + interval;
  const allowAt = newTat - windowUs;
  if (nowUs < allowAt) {
    return { allowed: false, newTatUs: tat, remaining: 0, resetUs: tat - nowUs, retryAfterUs: allowAt - nowUs };
  }
  return {
    allowed: true,
    newTatUs: newTat,
    remaining: Math.floor((windowUs - (newTat - nowUs)) / interval),
    resetUs: newTat - nowUs,
    retryAfterUs: 0,
  };
}
