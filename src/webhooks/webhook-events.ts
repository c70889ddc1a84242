import { createHash } from 'node:crypto';
import { randomBase62 } from '../keys/base62';
import type { StoredKey } from '../keys/key-records';
import type { AuditActor } from '../accounts/customer-identity';
import type { Member } from '../accounts/members';
import type { OutboxEvent } from '../ports/webhook-store';
import type { TokenBudget } from '../accounts/limits/token-budgets';

/**
 * The events an account's endpoints may subscribe to, and the bodies sent for
 * them (docs/concepts/webhooks.md). A body is the Standard Webhooks shape,
 * `{type, timestamp, data}`, built when the change is made and stored with it
 * in the outbox: every attempt sends (and signs) the same bytes.
 */
export const WEBHOOK_EVENT_TYPES = [
  'key.created',
  'key.rotated',
  'key.revoked',
  'key.exposed',
  'member.added',
  'member.removed',
  'credit.low',
  'credit.exhausted',
  'budget.reached',
  'endpoint.disabled',
] as const;

export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** Sent by the test-send button to the one endpoint it is pressed for, subscribed or not. */
export const TEST_EVENT_TYPE = 'webhook.test';

/** What was seen where, when a key was reported exposed (src/keys/key-exposure.ts). */
export interface KeyExposure {
  /** Where the key was found, e.g. the URL of a public commit. */
  url?: string;
  /** Who reported it, e.g. `github_secret_scanning`. */
  source: string;
}

function event(type: string, accountId: string, nowMs: number, data: Record<string, unknown>, endpointId?: string): OutboxEvent {
  const payload = JSON.stringify({ type, timestamp: new Date(nowMs).toISOString(), data: { account_id: accountId, ...data } });
  return { id: `msg_${randomBase62(24)}`, type, payload, ...(endpointId !== undefined ? { endpointId } : {}) };
}

/** The key as events show it: never the key or its hash. */
function keyView(key: StoredKey): Record<string, unknown> {
  return { id: key.id, prefix: key.prefix, name: key.name, environment: key.environment, status: key.status };
}

function actorView(actor: AuditActor): Record<string, unknown> {
  return actor.kind === 'operator' ? { kind: 'operator' } : { kind: 'member', issuer: actor.issuer, subject: actor.subject };
}

export function keyCreatedEvent(key: StoredKey, actor: AuditActor, nowMs: number): OutboxEvent {
  return event('key.created', key.accountId, nowMs, { key: keyView(key), actor: actorView(actor) });
}

/** `oldKey` as it is after the rotation (revoked now, or at `revoke_at`). */
export function keyRotatedEvent(oldKey: StoredKey, newKey: StoredKey, graceSeconds: number, actor: AuditActor, nowMs: number) {
  return event('key.rotated', oldKey.accountId, nowMs, {
    key: keyView(oldKey),
    new_key: keyView(newKey),
    grace_seconds: graceSeconds,
    actor: actorView(actor),
  });
}

export function keyRevokedEvent(key: StoredKey, actor: AuditActor, nowMs: number): OutboxEvent {
  return event('key.revoked', key.accountId, nowMs, { key: { ...keyView(key), status: 'revoked' }, actor: actorView(actor) });
}

/**
 * `action` says what was done to the key: `revoked`, `rotated` (with the new key's id), or `none` with the reason
 * `already_revoked` (a key revoked before the report: nothing to do, but its owner learns it is public).
 */
export function keyExposedEvent(
  key: StoredKey,
  exposure: KeyExposure,
  action: { kind: 'revoked' } | { kind: 'rotated'; newKeyId: string; graceSeconds: number } | { kind: 'none'; reason: 'already_revoked' },
  nowMs: number,
): OutboxEvent {
  return event('key.exposed', key.accountId, nowMs, {
    key: keyView(key),
    exposure: { source: exposure.source, ...(exposure.url !== undefined ? { url: exposure.url } : {}) },
    action:
      action.kind === 'rotated' ? { kind: 'rotated', new_key_id: action.newKeyId, grace_seconds: action.graceSeconds } : { ...action },
  });
}

/** The member as events show it: its role and who it is (an invitation shows the invited email). */
function memberView(member: Member): Record<string, unknown> {
  const principal = member.principal;
  return {
    id: member.id,
    role: member.role,
    ...(principal.kind === 'invitation' ? { invited_email: principal.email } : { issuer: principal.issuer, subject: principal.subject }),
  };
}

export function memberAddedEvent(member: Member, actor: AuditActor, nowMs: number): OutboxEvent {
  return event('member.added', member.accountId, nowMs, { member: memberView(member), actor: actorView(actor) });
}

