import type { KeyEnvironment } from '../keys/customer-key';
import { describeWindow } from '../limits/rate-limit';
import type { RateLimit } from '../domain/rate-limits';
import type { Account, AccountStatus, KeyStatus, StoredKey } from '../domain/key-records';
import type { AuditActor, MemberRole } from '../domain/customer-identity';
import type { Member } from '../domain/members';
import type { AccountListing, UnreadableRecord } from '../store/store';

/**
 * Store records → admin API answers. Every field is picked explicitly, so a
 * field added to a record later (a hash, a counter) never leaks by default.
 */

export interface LimitView {
  limit: number;
  /** `"1m"`, `"1d"`, `"90s"`: how windows are written everywhere. */
  window: string;
}

export interface AccountView {
  id: string;
  name: string;
  billing: {
    status: AccountStatus;
    /** Integer minor units; null means post-paid. */
    creditBalance: number | null;
  };
  /** null for a scope means "not overridden": the operator's default plan applies. */
  limits: { key: LimitView[] | null; account: LimitView[] | null };
  /** The account's own active-key cap; null means the service default (DEFAULT_MAX_ACTIVE_KEYS) applies. */
  maxActiveKeys: number | null;
  createdAt: string;
}

/** Who made a change: `{"kind":"operator"}` or `{"kind":"member","issuer","subject"}`. */
export type ActorView = { kind: 'operator' } | { kind: 'member'; issuer: string; subject: string };

export function actorView(actor: AuditActor): ActorView {
  return actor.kind === 'operator' ? { kind: 'operator' } : { kind: 'member', issuer: actor.issuer, subject: actor.subject };
}

export interface MemberView {
  id: string;
  accountId: string;
  role: MemberRole;
  /** `invited` until the invited person first signs in with the verified email. */
  status: 'active' | 'invited';
  /** The identity provider's names for the person; null for an invitation not yet bound. */
  issuer: string | null;
  subject: string | null;
  /** The address an invitation was sent to (kept after it binds); null for a member added by identity. */
  email: string | null;
  addedAt: string;
  addedBy: ActorView;
  /** When the invitation was bound (the person's first sign-in). */
  joinedAt: string | null;
}

export function memberView(member: Member): MemberView {
  const identity = member.principal.kind === 'identity' ? member.principal : undefined;
  return {
    id: member.id,
    accountId: member.accountId,
    role: member.role,
    status: identity ? 'active' : 'invited',
    issuer: identity?.issuer ?? null,
    subject: identity?.subject ?? null,
    email: member.principal.kind === 'invitation' ? member.principal.email : (member.invitedEmail ?? null),
    addedAt: member.addedAt,
    addedBy: actorView(member.addedBy),
    joinedAt: member.joinedAt ?? null,
  };
}

export interface KeyView {
  id: string;
  accountId: string;
  prefix: string;
  name: string;
  environment: KeyEnvironment;
  /** What a request with this key gets now: revoked (also after a grace period), expired, or active. */
  status: KeyViewStatus;
  createdAt: string;
  expiresAt: string | null;
  lastUsedAt: string | null;
  revokedAt: string | null;
  /** End of a rotation grace period: the key is refused from then on. */
  revokeAt: string | null;
  replaces: string | null;
  replacedBy: string | null;
  /** null means "not overridden": the account's key limits, else the plan's, apply. */
  limits: LimitView[] | null;
  /** null for keys created before the creator was recorded. */
  createdBy: ActorView | null;
}

export interface AccountListView {
  accounts: AccountView[];
  /** Accounts whose stored record cannot be read: left out of `accounts`, named here with what is wrong. */
  unreadable: UnreadableRecord[];
}

export interface CreditView {
  accountId: string;
  creditBalance: number;
}

export function limitsView(limits: readonly RateLimit[] | undefined): LimitView[] | null {
  return limits ? limits.map((entry) => ({ limit: entry.limit, window: describeWindow(entry.windowSeconds) })) : null;
}

export function accountView(account: Account): AccountView {
  return {
    id: account.id,
    name: account.name,
    billing: { status: account.status, creditBalance: account.creditBalance ?? null },
    limits: { key: limitsView(account.limits?.key), account: limitsView(account.limits?.account) },
    maxActiveKeys: account.maxActiveKeys ?? null,
    createdAt: account.createdAt,
  };
}

export function accountListView(listing: AccountListing): AccountListView {
  return { accounts: listing.accounts.map(accountView), unreadable: listing.unreadable.map(({ id, problem }) => ({ id, problem })) };
}

export type KeyViewStatus = KeyStatus | 'expired';

export function keyViewStatus(key: StoredKey, nowMs: number): KeyViewStatus {
  if (key.status === 'revoked' || (key.revokeAt !== undefined && Date.parse(key.revokeAt) <= nowMs)) return 'revoked';
  if (key.expiresAt !== undefined && Date.parse(key.expiresAt) <= nowMs) return 'expired';
  return 'active';
}

/** Never the key or its hash: the record holds neither, and only these fields are copied. */
export function keyView(key: StoredKey, nowMs: number): KeyView {
  return {
    id: key.id,
    accountId: key.accountId,
    prefix: key.prefix,
    name: key.name,
    environment: key.environment,
    status: keyViewStatus(key, nowMs),
    createdAt: key.createdAt,
    expiresAt: key.expiresAt ?? null,
    lastUsedAt: key.lastUsedAt ?? null,
    revokedAt: key.revokedAt ?? null,
    revokeAt: key.revokeAt ?? null,
    replaces: key.replaces ?? null,
    replacedBy: key.replacedBy ?? null,
    limits: limitsView(key.limits),
    createdBy: key.createdBy ? actorView(key.createdBy) : null,
  };
}

/** The one answer that carries a full key: create and rotate. */
export function createdKeyView(key: StoredKey, fullKey: string) {
  return {
    id: key.id,
    key: fullKey,
    prefix: key.prefix,
    accountId: key.accountId,
    name: key.name,
    environment: key.environment,
    createdAt: key.createdAt,
  };
}
