import type { AuditActor, MemberRole } from './customer-identity';

/**
 * Account members: who they are (an identity, or an email invitation not yet
 * bound), their role, and the rules every store and API applies to them.
 * Pure; the stores keep the same rules atomically (see the contract suite).
 */

/** A signed-in identity (issuer + subject), or a verified email invited before its first sign-in. */
export type MemberPrincipal = { kind: 'identity'; issuer: string; subject: string } | { kind: 'invitation'; email: string };

export interface Member {
  /** `mem_` + base62: how the APIs name a member; it stays the same when an invitation binds. */
  id: string;
  accountId: string;
  role: MemberRole;
  principal: MemberPrincipal;
  /** The (normalised) address an invitation was sent to; kept after it binds, for display. */
  invitedEmail?: string;
  /** ISO-8601. */
  addedAt: string;
  addedBy: AuditActor;
  /** ISO-8601: when an invitation was bound to the identity that signed in with its email. */
  joinedAt?: string;
}

/** Members and invitations per account: bounds what a compromised owner session can add, and what the last-owner count reads. */
export const MAX_MEMBERS_PER_ACCOUNT = 1000;

export const MAX_EMAIL_LENGTH = 254;
export const MAX_ISSUER_LENGTH = 2048;
export const MAX_SUBJECT_LENGTH = 255;

/**
 * Emails are compared lower-cased and trimmed: providers differ in the case
 * they report, and an invitation must bind whatever case the person typed.
 */
export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

/**
 * What is wrong with an email address, or undefined. Deliberately plain
 * (one @, a dot in the domain, no spaces or control characters): the
 * identity provider verifies the address, this only refuses typos.
 */
export function emailProblem(email: string): string | undefined {
  if (email.length === 0) return 'must not be empty';
  if (email.length > MAX_EMAIL_LENGTH) return `must be at most ${MAX_EMAIL_LENGTH} characters`;
  if (!/^[^\s@\p{Cc}]+@[^\s@\p{Cc}]+\.[^\s@\p{Cc}]+$/u.test(email)) return 'must be an email address such as dev@example.com';
  return undefined;
}

/** An OpenID issuer identifier is an https URL (http only for a loopback development provider). */
export function issuerProblem(issuer: string): string | undefined {
  if (issuer.length === 0 || issuer.length > MAX_ISSUER_LENGTH) return `must be 1-${MAX_ISSUER_LENGTH} characters`;
  let url: URL;
  try {
    url = new URL(issuer);
  } catch {
    return 'must be the issuer URL, such as https://login.example.com';
  }
  const loopback = ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname);
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && loopback)) {
    return 'must be an https URL (http only for localhost), such as https://login.example.com';
  }
  if (url.search || url.hash) return 'must not have a query or fragment (OpenID Connect issuer identifiers have neither)';
  return undefined;
}

/** `sub` is case-sensitive text of at most 255 ASCII characters (OpenID Connect Core 1.0 §2); control characters are refused. */
export function subjectProblem(subject: string): string | undefined {
  if (subject.length === 0 || subject.length > MAX_SUBJECT_LENGTH) return `must be 1-${MAX_SUBJECT_LENGTH} characters`;
  if (/\p{Cc}/u.test(subject)) return 'must not contain control characters';
  return undefined;
}

/**
 * The name a principal is indexed under, unique per account and across the
 * store: `identity:<issuer>:<subject>` or `email:<address>`, each part
 * URI-encoded (so neither `:` nor a Redis Cluster hash tag `{…}` survives
 * inside a part).
 */
export function principalKey(principal: MemberPrincipal): string {
  return principal.kind === 'identity'
    ? `identity:${encodeURIComponent(principal.issuer)}:${encodeURIComponent(principal.subject)}`
    : `email:${encodeURIComponent(normalizeEmail(principal.email))}`;
}

/** An owner who can sign in: a pending invitation cannot manage anything yet, so it does not count as an owner. */
export function isActingOwner(member: Member): boolean {
  return member.role === 'owner' && member.principal.kind === 'identity';
}

/**
 * The last-owner rule: an account that has an acting owner keeps at least
 * one. True when removing the member (newRole null) or giving it another
 * role would take the count of acting owners from one to zero.
 */
export function leavesNoOwner(members: readonly Member[], memberId: string, newRole: MemberRole | null): boolean {
  const target = members.find((member) => member.id === memberId);
  if (!target || !isActingOwner(target) || newRole === 'owner') return false;
  return members.filter(isActingOwner).length === 1;
}
