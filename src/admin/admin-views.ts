import type { KeyEnvironment } from '../keys/customer-key';
import { describeWindow } from '../limits/rate-limit';
import type { RateLimit } from '../domain/rate-limits';
import type { Account, AccountStatus, KeyStatus, StoredKey } from '../domain/key-records';

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
  createdAt: string;
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
    createdAt: account.createdAt,
  };
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
