import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { FastifyInstance } from 'fastify';
import { buildAdminServer } from './admin/admin-server';
import { memberDirectory } from './accounts/member-actions';
import { registerCustomerApi } from './customer/customer-api';
import { buildCustomerServer } from './customer/customer-server';
import { GitHubSigningKeys } from './customer/github-signing-keys';
import { registerSecretScanningAlerts } from './customer/secret-scanning-alerts';
import type { MembershipLookup } from './accounts/customer-identity';
import { systemClock, type Clock } from './platform/clock';
import { startAuthorizationServer } from './check/authorization-server';
import { AUTHORIZATION_SERVICE_NAME } from './check/proto-loading';
import { HealthMonitor } from './platform/health-monitor';
import { EventLoopLag } from './platform/event-loop-lag';
import { Metrics } from './platform/metrics';
import { CheckAdmission } from './check/check-admission';
import type { Logger } from './platform/logger';
import type { Settings } from './platform/settings';
import { clusterMetricsSource } from './platform/worker-pool';
import { CachedKeyIndex } from './check/cached-key-index';
import { RestrictionsCache } from './check/restrictions-cache';
import { LastUsedRecorder } from './keys/last-used-recorder';
import { modelMetricLabel, pricingOf } from './metering/pricing';
import { usageLedgerSink } from './metering/usage-ledger-sink';
import { openSessionStorage } from './store/open-session-storage';
import { openStore } from './store/open-store';
import { openOperatorTokens } from './store/open-operator-tokens';
import { releasesLateHolds, type Store } from './ports/store';
import { UsageRecorder } from './metering/usage-recorder';
import type { SessionStorage } from './http/sign-in/session-storage';
import type { MeteredResponseSink } from './metering/metered-response';
import { WebhookDispatcher } from './webhooks/webhook-dispatcher';
import { systemResolver, type ResolveHost } from './webhooks/endpoint-targets';

/** See stopUsage in startApp. */
const FINAL_USAGE_FLUSH_MS = 2_000;

export interface RunningApp {
  grpcPort: number;
  adminPort: number;
  customerPort: number;
  store: Store;
  health: HealthMonitor;
  /** Where metered usage goes: records are applied to their accounts (exactly once) and sent to the usage stream. */
  usage: UsageRecorder;
  /**
   * Graceful drain: NOT_SERVING at once, keep answering for the drain delay,
   * stop accepting and let in-flight Checks finish (bounded), then apply the
   * buffered usage records (until SHUTDOWN_TIMEOUT_MS), flush last-used times
   * and close Redis.
   */
  close(): Promise<void>;
}

export interface AppOptions {
  logger: Logger;
  clock?: Clock;
  /** Tests pass a store they prepared; otherwise it follows the settings. */
  store?: Store;
  /** Set in a GRPC_WORKERS worker: /metrics then reports the sum over all workers. */
  clusterWorker?: boolean;
  /** The customer dashboard's members and API: by default the store's members and the customer API; tests may pass their own. */
  customer?: {
    memberships?: MembershipLookup;
    registerApi?: (app: FastifyInstance) => void | Promise<void>;
  };
  /** Where metered answers go; by default the usage ledger (usageLedgerSink). Tests may pass their own. */
  meteredResponses?: MeteredResponseSink;
  /** Tests only: how webhook hosts are resolved (no real DNS). */
  resolveWebhookHost?: ResolveHost;
}

