import { z } from 'zod';
import {
  accountIdSchema,
  displayNameSchema,
  isoDateTimeSchema,
  keyIdSchema,
  keyRestrictionsSchema,
  memberIdSchema,
} from '../http/api-schemas';
import { USAGE_WINDOWS, type UsageWindow } from '../keys/request-counts';
import { KEY_ENVIRONMENTS } from '../keys/customer-key';

/**
 * Request bodies of the customer API that differ from the operator's: a
 * customer never sets limits (or anything of billing), so those fields are
 * refused as unknown. Member, rotation and audit bodies are the admin API's
 * own (admin-schemas.ts): the same rules, the same field names.
 */

export const customerCreateKeyBody = z.strictObject({
  name: displayNameSchema.optional(),
  environment: z.enum(KEY_ENVIRONMENTS).optional(),
  expiresAt: isoDateTimeSchema.optional(),
  /** Within the account's keyRestrictions (wideningProblem). */
  restrictions: keyRestrictionsSchema.optional(),
});

const KEY_PATCH_FIELDS = ['name', 'expiresAt', 'restrictions'] as const;
export const customerPatchKeyBody = z
  .strictObject({
    name: displayNameSchema.optional(),
    /** null clears the expiry. */
    expiresAt: isoDateTimeSchema.nullable().optional(),
    /** null removes the key's own (the account's defaults still apply); within the account's keyRestrictions. */
    restrictions: keyRestrictionsSchema.nullable().optional(),
  })
  .refine((body) => KEY_PATCH_FIELDS.some((field) => body[field] !== undefined), {
    message: `must set at least one of: ${KEY_PATCH_FIELDS.join(', ')}`,
  });

/** `?window=24h` (hourly, the default) or `?window=30d` (daily). */
export const usageQuery = z.strictObject({
  window: z.enum(Object.keys(USAGE_WINDOWS) as [UsageWindow, ...UsageWindow[]]).optional(),
});

/** The path parameters, for the API description (the routes check them themselves: a bad id is a 404, not a 400). */
export const accountPathParams = z.strictObject({ accountId: accountIdSchema });
export const keyPathParams = z.strictObject({ accountId: accountIdSchema, keyId: keyIdSchema });
export const memberPathParams = z.strictObject({ accountId: accountIdSchema, memberId: memberIdSchema });
