import type { Account, AccountStatus, StoredKey } from '../domain/key-records';
import { commonKeyView, limitsView, type CommonKeyView, type LimitView } from '../http/api-views';
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

export interface KeyView extends CommonKeyView {
  accountId: string;
  /** null means "not overridden": the account's key limits, else the plan's, apply. */
  limits: LimitView[] | null;
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
  const { id, createdBy, ...fields } = commonKeyView(key, nowMs);
  // The field order the admin API (and the CLI's --json output) has always had.
  return { id, accountId: key.accountId, ...fields, limits: limitsView(key.limits), createdBy };
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
