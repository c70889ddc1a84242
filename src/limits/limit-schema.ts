import { z } from 'zod';
import { MAX_WINDOW_SECONDS, describeWindow, parseWindow } from './rate-limit';
import type { RateLimit } from '../domain/rate-limits';

/**
 * How operators write limits, in the config file's defaultPlan and in the
 * admin API: `{"limit": 100, "window": "1m"}`. One schema, so both accept
 * exactly the same and name the bad field the same way (`…0.window`).
 */
export const MAX_LIMITS_PER_SCOPE = 10;
export const MAX_LIMIT_VALUE = 1_000_000_000;

const WINDOW_HINT = `must be a window such as "30s", "1m", "1h", "1d" or a whole number of seconds, at most ${describeWindow(MAX_WINDOW_SECONDS)}`;

/** `"1m"` or `60` → 60 (seconds). */
export const windowSchema = z.unknown().transform((value, ctx): number => {
  if (value === undefined) {
    ctx.addIssue({ code: 'custom', message: 'is required' });
    return z.NEVER;
  }
  const seconds = typeof value === 'string' || typeof value === 'number' ? parseWindow(value) : undefined;
  if (seconds === undefined) {
    ctx.addIssue({ code: 'custom', message: `${WINDOW_HINT}; got ${JSON.stringify(value)}` });
    return z.NEVER;
  }
  return seconds;
});

export const limitSchema = z
  .strictObject({
    limit: z
      .number({ error: `must be a whole number from 1 to ${MAX_LIMIT_VALUE}` })
      .int(`must be a whole number from 1 to ${MAX_LIMIT_VALUE}`)
      .min(1, `must be a whole number from 1 to ${MAX_LIMIT_VALUE}`)
      .max(MAX_LIMIT_VALUE, `must be a whole number from 1 to ${MAX_LIMIT_VALUE}`),
    window: windowSchema,
  })
  .transform((entry): RateLimit => ({ limit: entry.limit, windowSeconds: entry.window }));

/** The limits of one scope: at most 10, no two with the same window. */
export const limitListSchema = z
  .array(limitSchema, { error: 'must be a list of {"limit","window"} objects, or null' })
  .max(MAX_LIMITS_PER_SCOPE, `must hold at most ${MAX_LIMITS_PER_SCOPE} limits`)
  .superRefine((limits, ctx) => {
    const seen = new Map<number, number>();
    limits.forEach((entry, index) => {
      const first = seen.get(entry.windowSeconds);
      if (first !== undefined) {
        ctx.addIssue({
          code: 'custom',
          path: [index, 'window'],
          message: `repeats window ${describeWindow(entry.windowSeconds)} of entry ${first}; give each window once`,
        });
      } else {
        seen.set(entry.windowSeconds, index);
      }
    });
  });
