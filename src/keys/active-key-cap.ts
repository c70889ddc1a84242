import type { StoredKey } from './key-records';

/**
 * How many keys an account may hold that a request could use, so that a
 * compromised session (or a runaway script) cannot mint thousands. An
 * account can set its own `maxActiveKeys`; otherwise the service's
 * DEFAULT_MAX_ACTIVE_KEYS setting applies. Both stores count atomically
 * with the write (the Redis scripts mirror these rules; the contract suite
 * holds them equal).
 */
export const DEFAULT_MAX_ACTIVE_KEYS = 50;
/** Largest cap an account or the service may set: the count reads every key record of the account. */
export const MAX_ACTIVE_KEYS_LIMIT = 10_000;

/**
 * A key counts until it is revoked (or its rotation grace period has ended).
 * An expired key still counts: its expiry can be changed back, so not
 * counting it would let a session create keys that expire at once and then
 * lift their expiry. Revoke a key to free its place.
 */
export function countsTowardCap(key: Pick<StoredKey, 'status' | 'revokeAt'>, nowMs: number): boolean {
  return key.status === 'active' && !(key.revokeAt !== undefined && Date.parse(key.revokeAt) <= nowMs);
}

/**
 * Creating a key is refused at the cap. An immediate rotation is never
 * refused (one key out, one in). A rotation with a grace period keeps one
 * more key usable until the grace ends, so it is allowed at the cap but not
 * above it: otherwise a chain of rotations with 7-day grace periods would
 * keep any number of keys working.
 */
export function capRefuses(operation: 'create' | 'rotate_with_grace', counted: number, maxActiveKeys: number): boolean {
  return operation === 'create' ? counted >= maxActiveKeys : counted > maxActiveKeys;
}
