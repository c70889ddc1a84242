import { z } from 'zod';
import { MAX_ACTIVE_KEYS_LIMIT } from '../domain/active-key-cap';
import { CREDIT_LIMIT_MINOR_UNITS } from '../domain/credit';
import { accountIdSchema, displayNameSchema, isoDateTimeSchema } from '../http/api-schemas';
import { KEY_ENVIRONMENTS } from '../keys/customer-key';
import { limitListSchema } from '../limits/limit-schema';

/**
 * Request bodies of the admin API. Every object is strict (an unknown field
 * is an error, never silently ignored) and every issue carries the path of
 * the bad field, e.g. `limits.key.0.window`. What the customer API takes
 * too lives in src/http/api-schemas.ts, re-exported here.
 */

export {
  accountIdSchema,
  addMemberBody,
  auditQuery,
  describeIssue,
  displayNameSchema,
  emailSchema,
  isoDateTimeSchema,
  issuerSchema,
  keyIdSchema,
  MAX_GRACE_SECONDS,
  memberIdSchema,
  memberRoleSchema,
  patchMemberBody,
  principalOf,
  rotateKeyBody,
  subjectSchema,
  type AddMemberBody,
} from '../http/api-schemas';

const nonEmpty = (fields: readonly string[]) => (value: Record<string, unknown>) => fields.some((field) => value[field] !== undefined);
const atLeastOne = (fields: readonly string[]) => ({ message: `must set at least one of: ${fields.join(', ')}` });

/** Whole minor units within ±CREDIT_LIMIT_MINOR_UNITS; `what` says what the number is for. */
const creditSchema = (what: string) =>
  z
    .int(`must be a whole number of minor units ${what}`)
    .min(-CREDIT_LIMIT_MINOR_UNITS, `must be at least -${CREDIT_LIMIT_MINOR_UNITS} (-10^15 minor units)`)
    .max(CREDIT_LIMIT_MINOR_UNITS, `must be at most ${CREDIT_LIMIT_MINOR_UNITS} (10^15 minor units)`);

const BILLING_FIELDS = ['status', 'creditBalance'] as const;
export const billingSchema = z
  .strictObject({
    status: z.enum(['active', 'suspended']).optional(),
    /** Integer minor units; null makes the account post-paid. */
    creditBalance: creditSchema('(or null for post-paid)').nullable().optional(),
  })
  .refine(nonEmpty(BILLING_FIELDS), atLeastOne(BILLING_FIELDS));

const LIMIT_SCOPES = ['key', 'account'] as const;
export const accountLimitsSchema = z
  .strictObject({
    key: limitListSchema.nullable().optional(),
    account: limitListSchema.nullable().optional(),
  })
  .refine(nonEmpty(LIMIT_SCOPES), atLeastOne(LIMIT_SCOPES));

/** The account's own active-key cap (src/domain/active-key-cap.ts); 0 stops new keys altogether. */
export const maxActiveKeysSchema = z
  .int('must be a whole number of keys')
  .min(0, 'must not be negative (0 allows no new keys)')
  .max(MAX_ACTIVE_KEYS_LIMIT, `must be at most ${MAX_ACTIVE_KEYS_LIMIT}`);

export const createAccountBody = z.strictObject({
  id: accountIdSchema,
  name: displayNameSchema,
  billing: billingSchema.optional(),
  limits: accountLimitsSchema.optional(),
  maxActiveKeys: maxActiveKeysSchema.optional(),
});

const ACCOUNT_PATCH_FIELDS = ['name', 'billing', 'limits', 'maxActiveKeys'] as const;
export const patchAccountBody = z
  .strictObject({
    name: displayNameSchema.optional(),
    billing: billingSchema.optional(),
    limits: accountLimitsSchema.optional(),
    /** null: the service default (DEFAULT_MAX_ACTIVE_KEYS) applies again. */
    maxActiveKeys: maxActiveKeysSchema.nullable().optional(),
  })
  .refine(nonEmpty(ACCOUNT_PATCH_FIELDS), atLeastOne(ACCOUNT_PATCH_FIELDS));

export const creditBody = z.strictObject({
  amount: creditSchema('(negative to debit)').refine((amount) => amount !== 0, 'must not be zero'),
});

export const createKeyBody = z.strictObject({
  name: displayNameSchema.optional(),
  environment: z.enum(KEY_ENVIRONMENTS).optional(),
  expiresAt: isoDateTimeSchema.optional(),
  limits: limitListSchema.optional(),
});

const KEY_PATCH_FIELDS = ['name', 'limits', 'expiresAt'] as const;
export const patchKeyBody = z
  .strictObject({
    name: displayNameSchema.optional(),
    limits: limitListSchema.nullable().optional(),
    expiresAt: isoDateTimeSchema.nullable().optional(),
  })
  .refine(nonEmpty(KEY_PATCH_FIELDS), atLeastOne(KEY_PATCH_FIELDS));

export type CreateAccountBody = z.output<typeof createAccountBody>;
export type PatchAccountBody = z.output<typeof patchAccountBody>;
export type PatchKeyBody = z.output<typeof patchKeyBody>;
