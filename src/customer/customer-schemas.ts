import { z } from 'zod';
import { displayNameSchema, isoDateTimeSchema } from '../http/api-schemas';
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
});

const KEY_PATCH_FIELDS = ['name', 'expiresAt'] as const;
export const customerPatchKeyBody = z
  .strictObject({
    name: displayNameSchema.optional(),
    /** null clears the expiry. */
    expiresAt: isoDateTimeSchema.nullable().optional(),
  })
  .refine((body) => KEY_PATCH_FIELDS.some((field) => body[field] !== undefined), {
    message: `must set at least one of: ${KEY_PATCH_FIELDS.join(', ')}`,
  });
