/**
 * Who a signed-in customer is, and what they may do on an account. Shared by
 * the members store, the admin API (which manages members) and the customer
 * dashboard (which signs people in with OpenID Connect).
 */

/**
 * A person as their identity provider names them. `subject` is unique only
 * within its `issuer`, so the pair is the identity. `email` is present only
 * when the issuer marked it verified.
 */
export interface CustomerIdentity {
  issuer: string;
  subject: string;
  verifiedEmail?: string;
  /** For display only (the provider's `name` claim or the email); never used to authorise. */
  displayName?: string;
}

/** owner: keys and members; developer: keys; viewer: sees keys and usage. */
export const MEMBER_ROLES = ['owner', 'developer', 'viewer'] as const;
export type MemberRole = (typeof MEMBER_ROLES)[number];

/** One account a person may act on, and in which role. */
export interface Membership {
  accountId: string;
  role: MemberRole;
}

/**
 * What the customer dashboard asks of the members store when someone signs
 * in: the accounts they belong to. Implementations also bind pending
 * invitations by verified email to the identity on that first sign-in.
 */
export interface MembershipLookup {
  membershipsOf(identity: CustomerIdentity): Promise<Membership[]>;
  /** The account's display name, for the start page; absent (or undefined): the page shows the id. */
  accountNameOf?(accountId: string): Promise<string | undefined>;
}

/**
 * Which operator made an admin change: a person signed in to the operator
 * dashboard (issuer and subject), an operator API token (id and name), the
 * break-glass ADMIN_TOKEN, or a secret scanner's verified alert (which one).
 */
export type OperatorActor =
  | { kind: 'person'; issuer: string; subject: string }
  | { kind: 'token'; tokenId: string; name: string }
  | { kind: 'break-glass' }
  | { kind: 'secret-scanning'; reporter: SecretScanningReporter };

/** The secret-scanning programs whose signed alerts change keys. */
export type SecretScanningReporter = 'github';

/**
 * Who made a change, for the audit trail: an operator (and which one), or a
 * member by issuer and subject. An operator entry without `operator` was
 * written before operators were told apart (all used the one ADMIN_TOKEN).
 */
export type AuditActor = { kind: 'operator'; operator?: OperatorActor } | { kind: 'member'; issuer: string; subject: string };

/** An admin change from before operators were told apart: only "an operator". */
export const OPERATOR: AuditActor = Object.freeze({ kind: 'operator' });

export function operatorAuditActor(operator: OperatorActor): AuditActor {
  return { kind: 'operator', operator };
}

/** The actor a signed-in member's changes are recorded under: issuer and subject only, never a display name or email. */
export function memberActor(identity: Pick<CustomerIdentity, 'issuer' | 'subject'>): AuditActor {
  return { kind: 'member', issuer: identity.issuer, subject: identity.subject };
}
