/**
 * The periods usage is counted in, all in UTC: hour and day buckets for the
 * usage API, months for spend caps. Periods are named by their start in
 * ISO-8601 (`2026-11-22T10`, `2026-11-22`, `2026-11`), so Redis keys and
 * fields read naturally and sort in time order.
 */
export type UsageGranularity = 'hour' | 'day';

export const HOUR_MS = 3_600_000;
export const DAY_MS = 86_400_000;

const PERIOD_MS: Record<UsageGranularity, number> = { hour: HOUR_MS, day: DAY_MS };

/**
 * How long a bucket is kept after its period ends. Hours: 48 h, enough for
 * "the last 24 hours" in any time zone; days: 400 days, a year with a
 * month's margin for year-over-year views. Older history belongs to the
 * billing system (the usage stream). See docs/concepts/metering.md for the
 * memory this costs.
 */
export const USAGE_RETENTION_MS: Record<UsageGranularity, number> = { hour: 48 * HOUR_MS, day: 400 * DAY_MS };

export function periodMs(granularity: UsageGranularity): number {
  return PERIOD_MS[granularity];
}

/** The start (epoch ms) of the period that holds `ms`. */
export function periodStart(ms: number, granularity: UsageGranularity): number {
  const size = PERIOD_MS[granularity];
  return Math.floor(ms / size) * size;
}

/** `2026-11-22T10` (hour) or `2026-11-22` (day): the period that holds `ms`. */
export function periodName(ms: number, granularity: UsageGranularity): string {
  const iso = new Date(periodStart(ms, granularity)).toISOString();
  return granularity === 'hour' ? iso.slice(0, 13) : iso.slice(0, 10);
}

/** When a bucket of the period holding `ms` is deleted: its end plus its retention. */
export function bucketExpiresAtMs(ms: number, granularity: UsageGranularity): number {
  return periodStart(ms, granularity) + PERIOD_MS[granularity] + USAGE_RETENTION_MS[granularity];
}

/** `2026-11`: the calendar month (UTC) that holds `ms`, as spend caps count it. */
export function usageMonthOf(ms: number): string {
  return new Date(ms).toISOString().slice(0, 7);
}

/** The month before `2026-11`: `2026-10` (and `2025-12` before `2026-01`). */
export function previousMonth(month: string): string {
  const [year, number] = month.split('-').map(Number) as [number, number];
  return number === 1
    ? `${String(year - 1).padStart(4, '0')}-12`
    : `${String(year).padStart(4, '0')}-${String(number - 1).padStart(2, '0')}`;
}
