import type { KeyEnvironment } from '../keys/customer-key';
import type { Account, AccountStatus, StoredKey } from '../domain/key-records';
import { actorView, keyViewStatus, limitsView, type ActorView, type KeyViewStatus, type LimitView } from '../http/api-views';
import type { AccountListing, UnreadableRecord } from '../store/store';

export {
  actorView,
  keyViewStatus,
  limitsView,
  memberView,
  type ActorView,
  type KeyViewStatus,
  type LimitView,
  type MemberView,
} from '../http/api-views';

/**
 * Store records → admin API answers. Every field is picked explicitly, so a
 * field added to a record later (a hash, a counter) never leaks by default.
 */

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
