import type { AuditActor } from '../accounts/customer-identity';
import { restrictionsText, type KeyRestrictions } from './key-restrictions';
import type { StoredKey } from './key-records';
import { mintKey, successorTerms, type KeyTerms } from './key-minting';
import { StoreOutcomeUnknownError, type ActiveKeyCapReached, type KeyPatch, type RotateKeyResult } from '../ports/store';
import type { ActionDeps } from '../accounts/action-deps';
import { recordChange } from '../accounts/audit-trail';
import { keyCreatedEvent, keyExposedEvent, keyRevokedEvent, keyRotatedEvent, type KeyExposure } from '../webhooks/webhook-events';

/**
 * Key changes as the operator and members make them: mint (src/keys/key-minting.ts),
 * store (atomic, capped), audit with who asked. The answers say what
 * happened; each API turns them into its own status codes and messages.
 */

/** A key as an API asks for it; only the operator sets per-key limits, token budgets and spend caps. */
export type NewKey = Omit<KeyTerms, 'replaces' | 'createdBy'>;

/** The store could not say whether the write was applied; the new key's secret was not handed out. */
export interface OutcomeUnknown {
  kind: 'outcome_unknown';
  /** The id the new key has if it was written. */
  keyId: string;
}

export type CreateKeyOutcome =
  { kind: 'created'; key: string; record: StoredKey } | { kind: 'account_not_found' } | ActiveKeyCapReached | OutcomeUnknown;

export async function createKey(deps: ActionDeps, actor: AuditActor, request: NewKey): Promise<CreateKeyOutcome> {
  const nowMs = deps.clock.now();
  const { key, keyHash, record } = mintKey({ ...request, createdBy: actor }, nowMs);
  // The event goes to the account's webhook outbox in the same step as the key (src/ports/webhook-store.ts).
  const result = await unlessOutcomeUnknown(deps, () => deps.store.insertKey(keyHash, record, [keyCreatedEvent(record, actor, nowMs)]));
  if (result === undefined) return { kind: 'outcome_unknown', keyId: record.id };
  if (result === 'account_not_found') return { kind: result };
  if (result !== 'created') return result;
  await recordChange(deps, { action: 'key.create', actor, accountId: record.accountId, keyId: record.id, keyPrefix: record.prefix });
  return { kind: 'created', key, record };
}

export type RotateKeyOutcome =
  { kind: 'rotated'; key: string; newKey: StoredKey; oldKey: StoredKey } | Exclude<RotateKeyResult, { kind: 'rotated' }> | OutcomeUnknown;

/**
 * `old` is the record the caller looked up (and, for a member, checked to be of their account). With `exposure`
 * (src/keys/key-exposure.ts) a `key.exposed` event goes out with the rotation's, in the same step.
 */
export async function rotateKey(
  deps: ActionDeps,
  actor: AuditActor,
  old: StoredKey,
  graceSeconds: number,
  exposure?: KeyExposure,
): Promise<RotateKeyOutcome> {
  const nowMs = deps.clock.now();
  const { key, keyHash, record } = mintKey({ ...successorTerms(old), createdBy: actor }, nowMs);
  const events = [keyRotatedEvent(old, record, graceSeconds, actor, nowMs)];
  if (exposure) events.push(keyExposedEvent(old, exposure, { kind: 'rotated', newKeyId: record.id, graceSeconds }, nowMs));
  // The grace end and the expiry check use the store's clock, not this replica's.
  const result = await unlessOutcomeUnknown(deps, () =>
    deps.store.rotateKey({ oldKeyId: old.id, newKeyHash: keyHash, newKey: record, graceSeconds, events }),
  );
  if (result === undefined) return { kind: 'outcome_unknown', keyId: record.id };
  if (result.kind !== 'rotated') return result;
  await recordChange(deps, {
    action: 'key.rotate',
    actor,
    accountId: old.accountId,
    keyId: old.id,
    keyPrefix: old.prefix,
    detail: `newKeyId=${result.newKey.id} newKeyPrefix=${result.newKey.prefix} graceSeconds=${graceSeconds}`,
  });
  return { kind: 'rotated', key, newKey: result.newKey, oldKey: result.oldKey };
}

/** Null when the key does not exist. */
export async function updateKey(deps: ActionDeps, actor: AuditActor, keyId: string, patch: KeyPatch): Promise<StoredKey | null> {
  const key = await deps.store.updateKey(keyId, patch);
  if (!key) return null;
  await recordChange(deps, {
    action: 'key.update',
    actor,
    accountId: key.accountId,
    keyId: key.id,
    keyPrefix: key.prefix,
    detail: `changes=${Object.keys(patch).join(',')}${restrictionsDetail(patch.restrictions)}`,
  });
  return key;
}

/**
 * Null when the key does not exist. Idempotent; each call is audited. The `key.revoked` event (and with `exposure`,
 * src/keys/key-exposure.ts, a `key.exposed` one) goes out only from the call that revoked it, in the same step.
 */
export async function revokeKey(deps: ActionDeps, actor: AuditActor, keyId: string, exposure?: KeyExposure): Promise<StoredKey | null> {
  const nowMs = deps.clock.now();
  const before = await deps.store.getKey(keyId);
  if (!before) return null;
  const events = [keyRevokedEvent(before, actor, nowMs)];
  if (exposure) events.push(keyExposedEvent(before, exposure, { kind: 'revoked' }, nowMs));
  const key = await deps.store.revokeKey(keyId, nowMs, events);
  if (!key) return null;
  await recordChange(deps, { action: 'key.revoke', actor, accountId: key.accountId, keyId: key.id, keyPrefix: key.prefix });
  return key;
}

/** Undefined when the store cannot tell whether the write was applied (logged here; the caller explains it). */
async function unlessOutcomeUnknown<T>(deps: ActionDeps, write: () => Promise<T>): Promise<T | undefined> {
  try {
    return await write();
  } catch (error) {
    if (!(error instanceof StoreOutcomeUnknownError)) throw error;
    deps.logger.error({ event: 'admin', detail: error.message }, 'key write failed: outcome unknown');
    return undefined;
  }
}

/**
 * What restrictions a change set, for the audit trail: they say what a key may do, and none of it is secret, so the
 * entry shows the new value (or `none`), not only that it changed.
 */
export function restrictionsDetail(restrictions: KeyRestrictions | null | undefined): string {
  if (restrictions === undefined) return '';
  return ` restrictions=${restrictions === null ? 'none' : restrictionsText(restrictions)}`;
}
