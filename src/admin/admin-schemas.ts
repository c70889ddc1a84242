import { z } from 'zod';
import { KEY_ENVIRONMENTS } from '../keys/customer-key';
import { MAX_WINDOW_SECONDS, describeWindow, parseWindow, type RateLimit } from '../limits/rate-limit';

/**
 * Request bodies of the admin API. Every object is strict (an unknown field
 * is an error, never silently ignored) and every issue carries the path of
 * the bad field, e.g. `limits.key.0.window`.
 */

export const MAX_LIMITS_PER_SCOPE = 10;
export const MAX_LIMIT_VALUE = 1_000_000_000;

export const accountIdSchema = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be 1-64 characters of letters, digits, _ or -');

/** Key ids are `key_` + base62; anything else cannot name a key. */
export const keyIdSchema = z.string().regex(/^[A-Za-z0-9_-]{1,128}$/);

export const displayNameSchema = z
  .string()
  .trim()
  .min(1, 'must not be empty')
  .max(200, 'must be at most 200 characters');

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

const nonEmpty = (fields: readonly string[]) => (value: Record<string, unknown>) =>
  fields.some((field) => value[field] !== undefined);
const atLeastOne = (fields: readonly string[]) => ({ message: `must set at least one of: ${fields.join(', ')}` });

const BILLING_FIELDS = ['status', 'creditBalance'] as const;
export const billingSchema = z
  .strictObject({
    status: z.enum(['active', 'suspended']).optional(),
    /** Integer minor units; null makes the account post-paid. */
    creditBalance: z.int('must be a whole number of minor units (or null for post-paid)').nullable().optional(),
  })
  .refine(nonEmpty(BILLING_FIELDS), atLeastOne(BILLING_FIELDS));

const LIMIT_SCOPES = ['key', 'account'] as const;
export const accountLimitsSchema = z
  .strictObject({
    key: limitListSchema.nullable().optional(),
    account: limitListSchema.nullable().optional(),
  })
  .refine(nonEmpty(LIMIT_SCOPES), atLeastOne(LIMIT_SCOPES));

export const createAccountBody = z.strictObject({
  id: accountIdSchema,
  name: displayNameSchema,
  billing: billingSchema.optional(),
  limits: accountLimitsSchema.optional(),
});

const ACCOUNT_PATCH_FIELDS = ['name', 'billing', 'limits'] as const;
export const patchAccountBody = z
  .strictObject({
    name: displayNameSchema.optional(),
    billing: billingSchema.optional(),
    limits: accountLimitsSchema.optional(),
  })
  .refine(nonEmpty(ACCOUNT_PATCH_FIELDS), atLeastOne(ACCOUNT_PATCH_FIELDS));

export const creditBody = z.strictObject({
  amount: z
    .int('must be a whole number of minor units (negative to debit)')
    .refine((amount) => amount !== 0, 'must not be zero'),
});

export const createKeyBody = z.strictObject({
  name: displayNameSchema.optional(),
  environment: z.enum(KEY_ENVIRONMENTS).optional(),
});

const KEY_PATCH_FIELDS = ['name', 'limits'] as const;
export const patchKeyBody = z
  .strictObject({
    name: displayNameSchema.optional(),
    limits: limitListSchema.nullable().optional(),
  })
  .refine(nonEmpty(KEY_PATCH_FIELDS), atLeastOne(KEY_PATCH_FIELDS));

export type CreateAccountBody = z.output<typeof createAccountBody>;
export type PatchAccountBody = z.output<typeof patchAccountBody>;
export type PatchKeyBody = z.output<typeof patchKeyBody>;

/** The first issue as the admin API reports it: a dotted field path and a message that names it. */
export function describeIssue(error: z.ZodError): { field?: string; message: string } {
  const issue = error.issues[0]!;
  const path = issue.path.map(String);
  if (issue.code === 'unrecognized_keys') {
    const unknown = issue.keys.map((key) => [...path, key].join('.'));
    return { field: unknown[0]!, message: `unknown field(s): ${unknown.join(', ')}` };
  }
  const field = path.join('.');
  return field ? { field, message: `${field}: ${issue.message}` } : { message: `body: ${issue.message}` };
}
