import { z } from 'zod';
import { MAX_WINDOW_SECONDS, describeWindow, parseWindow } from './rate-limit';
import type { RateLimit } from './rate-limits';
import { MAX_BUDGET_TOKENS, MAX_BUDGET_TOKENS_PER_SECOND, type TokenBudget } from './token-budgets';

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

/** Each window at most once in a list of limits or budgets: which entry repeats which. */
function refineUniqueWindows(entries: readonly { windowSeconds: number }[], ctx: z.RefinementCtx): void {
  const seen = new Map<number, number>();
  entries.forEach((entry, index) => {
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
}

/** The limits of one scope: at most 10, no two with the same window. */
export const limitListSchema = z
  .array(limitSchema, { error: 'must be a list of {"limit","window"} objects, or null' })
  .max(MAX_LIMITS_PER_SCOPE, `must hold at most ${MAX_LIMITS_PER_SCOPE} limits`)
  .superRefine(refineUniqueWindows);

const TOKENS_HINT = `must be a whole number of tokens from 1 to ${MAX_BUDGET_TOKENS}`;

/** `{"tokens": 100000, "window": "1m"}`: tokens of every kind (input, output, cached, cache creation) per window. */
export const tokenBudgetSchema = z
  .strictObject({
    tokens: z.number({ error: TOKENS_HINT }).int(TOKENS_HINT).min(1, TOKENS_HINT).max(MAX_BUDGET_TOKENS, TOKENS_HINT),
    window: windowSchema,
  })
  .superRefine((entry, ctx) => {
    if (entry.tokens > entry.window * MAX_BUDGET_TOKENS_PER_SECOND) {
      ctx.addIssue({
        code: 'custom',
        path: ['tokens'],
        message: `must be at most ${MAX_BUDGET_TOKENS_PER_SECOND} tokens per second of window (${entry.window * MAX_BUDGET_TOKENS_PER_SECOND} for ${describeWindow(entry.window)})`,
      });
    }
  })
  .transform((entry): TokenBudget => ({ tokens: entry.tokens, windowSeconds: entry.window }));

/** The token budgets of one scope: at most 10, no two with the same window. */
export const tokenBudgetListSchema = z
  .array(tokenBudgetSchema, { error: 'must be a list of {"tokens","window"} objects, or null' })
  .max(MAX_LIMITS_PER_SCOPE, `must hold at most ${MAX_LIMITS_PER_SCOPE} budgets`)
  .superRefine(refineUniqueWindows);
