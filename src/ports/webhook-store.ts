/**
 * Account webhooks as the store keeps them (src/webhooks/ builds and sends
 * them). Every event a change causes is appended to the account's outbox by
 * the store in the same atomic step as the change (the key and member writes
 * of AdminStore take `events`); the dispatcher fans the outbox out into one
 * delivery per subscribed endpoint and leases each delivery while it sends
 * it, so every replica may dispatch and an event is delivered at least once.
 */

/** An event as it waits in the outbox: its id and type, and the JSON body that is signed and sent as it is. */
export interface OutboxEvent {
  /** `msg_…`: the `webhook-id` header, the same on every attempt (receivers deduplicate on it). */
  readonly id: string;
  readonly type: string;
  readonly payload: string;
  /** Only this endpoint receives it, subscribed or not (a test-send). */
  readonly endpointId?: string;
}

/** What an endpoint is configured to receive; the store keeps it as it is given. */
export interface WebhookEndpointConfig {
  readonly id: string;
  readonly accountId: string;
  readonly url: string;
  /** Event types it receives; never empty. */
  readonly events: readonly string[];
  /** `whsec_…` (Standard Webhooks): the signing secret. */
  readonly secret: string;
  readonly createdAt: string;
  readonly description?: string;
}

export interface WebhookEndpoint extends WebhookEndpointConfig {
  readonly enabled: boolean;
  /** Why it is disabled: `disabled by <who>`, or the automatic disabling after failures. */
  readonly disabledReason?: string;
  /** Failed attempts since the last successful one. */
  readonly consecutiveFailures: number;
}

export interface EndpointPatch {
  url?: string;
  events?: readonly string[];
  description?: string | null;
  secret?: string;
  /** True enables (and clears the failure count); false disables with `disabledReason`. */
  enabled?: boolean;
  disabledReason?: string;
}

/** One event on its way to one endpoint. */
export interface WebhookDelivery {
  /** `<eventId>:<endpointId>` */
  readonly id: string;
  readonly accountId: string;
  readonly endpoint: WebhookEndpoint;
  readonly eventId: string;
  readonly eventType: string;
  readonly payload: string;
  /** Attempts made before this one. */
  readonly attempts: number;
}

/** One attempt, as the owner reads it in the endpoint's delivery log. */
export interface DeliveryAttempt {
  readonly eventId: string;
  readonly eventType: string;
  /** 1 for the first attempt. */
  readonly attempt: number;
  /** ISO-8601. */
  readonly at: string;
  readonly outcome: 'delivered' | 'failed';
  /** The receiver's HTTP status, when it answered. */
  readonly status?: number;
  /** Why it failed, in a few words (never the response body). */
  readonly error?: string;
  readonly durationMs: number;
  /** When the next attempt is due (ISO-8601), or absent: delivered, or given up. */
  readonly nextAttemptAt?: string;
}

export type DeliverySettlement =
  | { kind: 'delivered' }
  | { kind: 'retry'; atMs: number }
  /** The last attempt failed: the event is dropped for this endpoint. */
  | { kind: 'given_up' };

export interface SettleRequest {
  delivery: WebhookDelivery;
  settlement: DeliverySettlement;
  attempt: DeliveryAttempt;
  /** The endpoint is disabled when its failures reach this many in a row. */
  disableAfterFailures: number;
  disabledReason: string;
  /** Appended to the outbox, in the same step, when this attempt disables the endpoint. */
  disabledEvent: OutboxEvent;
}

export type CreateEndpointResult = 'created' | 'account_not_found' | { kind: 'endpoint_limit_reached'; limit: number };

export interface WebhookStore {
  createEndpoint(endpoint: WebhookEndpointConfig, maxEndpoints: number): Promise<CreateEndpointResult>;
  /** Ordered by creation, then id. */
  listEndpoints(accountId: string): Promise<WebhookEndpoint[]>;
  getEndpoint(accountId: string, endpointId: string): Promise<WebhookEndpoint | null>;
  updateEndpoint(accountId: string, endpointId: string, patch: EndpointPatch): Promise<WebhookEndpoint | null>;
  /** False when there was none. Its pending deliveries and log go with it. */
  deleteEndpoint(accountId: string, endpointId: string): Promise<boolean>;
  /** Events that no stored change causes (a test-send). */
  appendEvents(accountId: string, events: readonly OutboxEvent[]): Promise<void>;
  /** Newest first. */
  readDeliveryLog(accountId: string, endpointId: string, limit: number): Promise<DeliveryAttempt[]>;
  /** Accounts that may have events or deliveries waiting (a hint: claimDeliveries tells). */
  accountsWithWork(limit: number): Promise<string[]>;
  /**
   * Fans the account's outbox out into deliveries (one per enabled endpoint
   * subscribed to the event, or the one it names), drops deliveries to
   * endpoints deleted or disabled since, and leases up to `max` due ones to
   * the caller until `nowMs + leaseMs`: another replica takes them only after
   * that. 'idle' when the account has nothing left, due or not.
   */
  claimDeliveries(accountId: string, nowMs: number, leaseMs: number, max: number): Promise<WebhookDelivery[] | 'idle'>;
  /** Records the attempt in the endpoint's log and settles the delivery; true when it disabled the endpoint. */
  settleDelivery(request: SettleRequest): Promise<{ endpointDisabled: boolean }>;
  /** Takes an idle account off the work list unless work arrived meanwhile. */
  releaseIdleAccount(accountId: string): Promise<void>;
  /**
   * The prepaid balance below which the account's usage appends a `credit.low` event (in the usage step, once per
   * crossing); null: none.
   */
  getCreditLowThreshold(accountId: string): Promise<number | null>;
  setCreditLowThreshold(accountId: string, minorUnits: number | null): Promise<void>;
  /**
   * Puts the accounts that have events or deliveries waiting on the work list (after a crash between a change and its
   * notice), a slice of the accounts at a time: from `cursor` ('0' to begin), answering where the next slice starts
   * ('0' once every account was looked at).
   */
  sweepAccountsWithWork(cursor: string): Promise<string>;
}

/** Attempts kept in each endpoint's delivery log: the newest ones. */
export const DELIVERY_LOG_MAX_ENTRIES = 100;