export function memberRemovedEvent(member: Member, actor: AuditActor, nowMs: number): OutboxEvent {
  return event('member.removed', member.accountId, nowMs, { member: memberView(member), actor: actorView(actor) });
}

export function endpointDisabledEvent(
  accountId: string,
  endpoint: { id: string; url: string },
  reason: string,
  nowMs: number,
): OutboxEvent {
  return event('endpoint.disabled', accountId, nowMs, { endpoint: { id: endpoint.id, url: endpoint.url }, reason });
}

/**
 * A prepaid balance's crossing, as the usage step appends it (the Redis store's lua/apply-usage.lua writes the same
 * text): `credit.low` when it falls below the account's threshold, `credit.exhausted` when it reaches zero. The id
 * comes from the account, the usage record's request id and the type, so one record never sends the event twice.
 */
export function creditEvent(
  type: 'credit.low' | 'credit.exhausted',
  accountId: string,
  requestId: string,
  nowMs: number,
  creditBalance: number,
  threshold?: number,
): OutboxEvent {
  const id = `msg_${createHash('sha1').update(`${accountId} ${requestId} ${type}`).digest('hex').slice(0, 24)}`;
  const data = { account_id: accountId, credit_balance: creditBalance, ...(threshold !== undefined ? { threshold } : {}) };
  return { id, type, payload: JSON.stringify({ type, timestamp: new Date(nowMs).toISOString(), data }) };
}

/**
 * A monthly spend cap reached by a usage record (`scope` the account's cap, or the key's), as the usage step appends
 * it (lua/apply-usage.lua writes the same text); the id as creditEvent's, with the scope.
 */
export function budgetReachedEvent(
  accountId: string,
  requestId: string,
  nowMs: number,
  scope: { kind: 'account' } | { kind: 'key'; keyId: string },
  monthlySpendCap: number,
  monthSpend: number,
): OutboxEvent {
  const type = 'budget.reached';
  const suffix = scope.kind === 'account' ? 1 : 2;
  const id = `msg_${createHash('sha1').update(`${accountId} ${requestId} ${type} ${suffix}`).digest('hex').slice(0, 24)}`;
  const data = {
    account_id: accountId,
    budget: 'monthly_spend_cap',
    scope: scope.kind,
    ...(scope.kind === 'key' ? { key_id: scope.keyId } : {}),
    monthly_spend_cap: monthlySpendCap,
    month_spend: monthSpend,
  };
  return { id, type, payload: JSON.stringify({ type, timestamp: new Date(nowMs).toISOString(), data }) };
}

/**
 * A token budget exhausted by a usage record: not one whole token left, so the Check refuses the key's next request
 * (`scope` the key's budget, with the key's prefix while its record exists, or the account's). Appended by the usage
 * step as lua/apply-usage.lua writes it, at most once per budget per window length; the id as creditEvent's, with the
 * scope and the window.
 */
export function tokenBudgetReachedEvent(
  accountId: string,
  requestId: string,
  nowMs: number,
  scope: { kind: 'account' } | { kind: 'key'; keyId: string; keyPrefix?: string },
  budget: TokenBudget,
): OutboxEvent {
  const type = 'budget.reached';
  const suffix = `${scope.kind === 'key' ? 1 : 2}:${budget.windowSeconds}`;
  const id = `msg_${createHash('sha1').update(`${accountId} ${requestId} ${type} ${suffix}`).digest('hex').slice(0, 24)}`;
  const data = {
    account_id: accountId,
    budget: 'token_budget',
    scope: scope.kind,
    ...(scope.kind === 'key' ? { key_id: scope.keyId, ...(scope.keyPrefix !== undefined ? { key_prefix: scope.keyPrefix } : {}) } : {}),
    tokens: budget.tokens,
    window_seconds: budget.windowSeconds,
  };
  return { id, type, payload: JSON.stringify({ type, timestamp: new Date(nowMs).toISOString(), data }) };
}

/** The credit events of a prepaid balance that went from `before` to `after` (integer minor units). */
export function creditCrossings(
  accountId: string,
  requestId: string,
  nowMs: number,
  before: number,
  after: number,
  threshold: number | null,
): OutboxEvent[] {
  const events: OutboxEvent[] = [];
  if (threshold !== null && before >= threshold && after < threshold)
    events.push(creditEvent('credit.low', accountId, requestId, nowMs, after, threshold));
  if (before > 0 && after <= 0) events.push(creditEvent('credit.exhausted', accountId, requestId, nowMs, after));
  return events;
}

export function testEvent(accountId: string, endpointId: string, nowMs: number): OutboxEvent {
  return event(
    TEST_EVENT_TYPE,
    accountId,
    nowMs,
    { endpoint_id: endpointId, message: 'A test event, sent from the dashboard or API.' },
    endpointId,
  );
}
