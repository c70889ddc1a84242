import { z } from 'zod';
import { CREDIT_LIMIT_MINOR_UNITS } from '../domain/credit';
import { ACCOUNT_ID_PATTERN, KEY_ID_PATTERN } from '../domain/key-records';
import { KEY_ENVIRONMENTS } from '../keys/customer-key';
import { limitListSchema, tokenBudgetListSchema } from '../limits/limit-schema';

/**
 * Request bodies of the admin API. Every object is strict (an unknown field
 * is an error, never silently ignored) and every issue carries the path of
 * the bad field, e.g. `limits.key.0.window`.
 */

export const accountIdSchema = z.string().regex(ACCOUNT_ID_PATTERN, 'must be 1-64 characters of letters, digits, _ or -');

/** Key ids are `key_` + base62; anything else cannot name a key. */
export const keyIdSchema = z.string().regex(KEY_ID_PATTERN);

export const displayNameSchema = z.string().trim().min(1, 'must not be empty').max(200, 'must be at most 200 characters');

const nonEmpty = (fields: readonly string[]) => (value: Record<string, unknown>) => fields.some((field) => value[field] !== undefined);
const atLeastOne = (fields: readonly string[]) => ({ message: `must set at least one of: ${fields.join(', ')}` });

/** Whole minor units within ±CREDIT_LIMIT_MINOR_UNITS; `what` says what the number is for. */
const creditSchema = (what: string) =>
  z
    .int(`must be a whole number of minor units ${what}`)
    .min(-CREDIT_LIMIT_MINOR_UNITS, `must be at least -${CREDIT_LIMIT_MINOR_UNITS} (-10^15 minor units)`)
    .max(CREDIT_LIMIT_MINOR_UNITS, `must be at most ${CREDIT_LIMIT_MINOR_UNITS} (10^15 minor units)`);

/** A monthly spend cap: whole minor units from 1 to 10^15 (null removes it). */
export const monthlySpendCapSchema = z
  .int('must be a whole number of minor units per month (or null for no cap)')
  .min(1, 'must be at least 1 (or null for no cap)')
  .max(CREDIT_LIMIT_MINOR_UNITS, `must be at most ${CREDIT_LIMIT_MINOR_UNITS} (10^15 minor units)`);

const BILLING_FIELDS = ['status', 'creditBalance', 'monthlySpendCap'] as const;
export const billingSchema = z
  .strictObject({
    status: z.enum(['active', 'suspended']).optional(),
    /** Integer minor units; null makes the account post-paid. */
    creditBalance: creditSchema('(or null for post-paid)').nullable().optional(),
    /** What all the account's keys together may spend per calendar month (UTC); null removes the cap. */
    monthlySpendCap: monthlySpendCapSchema.nullable().optional(),
  })
  .refine(nonEmpty(BILLING_FIELDS), atLeastOne(BILLING_FIELDS));

const LIMIT_SCOPES = ['key', 'account'] as const;
export const accountLimitsSchema = z
  .strictObject({
    key: limitListSchema.nullable().optional(),
    account: limitListSchema.nullable().optional(),
  })
  .refine(nonEmpty(LIMIT_SCOPES), atLeastOne(LIMIT_SCOPES));

export const accountTokenBudgetsSchema = z
  .strictObject({
    key: tokenBudgetListSchema.nullable().optional(),
    account: tokenBudgetListSchema.nullable().optional(),
  })
  .refine(nonEmpty(LIMIT_SCOPES), atLeastOne(LIMIT_SCOPES));

export const createAccountBody = z.strictObject({
  id: accountIdSchema,
  name: displayNameSchema,
  billing: billingSchema.optional(),
  limits: accountLimitsSchema.optional(),
  tokenBudgets: accountTokenBudgetsSchema.optional(),
});

