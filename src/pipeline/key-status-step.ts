import type { Clock } from '../domain/clock';
import type { DenyReason } from '../domain/deny-reasons';
import type { StoredKey } from '../store/store';

const NEW_KEY_HINT = "Create a new key in the dashboard's API Keys section.";

/** Whether a key that exists may be used now. */
export function checkKeyStatus(
  key: StoredKey,
  clock: Clock,
): { ok: true } | { ok: false; reason: DenyReason; message: string } {
  if (key.status === 'revoked') {
    return { ok: false, reason: 'key_revoked', message: `The API key ${key.prefix}… has been revoked. ${NEW_KEY_HINT}` };
  }
  if (key.expiresAt !== undefined && Date.parse(key.expiresAt) <= clock.now()) {
    return { ok: false, reason: 'key_expired', message: `The API key ${key.prefix}… has expired. ${NEW_KEY_HINT}` };
  }
  return { ok: true };
}
