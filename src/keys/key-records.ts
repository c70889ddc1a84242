import type { KeyEnvironment } from './customer-key';
import type { KeyRestrictions } from './key-restrictions';
import type { AuditActor } from '../accounts/customer-identity';
import type { RateLimit, RatePlanOverride } from '../accounts/limits/rate-limits';
import type { TokenBudget, TokenBudgetOverride } from '../accounts/limits/token-budgets';

/** Account ids: what the admin API accepts, and all a Redis hash tag may hold (never a brace). */
export const ACCOUNT_ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
/** Key ids are `key_` + base62 (src/keys/key-minting.ts); anything of this shape may name one. */
export const KEY_ID_PATTERN = /^[A-Za-z0-9_-]{1,128}$/;

/** The records the authorization rules read, as every store returns them. */
export type KeyStatus = 'active' | 'revoked';

export interface StoredKey {
  id: string;
  accountId: string;
  /** Display prefix: the only part of the key that is ever shown or logged. */
  prefix: string;
  name: string;
  environment: KeyEnvironment;
  status: KeyStatus;
  /** ISO-8601. */
  createdAt: string;
  /** ISO-8601; absent means the key does not expire. */
  expiresAt?: string;
  /** Per-key request limits; absent means the account's or the plan's. */
  limits?: readonly RateLimit[];
  /** Per-key token budgets; absent means the account's key budgets or the plan's. */
  tokenBudgets?: readonly TokenBudget[];
  /** Integer minor units this key may spend per calendar month (UTC); absent: no cap of its own. */
  monthlySpendCap?: number;
  /** ISO-8601; written off the hot path, batched, so it may lag by a few seconds. */
  lastUsedAt?: string;
  /** ISO-8601: when the key was revoked (by revoke, or by an immediate rotation). */
  revokedAt?: string;
  /** ISO-8601: end of a rotation grace period; from then on the key is refused as revoked. */
  revokeAt?: string;
  /** The key this one replaced by rotation, and the key that replaced it. */
  replaces?: string;
  replacedBy?: string;
  /** Who created it (by creation or rotation); absent on keys created before this was recorded. */
  createdBy?: AuditActor;
  /** What the key may do, within its account's keyRestrictions (src/keys/key-restrictions.ts); absent: everything. */
  restrictions?: KeyRestrictions;
}

export type AccountStatus = 'active' | 'suspended';

/** What is done with a key found published (src/keys/key-exposure.ts): revoked at once, or rotated with a short grace. */
export const EXPOSED_KEY_ACTIONS = ['revoke', 'rotate'] as const;
export type ExposedKeyAction = (typeof EXPOSED_KEY_ACTIONS)[number];

export interface Account {
  id: string;
  name: string;
  /** Billing status: a suspended account's keys get 402. */
  status: AccountStatus;
  /** Prepaid balance in integer minor units; absent means post-paid (never blocked for credit). */
  creditBalance?: number;
  /** Overrides of the default plan for this account. */
  limits?: RatePlanOverride;
  /** Cap on keys that count as active (src/keys/active-key-cap.ts); absent means the service default. */
  maxActiveKeys?: number;
  /** Overrides of the default plan's token budgets. */
  tokenBudgets?: TokenBudgetOverride;
  /** Integer minor units all its keys together may spend per calendar month (UTC); absent: no cap. */
  monthlySpendCap?: number;
  /** Restrictions every key of the account has on top of its own: a key can only narrow them. */
  keyRestrictions?: KeyRestrictions;
  /** What is done with a key of the account found published (src/keys/key-exposure.ts); absent: revoke. */
  exposedKeyAction?: ExposedKeyAction;
  /**
   * Read-only, written by applied usage: spend in minor units per UTC month
   * (`YYYY-MM`), prepaid or post-paid. The current and previous months are kept.
   */
  monthlySpend?: Readonly<Record<string, number>>;
  /**
   * Read-only, written by applied usage: minor units of usage that could not
   * be debited from the prepaid balance (it was at −10^15, or unreadable).
   * Absent when none.
   */
  creditShortfall?: number;
  createdAt: string;
}

/** What never changes about a key once created: which key and account a hash belongs to. */
export interface KeyIds {
  keyId: string;
  accountId: string;
}
