import { compareCodeUnits } from '../ordering';
import {
  DELIVERY_LOG_MAX_ENTRIES,
  type CreateEndpointResult,
  type DeliveryAttempt,
  type EndpointPatch,
  type OutboxEvent,
  type SettleRequest,
  type WebhookDelivery,
  type WebhookEndpoint,
  type WebhookEndpointConfig,
  type WebhookStore,
} from '../../ports/webhook-store';
import { CorruptRecordError } from '../../ports/store';
import { redisKeys } from './redis-keys';
import { REDIS_SCRIPTS as scripts } from './scripts';
import type { ScriptedRedis } from './redis-client';

/** Outbox entries one claim fans out: a few ms of Redis time at most, whatever piled up. */
const FAN_OUT_BATCH = 100;
/** Accounts a sweep asks about at once (two reads each, pipelined on the connection). */
const SWEEP_BATCH = 500;

/** The JSON array the scripts append (lua/lib/outbox.lua); '' for none. */
export function eventsJson(events: readonly OutboxEvent[] | undefined): string {
  return events && events.length > 0 ? JSON.stringify(events) : '';
}

/**
 * Webhooks on Redis: everything of an account under its tag (redis-keys.ts),
 * and the work list of accounts in a slot of its own. `call` runs a command
 * with the store's deadline and error mapping.
 */
export class RedisWebhookStore implements WebhookStore {
  constructor(
    private readonly redis: ScriptedRedis,
    private readonly call: <T>(command: () => Promise<T>) => Promise<T>,
  ) {}

  /**
   * After a script was given `events` for the account: the dispatcher's work list (another slot, so after the script),
   * if the outbox has any. A script appends nothing for an account without endpoints (lua/lib/outbox.lua), which then
   * costs the dispatcher no claim; an outbox emptied meanwhile was fanned out by a claim of an account on the list
   * already. A failure here must not fail the change, which is made: the dispatcher's periodic sweep finds the events.
   */
  async noticeEvents(accountId: string, events: readonly OutboxEvent[] | undefined): Promise<void> {
    if (!events || events.length === 0) return;
    const notice = async () => {
      if ((await this.redis.xlen(redisKeys.webhookOutbox(accountId))) > 0) await this.redis.sadd(redisKeys.webhookAccounts(), accountId);
    };
    await this.call(notice).catch(() => undefined);
  }

  /** After the usage script: its reply's third element counts the credit events it appended (lua/apply-usage.lua). */
  async noticeAppended(accountId: string, usageReply: unknown): Promise<void> {
    if (!Array.isArray(usageReply) || usageReply[0] !== 'applied' || !(Number(usageReply[2]) > 0)) return;
    await this.call(() => this.redis.sadd(redisKeys.webhookAccounts(), accountId)).catch(() => undefined);
  }

  async getCreditLowThreshold(accountId: string): Promise<number | null> {
    const text = await this.call(() => this.redis.hget(redisKeys.webhookEndpointState(accountId), 'creditLowThreshold'));
    return text === null ? null : Number(text);
  }

  async setCreditLowThreshold(accountId: string, minorUnits: number | null): Promise<void> {
    const state = redisKeys.webhookEndpointState(accountId);
    if (minorUnits === null) await this.call(() => this.redis.hdel(state, 'creditLowThreshold'));
    else await this.call(() => this.redis.hset(state, 'creditLowThreshold', String(minorUnits)));
  }

  async createEndpoint(endpoint: WebhookEndpointConfig, maxEndpoints: number): Promise<CreateEndpointResult> {
    const reply = await this.call(() =>
      this.redis.gwaWebhookCreate(
        redisKeys.account(endpoint.accountId),
        redisKeys.webhookEndpoints(endpoint.accountId),
        endpoint.id,
        JSON.stringify(endpoint),
        String(maxEndpoints),
      ),
    );
    return scripts.gwaWebhookCreate.parseReply(reply);
  }

