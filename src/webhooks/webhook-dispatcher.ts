import type { Clock } from '../platform/clock';
import type { Logger } from '../platform/logger';
import type { WebhookSettings } from '../platform/settings';
import type { DeliverySettlement, WebhookDelivery, WebhookStore } from '../ports/webhook-store';
import { endpointDisabledEvent } from './webhook-events';
import { sendWebhook, type DeliveryLimits } from './webhook-delivery';
import { systemResolver, type ResolveHost } from './endpoint-targets';

/** Accounts looked at per round, and deliveries leased per account per round: one slow account never holds up the rest for long. */
const ACCOUNTS_PER_ROUND = 100;
const DELIVERIES_PER_ACCOUNT = 10;
/**
 * A lease outlives the attempt it covers (bounded by the response timeout) by
 * this much, for the name lookup and the settling write: a replica that dies
 * mid-attempt leaves the delivery to another one after the lease.
 */
const LEASE_MARGIN_MS = 10_000;
/** How long a shutdown waits for the deliveries in flight (a small part of SHUTDOWN_TIMEOUT_MS's default). */
const STOP_WAIT_MS = 1_000;
/**
 * How often every account's outbox is looked at, besides the work list: an event whose notice was lost (Redis failed
 * between the change's script and the notice) waits at most this long.
 */
const SWEEP_INTERVAL_MS = 60_000;

/**
 * The pause before attempt `attemptsMade + 1`: retryBaseMs · 2^(attemptsMade − 1),
 * at most retryMaxDelayMs, with "equal jitter" (half of it fixed, half
 * random), so endpoints that failed together do not all retry together.
 */
export function retryDelayMs(attemptsMade: number, settings: WebhookSettings, random: () => number = Math.random): number {
  const full = Math.min(settings.retryMaxDelayMs, settings.retryBaseMs * 2 ** Math.min(attemptsMade - 1, 30));
  const half = Math.floor(full / 2);
  return full - half + Math.floor(random() * (half + 1));
}

export interface WebhookDispatcherOptions {
  store: WebhookStore;
  clock: Clock;
  logger: Logger;
  settings: WebhookSettings;
  /** Tests pass their own name resolution. */
  resolve?: ResolveHost;
}

/**
 * Delivers the accounts' webhook events: one per replica, each leasing the
 * deliveries it sends (the store's claimDeliveries), so replicas share the
 * work and a delivery whose replica died is taken up after its lease: every
 * event reaches every subscribed endpoint at least once, within maxAttempts.
 */
export class WebhookDispatcher {
  private timer: NodeJS.Timeout | undefined;
  private sweeper: NodeJS.Timeout | undefined;
  private round: Promise<void> | undefined;
  private stopped = false;
  private readonly limits: DeliveryLimits;

  constructor(private readonly options: WebhookDispatcherOptions) {
    const { settings } = options;
    this.limits = {
      policy: { allowPrivate: settings.allowPrivateTargets, loopbackHttp: settings.loopbackHttp },
      resolve: options.resolve ?? systemResolver,
      connectTimeoutMs: settings.connectTimeoutMs,
      responseTimeoutMs: settings.responseTimeoutMs,
    };
  }

  start(): void {
    // Work left off the list (a crash, or a failed notice, between a change's step and its notice) is found first,
    // over every account; after that one slice of the accounts a minute, so that the sweep costs Redis a bounded few
    // commands a second per replica however many accounts there are.
    this.round = this.sweepAll().then(() => this.schedule(0));
    this.sweeper = setInterval(() => void this.sweepSlice(), SWEEP_INTERVAL_MS);
    this.sweeper.unref();
  }

  private sweepCursor = '0';

  private async sweepAll(): Promise<void> {
    do await this.sweepSlice();
    while (this.sweepCursor !== '0' && !this.stopped);
  }

  private async sweepSlice(): Promise<void> {
    try {
      this.sweepCursor = await this.options.store.sweepAccountsWithWork(this.sweepCursor);
    } catch (error) {
      this.options.logger.warn({ event: 'webhooks', err: error }, 'webhooks: could not sweep for waiting events');
      this.sweepCursor = '0';
    }
  }

  /** Waits for the round in flight at most STOP_WAIT_MS: a delivery cut short is sent again after its lease. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    clearInterval(this.sweeper);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.round, new Promise((resolve) => (timer = setTimeout(resolve, STOP_WAIT_MS)))]);
    clearTimeout(timer);
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.round = this.runRound()
        .catch((error: unknown) => this.options.logger.warn({ event: 'webhooks', err: error }, 'webhooks: a round failed'))
        .finally(() => this.schedule(this.options.settings.pollIntervalMs));
    }, delayMs);
    this.timer.unref();
  }

  /** One pass over the accounts with work; public for tests. */
  async runRound(): Promise<void> {
    const { store, clock, settings } = this.options;
    const leaseMs = settings.responseTimeoutMs + LEASE_MARGIN_MS;
    for (const accountId of await store.accountsWithWork(ACCOUNTS_PER_ROUND)) {
      if (this.stopped) return;
      const claimed = await store.claimDeliveries(accountId, clock.now(), leaseMs, DELIVERIES_PER_ACCOUNT);
      if (claimed === 'idle') await store.releaseIdleAccount(accountId);
      else await Promise.all(claimed.map((delivery) => this.attempt(delivery)));
    }
  }

  private async attempt(delivery: WebhookDelivery): Promise<void> {
    const { store, clock, logger, settings } = this.options;
    const startedMs = clock.now();
    const started = performance.now();
    const result = await sendWebhook(delivery.endpoint, { id: delivery.eventId, payload: delivery.payload }, startedMs, this.limits);
    const durationMs = Math.round(performance.now() - started);
    const attemptsMade = delivery.attempts + 1;
    let settlement: DeliverySettlement;
    if (result.ok) settlement = { kind: 'delivered' };
    else if (attemptsMade >= settings.maxAttempts) settlement = { kind: 'given_up' };
    else settlement = { kind: 'retry', atMs: clock.now() + retryDelayMs(attemptsMade, settings) };
    const reason = `disabled after ${settings.disableAfterFailures} failed attempts in a row (last: ${result.error ?? 'failed'})`;
    const { endpointDisabled } = await store.settleDelivery({
      delivery,
      settlement,
      attempt: {
        eventId: delivery.eventId,
        eventType: delivery.eventType,
        attempt: attemptsMade,
        at: new Date(startedMs).toISOString(),
        outcome: result.ok ? 'delivered' : 'failed',
        ...(result.status !== undefined ? { status: result.status } : {}),
        ...(result.error !== undefined ? { error: result.error } : {}),
        durationMs,
        ...(settlement.kind === 'retry' ? { nextAttemptAt: new Date(settlement.atMs).toISOString() } : {}),
      },
      disableAfterFailures: settings.disableAfterFailures,
      disabledReason: reason,
      disabledEvent: endpointDisabledEvent(delivery.accountId, delivery.endpoint, reason, clock.now()),
    });
    const facts = { event: 'webhooks', accountId: delivery.accountId, endpointId: delivery.endpoint.id, eventId: delivery.eventId };
    if (!result.ok)
      logger.info({ ...facts, attempt: attemptsMade, error: result.error, settlement: settlement.kind }, 'webhook attempt failed');
    if (endpointDisabled) logger.warn({ ...facts, reason }, 'webhook endpoint disabled');
  }
}
