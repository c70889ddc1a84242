import type { RateLimit, RatePlan, RatePlanOverride } from './rate-limits';

// Window syntax and which limits apply; the limit types themselves are in src/accounts/limits/rate-limits.ts.

const WINDOW_UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400 };
export const MAX_WINDOW_SECONDS = 31 * 86_400;

/** `"30s"`, `"1m"`, `"1h"`, `"1d"` or a whole number of seconds. */
export function parseWindow(text: string | number): number | undefined {
  if (typeof text === 'number') return Number.isInteger(text) && text > 0 && text <= MAX_WINDOW_SECONDS ? text : undefined;
  const match = /^(\d+)([smhd])$/.exec(text.trim());
  if (!match) return undefined;
  const seconds = Number(match[1]) * WINDOW_UNITS[match[2]!]!;
  return seconds > 0 && seconds <= MAX_WINDOW_SECONDS ? seconds : undefined;
}

/** `60` → `"1m"`: how windows are named in errors, headers and logs. */
export function describeWindow(windowSeconds: number): string {
  for (const [unit, size] of [
    ['d', 86_400],
    ['h', 3600],
    ['m', 60],
  ] as const) {
    if (windowSeconds % size === 0) return `${windowSeconds / size}${unit}`;
  }
  return `${windowSeconds}s`;
}

/** The limits that apply: key override, else the account's key override, else the plan; likewise for the account scope. */
export function effectiveLimits(
  plan: RatePlan,
  accountOverride: RatePlanOverride | undefined,
  keyOverride: readonly RateLimit[] | undefined,
): RatePlan {
  return {
    key: keyOverride ?? accountOverride?.key ?? plan.key,
    account: accountOverride?.account ?? plan.account,
  };
}
