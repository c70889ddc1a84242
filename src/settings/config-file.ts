import { z } from 'zod';
import { limitListSchema } from '../limits/limit-schema';
import { KEYED_FAMILIES } from '../routes/route-table';

/**
 * The operator's config file (CONFIG_FILE, JSON): route table overrides,
 * public routes, accepted version header values, header spellings and the
 * query-key switch. Unknown fields are errors, so a typo never silently
 * falls back to a default.
 */
const pathMatchSpec = z
  .strictObject({
    exact: z.string().startsWith('/').optional(),
    prefix: z.string().startsWith('/').optional(),
    regex: z
      .string()
      .refine((source) => compiles(source), { message: 'is not a valid regular expression' })
      .optional(),
    methods: z
      .array(z.string().regex(/^[A-Za-z]+$/, 'must be an HTTP method name'))
      .nonempty()
      .optional(),
  })
  .refine((spec) => [spec.exact, spec.prefix, spec.regex].filter((v) => v !== undefined).length === 1, {
    message: 'needs exactly one of exact, prefix or regex',
  });

const familyRoutes = Object.fromEntries(KEYED_FAMILIES.map((family) => [family, z.array(pathMatchSpec).nonempty().optional()])) as Record<
  (typeof KEYED_FAMILIES)[number],
  z.ZodOptional<z.ZodArray<typeof pathMatchSpec>>
>;

export const configFileSchema = z.strictObject({
  routes: z.strictObject(familyRoutes).optional(),
  publicRoutes: z.array(pathMatchSpec).optional(),
  messagesVersions: z
    .array(
      z
        .string()
        .regex(/^\d{4}-\d{2}-\d{2}$/, 'must be a date-form version such as 2023-06-01')
        .refine(isRealDateOrMalformed, 'is not a real date'),
    )
    .nonempty()
    .optional(),
  /** false: accept only the spec's `vendora-version` / `x-vendorg-api-key`, not the vendor spellings. */
  acceptVendorHeaderSpellings: z.boolean().optional(),
  /** true: generative-content routes also accept the key in `?key=` (it is stripped before upstream). */
  acceptQueryKey: z.boolean().optional(),
  /** Request limits for every key and account that has no override. */
  defaultPlan: z.strictObject({ key: limitListSchema.optional(), account: limitListSchema.optional() }).optional(),
});

export type ConfigFile = z.infer<typeof configFileSchema>;

function compiles(source: string): boolean {
  try {
    new RegExp(source);
    return true;
  } catch {
    return false;
  }
}

/** Rejects 2023-13-45; leaves malformed text to the regex check (zod runs both). */
function isRealDateOrMalformed(value: string): boolean {
  const time = Date.parse(`${value}T00:00:00Z`);
  if (!/^\d{4}-\d{2}-\d{2}$/.test(value)) return true;
  return !Number.isNaN(time) && new Date(time).toISOString().startsWith(value);
}
