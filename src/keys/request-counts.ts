import type { UsageGranularity } from '../metering/usage-periods';

export type { UsageGranularity };
/**
 * Requests per key, counted in hourly and daily buckets (UTC). The Check path
 * only adds one to a number in process (LastUsedRecorder); the counts reach
 * the store with the last-used times, in batches that each carry an id, so a
 * batch sent again after a failure is counted once.
 */

export const HOUR_MS = 3_600_000;
export const DAY_MS = 24 * HOUR_MS;

/** Hourly buckets are kept two days (the 24-hour view, plus room for a late batch). */
export const HOURLY_RETENTION_MS = 2 * DAY_MS;
/** Daily buckets are kept 32 days (the 30-day view, plus room for a late batch). */
export const DAILY_RETENTION_MS = 32 * DAY_MS;
/**
 * How long the store remembers that a batch was counted. A batch whose write
 * failed is sent again with the next flush; one older than this is no longer
 * sent (its counts could otherwise apply twice), see LastUsedRecorder.
 */
export const COUNTED_BATCH_MEMORY_MS = HOUR_MS;

export function hourStartOf(ms: number): number {
  return ms - (((ms % HOUR_MS) + HOUR_MS) % HOUR_MS);
}

export function dayStartOf(ms: number): number {
  return ms - (((ms % DAY_MS) + DAY_MS) % DAY_MS);
}

export function bucketStartOf(granularity: UsageGranularity, ms: number): number {
  return granularity === 'hour' ? hourStartOf(ms) : dayStartOf(ms);
}

export function bucketLengthMs(granularity: UsageGranularity): number {
  return granularity === 'hour' ? HOUR_MS : DAY_MS;
}

/** The windows the customer dashboard shows: the last 24 hours by hour, the last 30 days by day, each ending with the current bucket. */
export const USAGE_WINDOWS = {
  '24h': { granularity: 'hour', buckets: 24 },
  '30d': { granularity: 'day', buckets: 30 },
} as const satisfies Record<string, { granularity: UsageGranularity; buckets: number }>;
export type UsageWindow = keyof typeof USAGE_WINDOWS;

/** The starts of a window's buckets, oldest first, the last one holding `nowMs`. */
export function windowBucketStarts(window: UsageWindow, nowMs: number): number[] {
  const { granularity, buckets } = USAGE_WINDOWS[window];
  const last = bucketStartOf(granularity, nowMs);
  const length = bucketLengthMs(granularity);
  return Array.from({ length: buckets }, (_, i) => last - (buckets - 1 - i) * length);
}
