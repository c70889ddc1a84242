import { operatorAuditActor, type AuditActor } from '../accounts/customer-identity';
import type { ActionDeps } from '../accounts/action-deps';
import { recordChange } from '../accounts/audit-trail';
import type { KeyIndex } from '../check/ports';
import { CUSTOMER_KEY_PATTERN, hashCustomerKey, parseCustomerKey } from './customer-key';
import { revokeKey, rotateKey } from './key-actions';
import type { ExposedKeyAction, StoredKey } from './key-records';
import { keyExposedEvent, type KeyExposure } from '../webhooks/webhook-events';

/**
 * What happens when a key of ours is reported as published (GitHub's secret
 * scanning: docs/operations/when-a-key-leaks.md). The key is recognised
 * offline by its format and checksum, looked up by its hash, and, while it
 * still works, revoked at once or (by its account's `exposedKeyAction`)
 * rotated with a short grace, through the same key actions as a person's
 * revoke and rotate. Every report of a key of ours is audited as
 * `key.exposed`, naming where it was found, and sent to the account's
 * webhooks as key.exposed, a key revoked before the report included.
 */

/** What is done with an exposed key of an account that chose nothing (Account.exposedKeyAction). */
export const DEFAULT_EXPOSED_KEY_ACTION: ExposedKeyAction = 'revoke';

/**
 * How long an exposed key keeps working when its account chose `rotate`: time to deploy a replacement, not to
 * leave a published key usable for a day. Scrapers find public keys within minutes, which is why revoke is the default.
 */
export const EXPOSED_KEY_GRACE_SECONDS = 3_600;

/** One reported token, as the scanner sent it (every field but the token is the scanner's own text). */
export interface KeyExposureReport {
  token: string;
  /** The scanner's name for the pattern that matched. */
  type: string;
  /** Where it was found (a public URL; may be empty). */
  url: string;
  /** What kind of place: content, commit, issue_comment, npm, … */
  source: string;
  /** Who reported it, for the audit trail. */
  reporter: 'github';
}

/**
 * What was done about one report. The scanner is told only `label`: a key we issued, live or not, is a true
 * positive; anything else a false positive.
 */
export type ExposureOutcome =
  | { label: 'true_positive'; handled: 'revoked' | 'rotated' | 'already_revoked' }
  | { label: 'false_positive'; handled: 'unknown_key' | 'not_our_format' };

export interface KeyExposureDeps extends ActionDeps {
  /** The store's own index (no cache in front): a key created a moment ago is found. */
  keyIndex: KeyIndex;
}

/** Audit details are `name=value` pairs split at spaces; the URL is the scanner's text, so it is bounded and cleaned. */
const MAX_AUDITED_URL_LENGTH = 512;

/**
 * The one entry point for a reported token: recognise, look up, act, audit, and tell onKeyExposed. The token is
 * never logged or stored; only the key's id and display prefix are. Store errors propagate: nothing is answered
 * for the report, and the scanner sends it again (revoking twice is harmless).
 */
export async function handleExposedKey(deps: KeyExposureDeps, report: KeyExposureReport): Promise<ExposureOutcome> {
  if (!parseCustomerKey(report.token).ok) return { label: 'false_positive', handled: 'not_our_format' };
  const ids = await deps.keyIndex.resolveKeyHash(hashCustomerKey(report.token));
  const key = ids ? await deps.store.getKey(ids.keyId) : null;
  if (!key) return { label: 'false_positive', handled: 'unknown_key' };
  const { handled, successorKeyId } = key.status === 'revoked' ? await alreadyRevoked(deps, key, report) : await disable(deps, key, report);
  const url = auditedText(report.url);
  await recordChange(deps, {
    action: 'key.exposed',
    actor: reporterActor(report.reporter),
    accountId: key.accountId,
    keyId: key.id,
    keyPrefix: key.prefix,
    // The URL last: a reader of the details takes everything after `url=` as the URL.
    detail: `reporter=${report.reporter} source=${auditedText(report.source) || 'unknown'} handled=${handled}${successorKeyId ? ` successorKeyId=${successorKeyId}` : ''} url=${url || 'none'}`,
  });
  return { label: 'true_positive', handled };
}

/**
 * Revoke, or rotate with EXPOSED_KEY_GRACE_SECONDS when the account asks for it. A rotation the store refuses (the
 * key is expired, already rotated, or the account is at its active-key cap) or whose outcome is unknown ends in a
 * revocation: an exposed key is never left working without an end.
 */
async function disable(
  deps: KeyExposureDeps,
  key: StoredKey,
  report: KeyExposureReport,
): Promise<{ handled: 'revoked' | 'rotated'; successorKeyId?: string }> {
  const account = await deps.store.getAccount(key.accountId);
  if ((account?.exposedKeyAction ?? DEFAULT_EXPOSED_KEY_ACTION) === 'rotate' && !key.revokeAt) {
    const rotated = await rotateKey(deps, reporterActor(report.reporter), key, EXPOSED_KEY_GRACE_SECONDS, exposureOf(report));
    // The successor's secret is dropped here: nobody asked for it, and it is shown to no one.
    if (rotated.kind === 'rotated') return { handled: 'rotated', successorKeyId: rotated.newKey.id };
  }
  await revokeKey(deps, reporterActor(report.reporter), key.id, exposureOf(report));
  return { handled: 'revoked' };
}

/**
 * A key revoked before the report: nothing to change, but its owner hears key.exposed (action `none`), since a key
 * of theirs is public (its name, or a deployment that still holds it, may need attention). No change, so no outbox
 * step to share: the event alone.
 */
async function alreadyRevoked(
  deps: KeyExposureDeps,
  key: StoredKey,
  report: KeyExposureReport,
): Promise<{ handled: 'already_revoked'; successorKeyId?: undefined }> {
  const event = keyExposedEvent(key, exposureOf(report), { kind: 'none', reason: 'already_revoked' }, deps.clock.now());
  await deps.store.webhooks.appendEvents(key.accountId, [event]);
  return { handled: 'already_revoked' };
}

/**
 * What the key.exposed webhook says of a report, written with the revocation or rotation in one step: the program and
 * the kind of place (`github_secret_scanning:content`), and the cleaned URL.
 */
function exposureOf(report: KeyExposureReport): KeyExposure {
  const url = auditedText(report.url);
  return { source: `${report.reporter}_secret_scanning:${auditedText(report.source) || 'unknown'}`, ...(url ? { url } : {}) };
}

/** The audit names the program whose verified alert made the change, not an operator. */
function reporterActor(reporter: KeyExposureReport['reporter']): AuditActor {
  return operatorAuditActor({ kind: 'secret-scanning', reporter });
}

/** The scanner's free text as an audit detail value: printable, without spaces, without anything key-shaped, bounded. */
function auditedText(text: string): string {
  return text
    .replace(CUSTOMER_KEY_PATTERN, '[key]')
    .replace(/[^\x21-\x7e]/g, (character) => percentEncoded(character))
    .slice(0, MAX_AUDITED_URL_LENGTH);
}

function percentEncoded(character: string): string {
  return [...Buffer.from(character, 'utf8')].map((byte) => `%${byte.toString(16).toUpperCase().padStart(2, '0')}`).join('');
}
