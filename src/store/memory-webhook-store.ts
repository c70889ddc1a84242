import { compareCodeUnits } from './ordering';
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
} from '../ports/webhook-store';

interface MemoryDelivery {
  eventId: string;
  eventType: string;
  payload: string;
  endpointId: string;
  attempts: number;
  dueAtMs: number;
}

interface AccountWebhooks {
  endpoints: Map<string, { config: WebhookEndpointConfig; disabledReason?: string; consecutiveFailures: number }>;
  outbox: OutboxEvent[];
  deliveries: Map<string, MemoryDelivery>;
  logs: Map<string, DeliveryAttempt[]>;
}

/**
 * The in-memory store's webhooks: the same rules as the Redis store's
 * scripts (lua/webhook-*.lua), each call one synchronous step. The memory
 * store appends a change's events with appendEventsNow in the same step as
 * the change.
 */
export class MemoryWebhookStore implements WebhookStore {
  private readonly accounts = new Map<string, AccountWebhooks>();
  private readonly creditLowThresholds = new Map<string, number>();

  constructor(private readonly accountExists: (accountId: string) => boolean) {}

  /**
   * Synchronous, for the memory store's own writes (the same step as the change). An account without endpoints gets
   * none, as lua/lib/outbox.lua appends none: an endpoint added later starts from the events after it.
   */
  appendEventsNow(accountId: string, events: readonly OutboxEvent[] | undefined): void {
    if (!events || events.length === 0 || !this.hasEndpoints(accountId)) return;
    this.of(accountId).outbox.push(...events.map((event) => ({ ...event })));
  }

  /** Synchronous, for the memory store's usage step: whether a token budget reached is worth its notice at all. */
  hasEndpoints(accountId: string): boolean {
    return (this.accounts.get(accountId)?.endpoints.size ?? 0) > 0;
  }

  async createEndpoint(endpoint: WebhookEndpointConfig, maxEndpoints: number): Promise<CreateEndpointResult> {
    if (!this.accountExists(endpoint.accountId)) return 'account_not_found';
    const account = this.of(endpoint.accountId);
    if (account.endpoints.has(endpoint.id)) return 'created';
    if (account.endpoints.size >= maxEndpoints) return { kind: 'endpoint_limit_reached', limit: maxEndpoints };
    account.endpoints.set(endpoint.id, { config: structuredClone(endpoint), consecutiveFailures: 0 });
    return 'created';
  }

  async listEndpoints(accountId: string): Promise<WebhookEndpoint[]> {
    const account = this.accounts.get(accountId);
    if (!account) return [];
    return [...account.endpoints.keys()]
      .map((id) => this.view(account, id)!)
      .sort((a, b) => compareCodeUnits(a.createdAt, b.createdAt) || compareCodeUnits(a.id, b.id));
  }

  async getEndpoint(accountId: string, endpointId: string): Promise<WebhookEndpoint | null> {
    const account = this.accounts.get(accountId);
    return account ? this.view(account, endpointId) : null;
  }

  async updateEndpoint(accountId: string, endpointId: string, patch: EndpointPatch): Promise<WebhookEndpoint | null> {
    const account = this.accounts.get(accountId);
    const stored = account?.endpoints.get(endpointId);
    if (!account || !stored) return null;
    const config: { -readonly [K in keyof WebhookEndpointConfig]: WebhookEndpointConfig[K] } = { ...stored.config };
    if (patch.url !== undefined) config.url = patch.url;
    if (patch.events !== undefined) config.events = [...patch.events];
    if (patch.secret !== undefined) config.secret = patch.secret;
    if (patch.description === null) delete config.description;
    else if (patch.description !== undefined) config.description = patch.description;
    stored.config = config;
    if (patch.enabled === true) {
      delete stored.disabledReason;
      stored.consecutiveFailures = 0;
    } else if (patch.enabled === false) stored.disabledReason = patch.disabledReason ?? 'disabled';
    return this.view(account, endpointId);
  }

  async deleteEndpoint(accountId: string, endpointId: string): Promise<boolean> {
    const account = this.accounts.get(accountId);
    if (!account?.endpoints.delete(endpointId)) return false;
    account.logs.delete(endpointId);
    for (const [id, delivery] of account.deliveries) if (delivery.endpointId === endpointId) account.deliveries.delete(id);
    return true;
  }

  async appendEvents(accountId: string, events: readonly OutboxEvent[]): Promise<void> {
    this.appendEventsNow(accountId, events);
  }

  async readDeliveryLog(accountId: string, endpointId: string, limit: number): Promise<DeliveryAttempt[]> {
    return structuredClone((this.accounts.get(accountId)?.logs.get(endpointId) ?? []).slice(0, limit));
  }