  async listEndpoints(accountId: string): Promise<WebhookEndpoint[]> {
    const [configs, state] = await Promise.all([
      this.call(() => this.redis.hgetall(redisKeys.webhookEndpoints(accountId))),
      this.call(() => this.redis.hgetall(redisKeys.webhookEndpointState(accountId))),
    ]);
    return Object.values(configs)
      .map((json) => endpointOf(json, state[`failures:${parseConfig(json).id}`], state[`disabled:${parseConfig(json).id}`]))
      .sort((a, b) => compareCodeUnits(a.createdAt, b.createdAt) || compareCodeUnits(a.id, b.id));
  }

  async getEndpoint(accountId: string, endpointId: string): Promise<WebhookEndpoint | null> {
    const json = await this.call(() => this.redis.hget(redisKeys.webhookEndpoints(accountId), endpointId));
    if (json === null) return null;
    const [failures, disabled] = await this.call(() =>
      this.redis.hmget(redisKeys.webhookEndpointState(accountId), `failures:${endpointId}`, `disabled:${endpointId}`),
    );
    return endpointOf(json, failures ?? undefined, disabled ?? undefined);
  }

  async updateEndpoint(accountId: string, endpointId: string, patch: EndpointPatch): Promise<WebhookEndpoint | null> {
    for (;;) {
      const read = await this.call(() => this.redis.hget(redisKeys.webhookEndpoints(accountId), endpointId));
      if (read === null) return null;
      const config: Record<string, unknown> = { ...parseConfig(read) };
      if (patch.url !== undefined) config['url'] = patch.url;
      if (patch.events !== undefined) config['events'] = [...patch.events];
      if (patch.secret !== undefined) config['secret'] = patch.secret;
      if (patch.description === null) delete config['description'];
      else if (patch.description !== undefined) config['description'] = patch.description;
      const enabled = patch.enabled === undefined ? '' : patch.enabled ? 'enable' : 'disable';
      const reply = await this.call(() =>
        this.redis.gwaWebhookUpdate(
          redisKeys.webhookEndpoints(accountId),
          redisKeys.webhookEndpointState(accountId),
          endpointId,
          read,
          JSON.stringify(config),
          enabled,
          patch.disabledReason ?? 'disabled',
        ),
      );
      const outcome = scripts.gwaWebhookUpdate.parseReply(reply);
      if (outcome === 'not_found') return null;
      // 'conflict': another change came between the read and the write; made again over that one.
      if (outcome === 'changed') return this.getEndpoint(accountId, endpointId);
    }
  }

  async deleteEndpoint(accountId: string, endpointId: string): Promise<boolean> {
    const removed = await this.call(() => this.redis.hdel(redisKeys.webhookEndpoints(accountId), endpointId));
    // Its deliveries are dropped when next claimed (the claim finds no endpoint).
    await this.call(() => this.redis.hdel(redisKeys.webhookEndpointState(accountId), `disabled:${endpointId}`, `failures:${endpointId}`));
    await this.call(() => this.redis.del(redisKeys.webhookLog(accountId, endpointId)));
    return removed === 1;
  }

  async appendEvents(accountId: string, events: readonly OutboxEvent[]): Promise<void> {
    await this.call(() =>
      this.redis.gwaWebhookAppend(redisKeys.webhookOutbox(accountId), redisKeys.webhookEndpoints(accountId), eventsJson(events)),
    );
    await this.noticeEvents(accountId, events);
  }

  async readDeliveryLog(accountId: string, endpointId: string, limit: number): Promise<DeliveryAttempt[]> {
    const entries = await this.call(() => this.redis.lrange(redisKeys.webhookLog(accountId, endpointId), 0, limit - 1));
    return entries.map((json) => JSON.parse(json) as DeliveryAttempt);
  }

  async accountsWithWork(limit: number): Promise<string[]> {
    return this.call(() => this.redis.srandmember(redisKeys.webhookAccounts(), limit));
  }