const ACCOUNT_PATCH_FIELDS = ['name', 'billing', 'limits', 'tokenBudgets'] as const;
export const patchAccountBody = z
  .strictObject({
    name: displayNameSchema.optional(),
    billing: billingSchema.optional(),
    limits: accountLimitsSchema.optional(),
    tokenBudgets: accountTokenBudgetsSchema.optional(),
  })
  .refine(nonEmpty(ACCOUNT_PATCH_FIELDS), atLeastOne(ACCOUNT_PATCH_FIELDS));

export const creditBody = z.strictObject({
  amount: creditSchema('(negative to debit)').refine((amount) => amount !== 0, 'must not be zero'),
});

/** An ISO-8601 date-time with an explicit zone, e.g. 2027-01-01T00:00:00Z. */
export const isoDateTimeSchema = z.iso.datetime({
  offset: true,
  error: 'must be an ISO-8601 date-time with a zone, e.g. 2027-01-01T00:00:00Z',
});

export const createKeyBody = z.strictObject({
  name: displayNameSchema.optional(),
  environment: z.enum(KEY_ENVIRONMENTS).optional(),
  expiresAt: isoDateTimeSchema.optional(),
  limits: limitListSchema.optional(),
  tokenBudgets: tokenBudgetListSchema.optional(),
  monthlySpendCap: monthlySpendCapSchema.optional(),
});

const KEY_PATCH_FIELDS = ['name', 'limits', 'expiresAt', 'tokenBudgets', 'monthlySpendCap'] as const;
export const patchKeyBody = z
  .strictObject({
    name: displayNameSchema.optional(),
    limits: limitListSchema.nullable().optional(),
    expiresAt: isoDateTimeSchema.nullable().optional(),
    tokenBudgets: tokenBudgetListSchema.nullable().optional(),
    monthlySpendCap: monthlySpendCapSchema.nullable().optional(),
  })
  .refine(nonEmpty(KEY_PATCH_FIELDS), atLeastOne(KEY_PATCH_FIELDS));

/** A planned rotation keeps the old key working at most this long. */
export const MAX_GRACE_SECONDS = 7 * 86_400;
export const rotateKeyBody = z.strictObject({
  graceSeconds: z
    .int('must be a whole number of seconds')
    .min(0, 'must not be negative')
    .max(MAX_GRACE_SECONDS, `must be at most ${MAX_GRACE_SECONDS} (7 days)`)
    .optional(),
});

/** Audit entry ids are `<ms>-<sequence>`, each part an unsigned 64-bit integer (Redis stream ids). */
const MAX_STREAM_ID_PART = 2n ** 64n - 1n;

export const auditQuery = z.strictObject({
  limit: z.coerce.number().int('must be a whole number').min(1).max(1000).optional(),
  before: z
    .string()
    .regex(/^[0-9]{1,20}-[0-9]{1,20}$/, 'must be an entry id from a previous page (e.g. 1763812800000-0)')
    // Runs even when the pattern failed, so it reads only parts made of digits.
    .refine(
      (id) => id.split('-').every((part) => !/^[0-9]+$/.test(part) || BigInt(part) <= MAX_STREAM_ID_PART),
      'must be an entry id from a previous page (each part below 2^64)',
    )
    .optional(),
});

/**
 * `GET /admin/accounts/{id}/usage`: periods from `from` to `to` (ISO-8601
 * with a zone), by hour or day, optionally by key or model. The range is
 * checked against what is kept (USAGE_RETENTION_MS) by the route, which
 * knows the time.
 */
export const usageQuery = z
  .strictObject({
    from: isoDateTimeSchema.optional(),
    to: isoDateTimeSchema.optional(),
    granularity: z.enum(['hour', 'day'], { error: 'must be "hour" or "day"' }).optional(),
    groupBy: z.enum(['key', 'model'], { error: 'must be "key" or "model"' }).optional(),
  })
  .transform((query) => ({
    granularity: query.granularity ?? ('day' as const),
    ...(query.groupBy !== undefined ? { groupBy: query.groupBy } : {}),
    ...(query.from !== undefined ? { fromMs: Date.parse(query.from) } : {}),
    ...(query.to !== undefined ? { toMs: Date.parse(query.to) } : {}),
  }));

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
