import { randomBytes } from 'node:crypto';
import { randomBase62 } from '../keys/base62';
import type { AuditActor } from '../accounts/customer-identity';
import type { ActionDeps } from '../accounts/action-deps';
import { recordChange } from '../accounts/audit-trail';
import type { DeliveryAttempt, EndpointPatch, WebhookEndpoint } from '../ports/webhook-store';
import { DELIVERY_LOG_MAX_ENTRIES } from '../ports/webhook-store';
import { checkedAddress, hostOf, TargetRefusedError, urlProblem, type ResolveHost, type TargetPolicy } from './endpoint-targets';
import { testEvent, WEBHOOK_EVENT_TYPES } from './webhook-events';

/**
 * Webhook endpoints as owners (customer API) and the operator (admin API,
 * CLI) manage them. Every change is audited with who made it; the secret is
 * in the answer of the creation and of a rotation only, never in a view, a
 * log or an audit entry.
 */

/** Endpoints per account: each event is sent to each, so this bounds the work one change causes. */
export const MAX_ENDPOINTS_PER_ACCOUNT = 10;

/** Random bytes in a secret: Standard Webhooks takes 24 to 64 (base64 after `whsec_`). */
const SECRET_BYTES = 32;

export interface WebhookActionDeps extends ActionDeps {
  targets: { policy: TargetPolicy; resolve: ResolveHost };
}

/** An endpoint as the APIs show it: everything but the secret. */
export type EndpointView = Omit<WebhookEndpoint, 'secret'>;

export function endpointView(endpoint: WebhookEndpoint): EndpointView {
  const { secret: _secret, ...view } = endpoint;
  return view;
}

export function newSecret(): string {
  return `whsec_${randomBytes(SECRET_BYTES).toString('base64')}`;
}

export interface EndpointRequest {
  url: string;
  events: readonly string[];
  description?: string;
}

export type EndpointRefusal = { kind: 'invalid'; problem: string };

/** Why the URL and events may not be saved, or undefined. The host's addresses are checked now, and again on every delivery. */
export async function endpointProblem(deps: WebhookActionDeps, request: Partial<EndpointRequest>): Promise<string | undefined> {
  if (request.events !== undefined) {
    if (request.events.length === 0) return 'events: subscribe to at least one event';
    const unknown = request.events.filter((type) => !(WEBHOOK_EVENT_TYPES as readonly string[]).includes(type));
    if (unknown.length > 0) return `events: unknown event ${unknown.join(', ')} (known: ${WEBHOOK_EVENT_TYPES.join(', ')})`;
  }
  if (request.url === undefined) return undefined;
  const problem = urlProblem(request.url, deps.targets.policy);
  if (problem) return `url: ${problem}`;
  try {
    await checkedAddress(hostOf(new URL(request.url)), deps.targets.policy, deps.targets.resolve);
  } catch (error) {
    // A name that does not resolve yet may be set up later; one that resolves inside is refused.
    if (error instanceof TargetRefusedError) return `url: ${error.message}`;
  }
  return undefined;
}

export type CreateEndpointOutcome =
  | { kind: 'created'; endpoint: EndpointView; secret: string }
  | EndpointRefusal
  | { kind: 'account_not_found' }
  | { kind: 'endpoint_limit_reached'; limit: number };

export async function createEndpoint(
  deps: WebhookActionDeps,
  actor: AuditActor,
  accountId: string,
  request: EndpointRequest,
): Promise<CreateEndpointOutcome> {
  const problem = await endpointProblem(deps, request);
  if (problem) return { kind: 'invalid', problem };
  const secret = newSecret();
  const config = {
    id: `whe_${randomBase62(16)}`,
    accountId,
    url: request.url,
    events: [...new Set(request.events)],
    secret,
    createdAt: new Date(deps.clock.now()).toISOString(),
    ...(request.description ? { description: request.description } : {}),
  };
  const result = await deps.store.webhooks.createEndpoint(config, MAX_ENDPOINTS_PER_ACCOUNT);
  if (result === 'account_not_found') return { kind: result };
  if (result !== 'created') return result;
  await recordChange(deps, {
    action: 'webhook.create',
    actor,
    accountId,
    endpointId: config.id,
    detail: `events=${config.events.join(',')}`,
  });
  const endpoint = await deps.store.webhooks.getEndpoint(accountId, config.id);
  return { kind: 'created', endpoint: endpointView(endpoint!), secret };
}

