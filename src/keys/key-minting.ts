import type { RateLimit } from '../accounts/limits/rate-limits';
import type { TokenBudget } from '../accounts/limits/token-budgets';
import type { StoredKey } from './key-records';
import type { KeyRestrictions } from './key-restrictions';
import type { AuditActor } from '../accounts/customer-identity';
import { randomBase62 } from './base62';
import { displayPrefixOf, generateCustomerKey, hashCustomerKey, type KeyEnvironment } from './customer-key';

/** What a new key is made of, before it has a secret, an id or a creation time. */
export interface KeyTerms {
  accountId: string;
  name: string;
  environment: KeyEnvironment;
  /** ISO-8601; absent means the key does not expire. */
  expiresAt?: string;
  limits?: readonly RateLimit[];
  tokenBudgets?: readonly TokenBudget[];
  /** Integer minor units per UTC month. */
  monthlySpendCap?: number;
  /** What the key may do (src/keys/key-restrictions.ts); absent: whatever its account's defaults allow. */
  restrictions?: KeyRestrictions;
  /** Set for a rotation: the key this one replaces. */
  replaces?: string;
  /** Who asks for it: recorded on the key, shown in listings. */
  createdBy?: AuditActor;
}

export interface MintedKey {
  /** The full key: handed out once, in the answer that creates it, and never stored. */
  key: string;
  /** What the store indexes the key by. */
  keyHash: string;
  record: StoredKey;
}

/** A fresh secret and its record (new id, display prefix, active, created now). */
export function mintKey(terms: KeyTerms, nowMs: number): MintedKey {
  const key = generateCustomerKey(terms.environment);
  const record: StoredKey = {
    id: `key_${randomBase62(16)}`,
    accountId: terms.accountId,
    prefix: displayPrefixOf(key),
    name: terms.name,
    environment: terms.environment,
    status: 'active',
    createdAt: new Date(nowMs).toISOString(),
  };
  if (terms.expiresAt !== undefined) record.expiresAt = terms.expiresAt;
  if (terms.limits !== undefined) record.limits = terms.limits;
  if (terms.tokenBudgets !== undefined) record.tokenBudgets = terms.tokenBudgets;
  if (terms.monthlySpendCap !== undefined) record.monthlySpendCap = terms.monthlySpendCap;
  if (terms.restrictions !== undefined) record.restrictions = terms.restrictions;
  if (terms.replaces !== undefined) record.replaces = terms.replaces;
  if (terms.createdBy !== undefined) record.createdBy = terms.createdBy;
  return { key, keyHash: hashCustomerKey(key), record };
}

/**
 * What a rotated key's successor inherits, the one place it is decided: the
 * account, name, environment, per-key limits, token budgets, spend cap,
 * expiry and restrictions (a time-limited, capped or restricted key must not
 * become an unlimited one by rotation; PATCH can change them afterwards), plus which key it replaces.
 * Usage (the month's spend and token buckets are per key id), revocation and
 * rotation state start fresh, and so does `createdBy`: whoever rotates
 * creates the new key.
 */
export function successorTerms(old: StoredKey): KeyTerms {
  const terms: KeyTerms = { accountId: old.accountId, name: old.name, environment: old.environment, replaces: old.id };
  if (old.limits !== undefined) terms.limits = old.limits;
  if (old.tokenBudgets !== undefined) terms.tokenBudgets = old.tokenBudgets;
  if (old.monthlySpendCap !== undefined) terms.monthlySpendCap = old.monthlySpendCap;
  if (old.expiresAt !== undefined) terms.expiresAt = old.expiresAt;
  if (old.restrictions !== undefined) terms.restrictions = old.restrictions;
  return terms;
}
