import { z } from 'zod';
import { MEMBER_ROLES } from '../accounts/customer-identity';
import { ACCOUNT_ID_PATTERN, KEY_ID_PATTERN } from '../keys/key-records';
import { KEYED_FAMILIES } from '../check/routes/route-table';
import { MAX_RESTRICTION_ENTRIES, restrictionsProblem, type KeyRestrictions } from '../keys/key-restrictions';
import { emailProblem, issuerProblem, normalizeEmail, subjectProblem, type MemberPrincipal } from '../accounts/members';

/**
 * Request parts both HTTP APIs take (the operator's admin API and the
 * customers' API), so that both accept exactly the same ids, dates, member
 * and rotation bodies and audit queries, and name a bad field the same way.
 * Every object is strict: an unknown field is an error, never ignored.
 */

export const accountIdSchema = z.string().regex(ACCOUNT_ID_PATTERN, 'must be 1-64 characters of letters, digits, _ or -');

/** Key ids are `key_` + base62; anything else cannot name a key. */
export const keyIdSchema = z.string().regex(KEY_ID_PATTERN);

export const displayNameSchema = z.string().trim().min(1, 'must not be empty').max(200, 'must be at most 200 characters');

/** An ISO-8601 date-time with an explicit zone, e.g. 2027-01-01T00:00:00Z. */
export const isoDateTimeSchema = z.iso.datetime({
  offset: true,
  error: 'must be an ISO-8601 date-time with a zone, e.g. 2027-01-01T00:00:00Z',
});

/** A planned rotation keeps the old key working at most this long. */
export const MAX_GRACE_SECONDS = 7 * 86_400;
/**
 * A key's restrictions, or an account's defaults for its keys (src/keys/key-restrictions.ts): the shape here, for
 * OpenAPI; every rule (CIDR syntax, known families, no empty list, '*' only at the end) in restrictionsProblem, whose
 * words are the error's.
 */
export const keyRestrictionsSchema = z
  .strictObject({
    endpoints: z
      .array(z.string())
      .max(MAX_RESTRICTION_ENTRIES)
      .optional()
      .describe(`route families (${KEYED_FAMILIES.join(', ')}) or paths, exact or a prefix ending in '*'`),
    readOnly: z.boolean().optional().describe('only GET and HEAD requests'),
    models: z.array(z.string()).max(MAX_RESTRICTION_ENTRIES).optional().describe("model names, exact or a prefix ending in '*'"),
    sourceAddresses: z.array(z.string()).max(MAX_RESTRICTION_ENTRIES).optional().describe('CIDR ranges, IPv4 or IPv6'),
  })
  .superRefine((value, context) => {
    const problem = restrictionsProblem(value);
    // The part at fault joins the path, so the error names it once: `restrictions.sourceAddresses: …`.
    if (problem !== undefined) context.addIssue({ code: 'custom', message: problem.message, path: problem.field ? [problem.field] : [] });
  })
  .transform((value) => value as KeyRestrictions);

export const rotateKeyBody = z.strictObject({
  graceSeconds: z
    .int('must be a whole number of seconds')
    .min(0, 'must not be negative')
    .max(MAX_GRACE_SECONDS, `must be at most ${MAX_GRACE_SECONDS} (7 days)`)
    .optional(),
});

/** A string the domain's validator accepts, with the validator's own words as the message. */
const checkedText = (problem: (text: string) => string | undefined) =>
  z.string().superRefine((text, context) => {
    const found = problem(text);
    if (found) context.addIssue({ code: 'custom', message: found });
  });

export const memberRoleSchema = z.enum(MEMBER_ROLES, { error: `must be one of: ${MEMBER_ROLES.join(', ')}` });
/** Member ids are `mem_` + base62; anything else cannot name a member. */
export const memberIdSchema = z.string().regex(/^mem_[A-Za-z0-9]{1,64}$/);
export const emailSchema = z.string().transform(normalizeEmail).pipe(checkedText(emailProblem));
export const issuerSchema = checkedText(issuerProblem);
export const subjectSchema = checkedText(subjectProblem);

const inviteMemberBody = z.strictObject({ role: memberRoleSchema, email: emailSchema });
const identityMemberBody = z.strictObject({ role: memberRoleSchema, issuer: issuerSchema, subject: subjectSchema });
const neitherMemberBody = z.custom<never>(() => false, {
  error: 'give role and either email (an invitation) or issuer and subject (an identity)',
});
const has = (value: unknown, field: string) => typeof value === 'object' && value !== null && field in value;

/**
 * A member is invited by email, or added by identity (issuer + subject, as
 * the identity provider names the person). The fields given choose which, so
 * an error names the bad field of that form, never both forms at once.
 */
export const addMemberBody = {
  safeParse(value: unknown) {
    if (has(value, 'email')) return inviteMemberBody.safeParse(value);
    if (has(value, 'issuer') || has(value, 'subject')) return identityMemberBody.safeParse(value);
    return neitherMemberBody.safeParse(value);
  },
};
export type AddMemberBody = z.output<typeof inviteMemberBody> | z.output<typeof identityMemberBody>;
/** The two forms addMemberBody takes, as the API description shows them (addMemberBody itself picks one by the fields given). */
export const addMemberBodyShape = z.union([inviteMemberBody, identityMemberBody]);

export function principalOf(body: AddMemberBody): MemberPrincipal {
  return 'email' in body ? { kind: 'invitation', email: body.email } : { kind: 'identity', issuer: body.issuer, subject: body.subject };
}

export const patchMemberBody = z.strictObject({ role: memberRoleSchema });

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

/** The first issue as both APIs report it: a dotted field path and a message that names it. */
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