  async accountsWithWork(limit: number): Promise<string[]> {
    return [...this.accounts.entries()]
      .filter(([, account]) => account.outbox.length > 0 || account.deliveries.size > 0)
      .map(([id]) => id)
      .slice(0, limit);
  }

  async claimDeliveries(accountId: string, nowMs: number, leaseMs: number, max: number): Promise<WebhookDelivery[] | 'idle'> {
    const account = this.accounts.get(accountId);
    if (!account) return 'idle';
    for (const event of account.outbox.splice(0)) {
      for (const [endpointId, endpoint] of account.endpoints) {
        const receives =
          event.endpointId === undefined
            ? endpoint.disabledReason === undefined && endpoint.config.events.includes(event.type)
            : event.endpointId === endpointId;
        if (!receives) continue;
        account.deliveries.set(`${event.id}:${endpointId}`, {
          eventId: event.id,
          eventType: event.type,
          payload: event.payload,
          endpointId,
          attempts: 0,
          dueAtMs: nowMs,
        });
      }
    }
    const claimed: WebhookDelivery[] = [];
    for (const [id, delivery] of account.deliveries) {
      if (claimed.length >= max) break;
      if (delivery.dueAtMs > nowMs) continue;
      const endpoint = this.view(account, delivery.endpointId);
      if (!endpoint || !endpoint.enabled) {
        account.deliveries.delete(id);
        continue;
      }
      delivery.dueAtMs = nowMs + leaseMs;
      const { eventId, eventType, payload, attempts } = delivery;
      claimed.push({ id, accountId, endpoint, eventId, eventType, payload, attempts });
    }
    return claimed.length === 0 && account.deliveries.size === 0 ? 'idle' : claimed;
  }

  async settleDelivery(request: SettleRequest): Promise<{ endpointDisabled: boolean }> {
    const { delivery, settlement } = request;
    const account = this.accounts.get(delivery.accountId);
    const endpoint = account?.endpoints.get(delivery.endpoint.id);
    if (!account || !endpoint) return { endpointDisabled: false };
    const log = account.logs.get(delivery.endpoint.id) ?? [];
    log.unshift(structuredClone(request.attempt));
    account.logs.set(delivery.endpoint.id, log.slice(0, DELIVERY_LOG_MAX_ENTRIES));
    const stored = account.deliveries.get(delivery.id);
    if (settlement.kind === 'retry' && stored) {
      stored.attempts = delivery.attempts + 1;
      stored.dueAtMs = settlement.atMs;
    } else account.deliveries.delete(delivery.id);
    if (settlement.kind === 'delivered') {
      endpoint.consecutiveFailures = 0;
      return { endpointDisabled: false };
    }
    endpoint.consecutiveFailures += 1;
    if (endpoint.disabledReason !== undefined || endpoint.consecutiveFailures < request.disableAfterFailures)
      return { endpointDisabled: false };
    endpoint.disabledReason = request.disabledReason;
    account.deliveries.delete(delivery.id);
    account.outbox.push({ ...request.disabledEvent });
    return { endpointDisabled: true };
  }

  async getCreditLowThreshold(accountId: string): Promise<number | null> {
    return this.creditLowThresholds.get(accountId) ?? null;
  }

  async setCreditLowThreshold(accountId: string, minorUnits: number | null): Promise<void> {
    if (minorUnits === null) this.creditLowThresholds.delete(accountId);
    else this.creditLowThresholds.set(accountId, minorUnits);
  }

  /** Synchronous, for the memory store's usage step. */
  creditLowThresholdNow(accountId: string): number | null {
    return this.creditLowThresholds.get(accountId) ?? null;
  }

  async releaseIdleAccount(): Promise<void> {}

  // One process: a change and its notice cannot be parted by a crash, so there is nothing to find.
  async sweepAccountsWithWork(): Promise<string> {
    return '0';
  }

  private of(accountId: string): AccountWebhooks {
    let account = this.accounts.get(accountId);
    if (!account) {
      account = { endpoints: new Map(), outbox: [], deliveries: new Map(), logs: new Map() };
      this.accounts.set(accountId, account);
    }
    return account;
  }

  private view(account: AccountWebhooks, endpointId: string): WebhookEndpoint | null {
    const stored = account.endpoints.get(endpointId);
    if (!stored) return null;
    return {
      ...structuredClone(stored.config),
      enabled: stored.disabledReason === undefined,
      ...(stored.disabledReason !== undefined ? { disabledReason: stored.disabledReason } : {}),
      consecutiveFailures: stored.consecutiveFailures,
    };
  }
}
