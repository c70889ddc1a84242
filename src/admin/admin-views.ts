import type { KeyEnvironment } from '../keys/customer-key';
import { describeWindow, type RateLimit } from '../limits/rate-limit';
import type { Account, AccountStatus, KeyStatus, StoredKey } from '../store/store';

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
  status: KeyStatus;
  createdAt: string;
  expiresAt: string | null;
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

/** Never the key or its hash: the record holds neither, and only these fields are copied. */
export function keyView(key: StoredKey): KeyView {
  return {
    id: key.id,
    accountId: key.accountId,
    prefix: key.prefix,
    name: key.name,
    environment: key.environment,
    status: key.status,
    createdAt: key.createdAt,
    expiresAt: key.expiresAt ?? null,
    limits: limitsView(key.limits),
  };
}