export type UpdateEndpointOutcome = { kind: 'updated'; endpoint: EndpointView } | EndpointRefusal | { kind: 'not_found' };

export async function updateEndpoint(
  deps: WebhookActionDeps,
  actor: AuditActor,
  accountId: string,
  endpointId: string,
  change: { url?: string; events?: readonly string[]; description?: string | null; enabled?: boolean },
): Promise<UpdateEndpointOutcome> {
  const problem = await endpointProblem(deps, {
    ...(change.url !== undefined ? { url: change.url } : {}),
    ...(change.events ? { events: change.events } : {}),
  });
  if (problem) return { kind: 'invalid', problem };
  const patch: EndpointPatch = { ...change };
  if (change.events) patch.events = [...new Set(change.events)];
  if (change.enabled === false) patch.disabledReason = actor.kind === 'operator' ? 'disabled by the operator' : 'disabled by an owner';
  const endpoint = await deps.store.webhooks.updateEndpoint(accountId, endpointId, patch);
  if (!endpoint) return { kind: 'not_found' };
  // The new state where it is short and no secret (a URL may carry a token in its query, so it is named, not shown).
  const detail = [
    `changes=${Object.keys(change).join(',')}`,
    ...(change.enabled !== undefined ? [`enabled=${change.enabled}`] : []),
    ...(patch.events ? [`events=${patch.events.join(',')}`] : []),
  ].join(' ');
  await recordChange(deps, { action: 'webhook.update', actor, accountId, endpointId, detail });
  return { kind: 'updated', endpoint: endpointView(endpoint) };
}

/** The new secret signs every attempt from now on, retries of earlier events included. */
export async function rotateEndpointSecret(
  deps: WebhookActionDeps,
  actor: AuditActor,
  accountId: string,
  endpointId: string,
): Promise<{ kind: 'rotated'; endpoint: EndpointView; secret: string } | { kind: 'not_found' }> {
  const secret = newSecret();
  const endpoint = await deps.store.webhooks.updateEndpoint(accountId, endpointId, { secret });
  if (!endpoint) return { kind: 'not_found' };
  await recordChange(deps, { action: 'webhook.rotate_secret', actor, accountId, endpointId });
  return { kind: 'rotated', endpoint: endpointView(endpoint), secret };
}

export async function deleteEndpoint(deps: WebhookActionDeps, actor: AuditActor, accountId: string, endpointId: string): Promise<boolean> {
  const deleted = await deps.store.webhooks.deleteEndpoint(accountId, endpointId);
  if (deleted) await recordChange(deps, { action: 'webhook.delete', actor, accountId, endpointId });
  return deleted;
}

/** A `webhook.test` event to this endpoint alone, through the outbox like any other (so it is signed, retried and logged). */
export async function sendTestEvent(
  deps: WebhookActionDeps,
  accountId: string,
  endpointId: string,
): Promise<{ kind: 'queued'; eventId: string } | { kind: 'not_found' } | { kind: 'disabled' }> {
  const endpoint = await deps.store.webhooks.getEndpoint(accountId, endpointId);
  if (!endpoint) return { kind: 'not_found' };
  if (!endpoint.enabled) return { kind: 'disabled' };
  const event = testEvent(accountId, endpointId, deps.clock.now());
  await deps.store.webhooks.appendEvents(accountId, [event]);
  return { kind: 'queued', eventId: event.id };
}

/** Null when the account does not exist. */
export async function setCreditLowThreshold(
  deps: WebhookActionDeps,
  actor: AuditActor,
  accountId: string,
  minorUnits: number | null,
): Promise<{ creditLowThreshold: number | null } | null> {
  if (!(await deps.store.getAccount(accountId))) return null;
  await deps.store.webhooks.setCreditLowThreshold(accountId, minorUnits);
  await recordChange(deps, { action: 'webhook.update', actor, accountId, detail: `creditLowThreshold=${minorUnits ?? 'none'}` });
  return { creditLowThreshold: minorUnits };
}

export async function readDeliveryLog(deps: WebhookActionDeps, accountId: string, endpointId: string): Promise<DeliveryAttempt[] | null> {
  if (!(await deps.store.webhooks.getEndpoint(accountId, endpointId))) return null;
  return deps.store.webhooks.readDeliveryLog(accountId, endpointId, DELIVERY_LOG_MAX_ENTRIES);
}
