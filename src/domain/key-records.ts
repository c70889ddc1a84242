import type { KeyEnvironment } from '../keys/customer-key';
import type { AuditActor } from './customer-identity';
import type { RateLimit, RatePlanOverride } from './rate-limits';

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
}

export type AccountStatus = 'active' | 'suspended';

export interface Account {
  id: string;
  name: string;
  /** Billing status: a suspended account's keys get 402. */
  status: AccountStatus;
  /** Prepaid balance in integer minor units; absent means post-paid (never blocked for credit). */
  creditBalance?: number;
  /** Overrides of the default plan for this account. */
  limits?: RatePlanOverride;
  /** Cap on keys that count as active (src/domain/active-key-cap.ts); absent means the service default. */
  maxActiveKeys?: number;
  createdAt: string;
}

/** What never changes about a key once created: which key and account a hash belongs to. */
export interface KeyIds {
  keyId: string;
  accountId: string;
}
