import type { AuditActor, MemberRole } from '../accounts/customer-identity';
import type { KeyRestrictions } from '../keys/key-restrictions';
import type { KeyStatus, StoredKey } from '../keys/key-records';
import type { KeyEnvironment } from '../keys/customer-key';
import type { Member } from '../accounts/members';
import type { RateLimit } from '../accounts/limits/rate-limits';
import type { TokenBudget } from '../accounts/limits/token-budgets';
import { describeWindow } from '../accounts/limits/rate-limit';

/**
 * Views both HTTP APIs answer with (the operator's admin API and the
 * customers' API). As everywhere, every field is picked explicitly, so a
 * field added to a record later never leaks by default.
 */

export interface LimitView {
  limit: number;
  /** `"1m"`, `"1d"`, `"90s"`: how windows are written everywhere. */
  window: string;
}

export function limitsView(limits: readonly RateLimit[] | undefined): LimitView[] | null {
  return limits ? limits.map((entry) => ({ limit: entry.limit, window: describeWindow(entry.windowSeconds) })) : null;
}

export interface TokenBudgetView {
  tokens: number;
  /** Written as limit windows are. */
  window: string;
}

export function tokenBudgetsView(budgets: readonly TokenBudget[] | undefined): TokenBudgetView[] | null {
  return budgets ? budgets.map((entry) => ({ tokens: entry.tokens, window: describeWindow(entry.windowSeconds) })) : null;
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

export type KeyViewStatus = KeyStatus | 'expired';

export function keyViewStatus(key: StoredKey, nowMs: number): KeyViewStatus {
  if (key.status === 'revoked' || (key.revokeAt !== undefined && Date.parse(key.revokeAt) <= nowMs)) return 'revoked';
  if (key.expiresAt !== undefined && Date.parse(key.expiresAt) <= nowMs) return 'expired';
  return 'active';
}

/** A key as both APIs show it (the admin API adds its account and limit overrides). Never the key or its hash. */
export interface CommonKeyView {
  id: string;
  prefix: string;
  name: string;
  environment: KeyEnvironment;
  /** What a request with this key gets now: revoked (also after a grace period), expired, or active. */
  status: KeyViewStatus;
  createdAt: string;
  expiresAt: string | null;
  lastUsedAt: string | null;
  revokedAt: string | null;
  /** End of a regeneration's (rotation's) grace period: the key is refused from then on. */
  revokeAt: string | null;
  replaces: string | null;
  replacedBy: string | null;
  /** null for keys created before the creator was recorded. */
  createdBy: ActorView | null;
  /** What the key may do on top of its account's defaults (src/keys/key-restrictions.ts); null: no restrictions of its own. */
  restrictions: KeyRestrictions | null;
}

export function commonKeyView(key: StoredKey, nowMs: number): CommonKeyView {
  return {
    id: key.id,
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
    createdBy: key.createdBy ? actorView(key.createdBy) : null,
    restrictions: key.restrictions ?? null,
  };
}
