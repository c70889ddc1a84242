import { z } from 'zod';
import { describeWindow, parseWindow, type RateLimit } from './rate-limit';

/**
 * How limits are written by operators (config file, admin API):
 * `{"limit": 100, "window": "1m"}`. Shared so both accept exactly the same.
 */
export const MAX_LIMITS_PER_SCOPE = 10;

export const rateLimitInput = z
  .strictObject({
    limit: z.number().int('must be a whole number').positive('must be at least 1').max(1_000_000_000),
    window: z.union([z.string(), z.number()]),
  })
  .transform((input, context): RateLimit => {
    const windowSeconds = parseWindow(input.window);
    if (windowSeconds === undefined) {
      context.addIssue({
        code: 'custom',
        path: ['window'],
        message: 'must be a duration such as "30s", "1m", "1h", "1d" (at most 31d) or whole seconds',
      });
      return z.NEVER;
    }
    return { limit: input.limit, windowSeconds };
  });

export const rateLimitList = z
  .array(rateLimitInput)
  .max(MAX_LIMITS_PER_SCOPE, `at most ${MAX_LIMITS_PER_SCOPE} limits`)
  .superRefine((limits, context) => {
    const seen = new Set<number>();
    limits.forEach((limit, index) => {
      if (seen.has(limit.windowSeconds)) {
        context.addIssue({ code: 'custom', path: [index, 'window'], message: 'duplicates another limit with the same window' });
      }
      seen.add(limit.windowSeconds);
    });
  });

/** The operator-facing form of a limit. */
export function rateLimitView(limit: RateLimit): { limit: number; window: string } {
  return { limit: limit.limit, window: describeWindow(limit.windowSeconds) };
}
