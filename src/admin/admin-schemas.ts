import { z } from 'zod';
import { MAX_ACTIVE_KEYS_LIMIT } from '../keys/active-key-cap';
import { CREDIT_LIMIT_MINOR_UNITS, IDEMPOTENCY_KEY_HEADER, IDEMPOTENCY_KEY_MAX_LENGTH } from '../accounts/credit';
import {
  accountIdSchema,
  displayNameSchema,
  isoDateTimeSchema,
  keyIdSchema,
  keyRestrictionsSchema,
  memberIdSchema,
} from '../http/api-schemas';
import { KEY_ENVIRONMENTS } from '../keys/customer-key';
import { EXPOSED_KEY_ACTIONS } from '../keys/key-records';
import { limitListSchema, tokenBudgetListSchema } from '../accounts/limits/limit-schema';
import type { AuditAction } from '../ports/store';
import { auditQuery } from '../http/api-schemas';

/**
 * Request bodies of the admin API. Every object is strict (an unknown field
 * is an error, never silently ignored) and every issue carries the path of
 * the bad field, e.g. `limits.key.0.window`. What the customer API takes
 * too lives in src/http/api-schemas.ts, re-exported here.
 */

export {
  accountIdSchema,
  addMemberBody,
  addMemberBodyShape,
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
    .int(`must be a whole number of units (10^-exponent of the currency setting) ${what}`)
    .min(-CREDIT_LIMIT_MINOR_UNITS, `must be at least -${CREDIT_LIMIT_MINOR_UNITS} (-10^15 units)`)
    .max(CREDIT_LIMIT_MINOR_UNITS, `must be at most ${CREDIT_LIMIT_MINOR_UNITS} (10^15 units)`);

/** A monthly spend cap: whole minor units from 1 to 10^15 (null removes it). */
export const monthlySpendCapSchema = z
  .int('must be a whole number of units (10^-exponent of the currency setting) per month (or null for no cap)')
  .min(1, 'must be at least 1 (or null for no cap)')
  .max(CREDIT_LIMIT_MINOR_UNITS, `must be at most ${CREDIT_LIMIT_MINOR_UNITS} (10^15 units)`);

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

/** The account's own active-key cap (src/keys/active-key-cap.ts); 0 stops new keys altogether. */
export const maxActiveKeysSchema = z
  .int('must be a whole number of keys')
  .min(0, 'must not be negative (0 allows no new keys)')
  .max(MAX_ACTIVE_KEYS_LIMIT, `must be at most ${MAX_ACTIVE_KEYS_LIMIT}`);

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
  maxActiveKeys: maxActiveKeysSchema.optional(),
  tokenBudgets: accountTokenBudgetsSchema.optional(),
  keyRestrictions: keyRestrictionsSchema.optional(),
  exposedKeyAction: z.enum(EXPOSED_KEY_ACTIONS).optional(),
});

const ACCOUNT_PATCH_FIELDS = ['name', 'billing', 'limits', 'maxActiveKeys', 'tokenBudgets', 'keyRestrictions', 'exposedKeyAction'] as const;
export const patchAccountBody = z
  .strictObject({
    name: displayNameSchema.optional(),
    billing: billingSchema.optional(),
    limits: accountLimitsSchema.optional(),
    /** null: the service default (DEFAULT_MAX_ACTIVE_KEYS) applies again. */
    maxActiveKeys: maxActiveKeysSchema.nullable().optional(),
    tokenBudgets: accountTokenBudgetsSchema.optional(),
    /** Restrictions every key of the account has on top of its own; null removes them. */
    keyRestrictions: keyRestrictionsSchema.nullable().optional(),
    /** What is done with a key of the account found published (docs/operations/when-a-key-leaks.md); null: revoke. */
    exposedKeyAction: z.enum(EXPOSED_KEY_ACTIONS).nullable().optional(),
  })
  .refine(nonEmpty(ACCOUNT_PATCH_FIELDS), atLeastOne(ACCOUNT_PATCH_FIELDS));

/** The credit call's optional Idempotency-Key (the route checks it itself, with its own message). */
export const creditHeaders = z.object({ [IDEMPOTENCY_KEY_HEADER]: z.string().min(1).max(IDEMPOTENCY_KEY_MAX_LENGTH).optional() });

export const creditBody = z.strictObject({
  amount: creditSchema('(negative to debit)').refine((amount) => amount !== 0, 'must not be zero'),
});

export const createKeyBody = z.strictObject({
  name: displayNameSchema.optional(),
  environment: z.enum(KEY_ENVIRONMENTS).optional(),
  expiresAt: isoDateTimeSchema.optional(),
  limits: limitListSchema.optional(),
  tokenBudgets: tokenBudgetListSchema.optional(),
  monthlySpendCap: monthlySpendCapSchema.optional(),
  restrictions: keyRestrictionsSchema.optional(),
});

const KEY_PATCH_FIELDS = ['name', 'limits', 'expiresAt', 'tokenBudgets', 'monthlySpendCap', 'restrictions'] as const;
export const patchKeyBody = z
  .strictObject({
    name: displayNameSchema.optional(),
    limits: limitListSchema.nullable().optional(),
    expiresAt: isoDateTimeSchema.nullable().optional(),
    tokenBudgets: tokenBudgetListSchema.nullable().optional(),
    monthlySpendCap: monthlySpendCapSchema.nullable().optional(),
    /** null removes them: the key may do whatever its account's defaults allow. */
    restrictions: keyRestrictionsSchema.nullable().optional(),
  })
  .refine(nonEmpty(KEY_PATCH_FIELDS), atLeastOne(KEY_PATCH_FIELDS));

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

/** The path parameters, for the API description (the routes check them themselves: a bad id is a 404, not a 400). */
export const accountPathParams = z.strictObject({ id: accountIdSchema });
export const keyPathParams = z.strictObject({ keyId: keyIdSchema });
export const memberPathParams = z.strictObject({ id: accountIdSchema, memberId: memberIdSchema });

/** Every action an audit entry can name: a Record, so an action added to AuditAction (src/ports/store.ts) must be added here. */
const AUDIT_ACTION_NAMES: Record<AuditAction, true> = {
  'account.create': true,
  'account.update': true,
  'account.credit': true,
  'key.create': true,
  'key.update': true,
  'key.rotate': true,
  'key.revoke': true,
  'key.exposed': true,
  'member.add': true,
  'member.update': true,
  'member.remove': true,
  'member.bind': true,
  'webhook.create': true,
  'webhook.update': true,
  'webhook.delete': true,
  'webhook.rotate_secret': true,
  'operator_token.create': true,
  'operator_token.revoke': true,
};
export const AUDIT_ACTIONS = Object.keys(AUDIT_ACTION_NAMES) as [AuditAction, ...AuditAction[]];

/**
 * GET /admin/audit: the page of auditQuery, filtered by account, action, actor and time. `actor` is `break-glass`,
 * an operator token's id (`otk_…`), or a subject (a signed-in operator's or a member's).
 */
export const adminAuditQuery = auditQuery.extend({
  accountId: accountIdSchema.optional(),
  action: z.enum(AUDIT_ACTIONS).optional(),
  actor: z.string().min(1).max(256).optional(),
  from: isoDateTimeSchema.optional(),
  to: isoDateTimeSchema.optional(),
});