/** Wires store, gRPC Check and ext_proc server and admin API from one settings object. */
export async function startApp(settings: Settings, options: AppOptions): Promise<RunningApp> {
  const { logger } = options;
  const clock = options.clock ?? systemClock;
  const store = options.store ?? (await openStore(settings));
  if (store.description.startsWith('in-memory'))
    logger.warn({ store: store.description }, 'using the embedded in-memory store: it keeps nothing');
  else logger.info({ store: store.description }, 'key store connected');
  if (releasesLateHolds(store)) {
    store.reportLateHoldReleaseFailuresTo((error) =>
      logger.warn({ err: error, event: 'hold_release_failed' }, 'check: the hold of a refused Check lapses instead'),
    );
  }
  // Opened before anything starts, so a Redis that refuses it leaves nothing running but the store to close.
  const operatorTokens = await openOperatorTokens(settings).catch(async (error: unknown) => {
    await store.close();
    throw error;
  });
  const operatorSessions = settings.operatorSignIn
    ? await openSessionStorage(settings, clock, 'operator').catch(async (error: unknown) => {
        await Promise.all([operatorTokens.close(), store.close()]);
        throw error;
      })
    : undefined;
  if (!settings.adminToken) logger.info('the break-glass ADMIN_TOKEN is off: the admin API takes operator tokens and sign-ins only');
  if (!settings.customerSignIn) logger.warn('OIDC_ISSUER_URL is not set: the customer dashboard says sign-in is not configured');
  const unmetered = settings.pipeline.routeTable.enabled;
  if (unmetered.length > 0) {
    logger.warn(
      { event: 'unmetered_routes_enabled', routes: unmetered },
      `enabledRoutes lets ${unmetered.join(', ')} through: their usage is not metered, so their answers are not charged`,
    );
  }

  const metrics = new Metrics({ usageModelLabel: (model) => modelMetricLabel(settings.pipeline.pricing, model) });
  const checkPath = metrics.instrumentCheckPath(store, store);
  metrics.watchDecisionClock(store);
  // Deadlines come from the gRPC transport, which sets them on the system clock (Date.now() + grpc-timeout), not the domain's clock.
  const admission = new CheckAdmission(settings.maxChecksInFlight, systemClock);
  metrics.watchChecksInFlight(() => admission.checksInFlight);
  const loopLag = new EventLoopLag();
  loopLag.start();
  const lastUsed = new LastUsedRecorder(store, clock, logger, settings.lastUsedFlushMs);
  lastUsed.start();
  const webhooks = new WebhookDispatcher({
    store: store.webhooks,
    clock,
    logger,
    settings: settings.webhooks,
    ...(options.resolveWebhookHost ? { resolve: options.resolveWebhookHost } : {}),
  });
  webhooks.start();
  const webhookTargets = {
    policy: { allowPrivate: settings.webhooks.allowPrivateTargets, loopbackHttp: settings.webhooks.loopbackHttp },
    resolve: options.resolveWebhookHost ?? systemResolver,
  };
  const usage = new UsageRecorder(store, settings.pipeline.defaultTokenBudgets, logger, metrics, {
    maxBuffered: settings.usage.bufferMaxRecords,
  });
  metrics.watchUsageBuffer(() => usage.buffered);
  // Hashed once: every usage record names the price table that priced it.
  const pricing = settings.pipeline.pricing ? pricingOf(settings.pipeline.pricing, settings.currency) : undefined;
  // The hash is what records name: logged once so an operator can tell which config file priced them.
  if (pricing)
    logger.info({ event: 'price_table', priceTableHash: pricing.tableHash, entries: pricing.table.models.length }, 'prices loaded');
  /**
   * Buffered usage is applied within the shutdown timeout, counted from the
   * start of the close (so the whole close stays within it, and within the
   * orchestrator's grace period), but always with at least
   * FINAL_USAGE_FLUSH_MS: the records of the last streams, cut when the
   * server closes, come last. What is left then is logged record by record.
   */
  const stopUsage = (closeStartedMs: number) =>
    usage.stop(Math.max(closeStartedMs + settings.shutdown.timeoutMs, Date.now() + FINAL_USAGE_FLUSH_MS));
  // Loaded only when configured: with tracing off, no part of the SDK is in the process.
  const tracing = settings.tracing ? (await import('./platform/tracing')).startTracing(settings.tracing, logger) : undefined;
  const checkSpans = tracing
    ? (await import('./check/check-tracing')).checkTracing(tracing, store.description.startsWith('in-memory') ? undefined : 'redis')
    : undefined;
  const meterSpans = tracing ? (await import('./metering/meter-tracing')).meterTracing(tracing) : undefined;
  const keyIndex = new CachedKeyIndex(checkPath.keyIndex, {
    maxEntries: settings.keyCache.maxEntries,
    negativeTtlMs: settings.keyCache.negativeTtlMs,
    maxNegativeEntries: 100_000,
    onLookup: (outcome) => metrics.observeKeyCache(outcome),
  });
  const grpcServer = await startAuthorizationServer(
    {
      settings: settings.pipeline,
      keyIndex,
      authorizer: checkPath.authorizer,
      // Restricted keys only, in the key cache's entries.
      restrictions: new RestrictionsCache(keyIndex),
      metrics,
      onStoreIdentityMismatch: () => metrics.observeStoreIdentityMismatch(),
      // An allow nobody read (Envoy gave up on the Check): its hold goes, once for this attempt, so a retried Check of
      // the same request still has its own released by the answer.
      onUndeliveredHold: (identity, held, requestId) =>
        void store
          .releaseHold(identity.accountId, identity.keyId, requestId, held, `undelivered-${randomUUID()}`)
          .catch((error: unknown) =>
            logger.warn({ err: error, event: 'hold_release_failed' }, 'check: the hold of an answer nobody read lapses instead'),
          ),
      admission,
      loopLag,
      clock,
      logger,
      storeFailureMode: settings.storeFailureMode,
      lastUsed,
      decisionLogSample: settings.decisionLogSample,
      ...(checkSpans ? { tracing: checkSpans } : {}),
      extProc: {
        // Each metered answer becomes a usage record, priced by the price table, applied once per x-request-id.
        sink:
          options.meteredResponses ??
          usageLedgerSink(usage, pricing, store, (error) =>
            logger.warn({ err: error, event: 'hold_release_failed' }, 'usage: the hold of an answer that cost nothing lapses instead'),
          ),
        clock,
        logger,
        maxStreams: settings.extProcMaxStreams,
        metrics: metrics.extProc,
        ...(meterSpans ? { tracing: meterSpans } : {}),
      },
    },
    {
      host: settings.grpcBindAddress,
      port: settings.grpcPort,
      maxConnectionAgeMs: settings.grpcMaxConnectionAgeMs,
      maxConcurrentStreams: settings.grpcMaxConcurrentStreams,
      shutdownTimeoutMs: settings.shutdown.timeoutMs,
    },
  );
  const health = new HealthMonitor(() => store.ping(), grpcServer.health, logger, {
    ...settings.health,
    services: ['', AUTHORIZATION_SERVICE_NAME],
  });
  await health.start();
  let customer: FastifyInstance | undefined;
  const admin = buildAdminServer({
    operatorTokens,
    ...(settings.operatorSignIn && operatorSessions
      ? { operatorSignIn: { settings: settings.operatorSignIn, sessions: operatorSessions } }
      : {}),
    store,
    clock,
    logger,
    health,
    metrics: options.clusterWorker ? clusterMetricsSource(metrics.registry) : metrics.registry,
    authMetrics: metrics,
    authLimits: settings.adminAuthLimits,
    currency: settings.currency,
    webhookTargets,
    ...(settings.adminToken ? { adminToken: settings.adminToken } : {}),
    // The customer listener has an API (and its description) only with customer sign-in configured.
    customerApiDocument: () => (customer?.hasDecorator('swagger') ? customer.swagger() : undefined),
  });
  let sessions: SessionStorage | undefined;
  // Off unless its key set is configured (docs/operations/when-a-key-leaks.md).
  const secretScanningKeys = settings.secretScanningKeys;
  try {
    await admin.listen({ host: settings.adminBindAddress, port: settings.adminPort });
    sessions = await openSessionStorage(settings, clock);
    customer = await buildCustomerServer({
      ...(settings.customerSignIn ? { signIn: settings.customerSignIn } : {}),
      sessions,
      // Sign-in binds pending invitations and lists the person's accounts; the API checks membership on every call.
      memberships: options.customer?.memberships ?? memberDirectory({ store, clock, logger }),
      clock,
      logger,
      registerApi:
        options.customer?.registerApi ??
        ((app) =>
          registerCustomerApi(app, {
            store,
            clock,
            logger,
            defaultPlan: settings.pipeline.defaultPlan,
            defaultMaxActiveKeys: settings.defaultMaxActiveKeys,
            countsFlushIntervalMs: settings.lastUsedFlushMs,
            currency: settings.currency,
            targets: webhookTargets,
          })),
      ...(secretScanningKeys
        ? {
            registerSignedEndpoints: (app: FastifyInstance) =>
              registerSecretScanningAlerts(app, {
                signingKeys: new GitHubSigningKeys(secretScanningKeys, clock, logger),
                // The store's own index, not Check's cache: a key is found however recently it was created.
                exposure: { store, clock, logger, keyIndex: store },
                logger,
              }),
          }
        : {}),
    });
    await customer.listen({ host: settings.customerBindAddress, port: settings.customerPort });
  } catch (error) {
    health.shuttingDown();
    await Promise.all([grpcServer.close(), admin.close(), customer?.close()]);
    await sessions?.close();
    await operatorTokens.close();
    await operatorSessions?.close();
    loopLag.stop();
    await webhooks.stop();
    await stopUsage(Date.now());
    await lastUsed.stop();
    await tracing?.shutdown();
    await store.close();
    throw error;
  }
  const adminPort = listeningPort(admin, settings.adminPort);
  const customerPort = listeningPort(customer, settings.customerPort);
  metrics.watchHttp2BudgetClosures(grpcServer.budgetClosures);
  // Where to reach each listener, spelled as a client would (an IPv6 address in brackets), for whoever started it.
  const at = (host: string, port: number) => (host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`);
  logger.info(
    {
      grpcPort: grpcServer.port,
      adminPort,
      customerPort,
      grpc: at(settings.grpcBindAddress, grpcServer.port),
      admin: `http://${at(settings.adminBindAddress, adminPort)}`,
      customer: `http://${at(settings.customerBindAddress, customerPort)}`,
      node: process.versions.node,
    },
    'gateway-authz listening',
  );

  return {
    grpcPort: grpcServer.port,
    adminPort,
    customerPort,
    store,
    health,
    usage,
    async close() {
      health.shuttingDown();
      if (settings.shutdown.drainDelayMs > 0) {
        logger.info({ event: 'shutdown', drainDelayMs: settings.shutdown.drainDelayMs }, 'draining: not serving, still answering');
        await new Promise((resolve) => setTimeout(resolve, settings.shutdown.drainDelayMs));
      }
      const closing = performance.now();
      // SHUTDOWN_TIMEOUT_MS bounds the whole close, Redis included: a Redis that does not answer (paused, cut off)
      // would otherwise hold each last-used chunk and each QUIT for REDIS_ADMIN_TIMEOUT_MS, one after the other.
      const timeLeftMs = () => Math.max(0, settings.shutdown.timeoutMs - (performance.now() - closing));
      const closeStartedMs = Date.now();
      await Promise.all([grpcServer.close(), admin.close(), customer.close()]);
      loopLag.stop();
      await webhooks.stop();
      // After the servers: nothing hands over records any more.
      await stopUsage(closeStartedMs);
      await lastUsed.stop(timeLeftMs());
      // The spans of the last Checks are exported, within the same bound; an unreachable collector only loses them.
      if (tracing) await settlesWithin(tracing.shutdown(), timeLeftMs());
      if (
        !(await settlesWithin(
          Promise.all([sessions.close(), operatorTokens.close(), operatorSessions?.close(), store.close()]),
          timeLeftMs(),
        ))
      )
        logger.warn({ event: 'shutdown', timeoutMs: settings.shutdown.timeoutMs }, 'Redis connections not closed in time; exiting anyway');
      logger.info({ event: 'shutdown' }, 'stopped');
      logger.flush?.();
    },
  };
}

/** True when `work` settled within `ms`; false when the time ran out first (the work is left to finish or fail on its own). */
async function settlesWithin(work: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([
    work.then(
      () => true,
      () => true,
    ),
    new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms))),
  ]);
  clearTimeout(timer);
  return outcome;
}

function listeningPort(server: FastifyInstance, configured: number): number {
  const address = server.server.address();
  return typeof address === 'object' && address ? address.port : configured;
}