  async claimDeliveries(accountId: string, nowMs: number, leaseMs: number, max: number): Promise<WebhookDelivery[] | 'idle'> {
    const reply = await this.call(() =>
      this.redis.gwaWebhookClaim(
        redisKeys.webhookOutbox(accountId),
        redisKeys.webhookEndpoints(accountId),
        redisKeys.webhookEndpointState(accountId),
        redisKeys.webhookDeliveries(accountId),
        redisKeys.webhookDue(accountId),
        String(nowMs),
        String(leaseMs),
        String(max),
        String(FAN_OUT_BATCH),
      ),
    );
    const rows = scripts.gwaWebhookClaim.parseReply(reply);
    if (rows === 'idle') return rows;
    return rows.map(([id, deliveryJson, endpointJson, failures]) => {
      const delivery = JSON.parse(deliveryJson) as { eventId: string; type: string; payload: string; attempts: number };
      return {
        id,
        accountId,
        endpoint: endpointOf(endpointJson, failures, undefined),
        eventId: delivery.eventId,
        eventType: delivery.type,
        payload: delivery.payload,
        attempts: delivery.attempts,
      };
    });
  }

  async settleDelivery(request: SettleRequest): Promise<{ endpointDisabled: boolean }> {
    const { delivery, settlement } = request;
    const { accountId } = delivery;
    const next = { eventId: delivery.eventId, type: delivery.eventType, payload: delivery.payload, endpointId: delivery.endpoint.id };
    const reply = await this.call(() =>
      this.redis.gwaWebhookSettle(
        redisKeys.webhookDeliveries(accountId),
        redisKeys.webhookDue(accountId),
        redisKeys.webhookEndpoints(accountId),
        redisKeys.webhookEndpointState(accountId),
        redisKeys.webhookLog(accountId, delivery.endpoint.id),
        redisKeys.webhookOutbox(accountId),
        delivery.id,
        delivery.endpoint.id,
        settlement.kind,
        settlement.kind === 'retry' ? String(settlement.atMs) : '0',
        JSON.stringify({ ...next, attempts: delivery.attempts + 1 }),
        JSON.stringify(request.attempt),
        String(DELIVERY_LOG_MAX_ENTRIES),
        String(request.disableAfterFailures),
        request.disabledReason,
        eventsJson([request.disabledEvent]),
      ),
    );
    const endpointDisabled = scripts.gwaWebhookSettle.parseReply(reply);
    if (endpointDisabled) await this.noticeEvents(accountId, [request.disabledEvent]);
    return { endpointDisabled };
  }

  async releaseIdleAccount(accountId: string): Promise<void> {
    await this.call(() => this.redis.srem(redisKeys.webhookAccounts(), accountId));
    // A change that appended after the claim saw the account idle put it back itself, unless its notice came before
    // this removal: then its event is in the outbox now, and the account goes back on the list.
    if (await this.hasWork(accountId)) await this.call(() => this.redis.sadd(redisKeys.webhookAccounts(), accountId));
  }

  async sweepAccountsWithWork(cursor: string): Promise<string> {
    const [next, batch] = await this.call(() => this.redis.sscan(redisKeys.accounts(), cursor, 'COUNT', SWEEP_BATCH));
    const working = await Promise.all(batch.map((accountId) => this.hasWork(accountId)));
    const found = batch.filter((_, i) => working[i]);
    if (found.length > 0) await this.call(() => this.redis.sadd(redisKeys.webhookAccounts(), ...found));
    return next;
  }

  private async hasWork(accountId: string): Promise<boolean> {
    const [outbox, due] = await Promise.all([
      this.call(() => this.redis.xlen(redisKeys.webhookOutbox(accountId))),
      this.call(() => this.redis.zcard(redisKeys.webhookDue(accountId))),
    ]);
    return outbox > 0 || due > 0;
  }
}

function parseConfig(json: string): WebhookEndpointConfig {
  try {
    return JSON.parse(json) as WebhookEndpointConfig;
  } catch {
    throw new CorruptRecordError('webhook endpoint', 'not JSON');
  }
}

function endpointOf(json: string, failures: string | undefined, disabledReason: string | undefined): WebhookEndpoint {
  const config = parseConfig(json);
  return {
    ...config,
    enabled: disabledReason === undefined,
    ...(disabledReason !== undefined ? { disabledReason } : {}),
    consecutiveFailures: failures === undefined ? 0 : Number(failures),
  };
}
