// @ts-check
/**
 * How both dashboard pages name keys and grace periods, and order key lists: one wording for the operator and the
 * customer.
 */

/** The grace periods the regenerate dialogs offer, in seconds, as the notices name them. */
/** @type {Readonly<Record<string, string>>} */
export const GRACE_LABELS = { 0: 'immediately', 3600: '1 hour', 86400: '24 hours', 604800: '7 days' };

/** @param {{ prefix: string }} key */
export function displayPrefix(key) {
  return `${key.prefix}…`;
}

/** @param {{ prefix: string, name: string }} key */
export function describeKey(key) {
  return `“${key.name}” (${displayPrefix(key)})`;
}

/**
 * Newest first, by creation time.
 * @template {{ createdAt: string }} K
 * @param {K[]} keys
 * @returns {K[]}
 */
export function newestFirst(keys) {
  return keys.slice().sort((a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0));
}

/**
 * What the notice says happened to the old key of a regeneration.
 * @param {{ prefix: string }} oldKey
 * @param {number} graceSeconds
 */
export function oldKeyFate(oldKey, graceSeconds) {
  return graceSeconds === 0
    ? `The old key ${displayPrefix(oldKey)} was revoked.`
    : `The old key ${displayPrefix(oldKey)} keeps working for ${GRACE_LABELS[graceSeconds] ?? `${graceSeconds} seconds`}.`;
}
