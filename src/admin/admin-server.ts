import Fastify, { type FastifyInstance } from 'fastify';
import type { Clock } from '../domain/clock';
import type { Logger } from '../logging/logger';
import { StoreUnavailableError, type AdminStore } from '../store/store';
import { sendAdminError } from './admin-errors';
import { adminTokenMatches } from './admin-token';
import type { MetricsSource } from '../cluster/worker-pool';
import type { HealthMonitor } from '../health/health-monitor';
import { registerDashboard } from './dashboard/register-dashboard';
import { registerAccountRoutes } from './routes/accounts';
import { registerAuditRoutes } from './routes/audit';
import { registerHealthRoutes } from './routes/health';
import { registerMetricsRoute } from './routes/metrics';
import { registerKeyRoutes } from './routes/keys';

export interface AdminServerDeps {
  store: AdminStore;
  clock: Clock;
  logger: Logger;
  /** Absent: every call is refused with 503 admin_disabled. */
  adminToken?: string;
  /** Drives /readyz; absent means always ready (tests of the API alone). */
  health?: HealthMonitor;
  /** Served at /metrics for Prometheus: a prom-client Registry, or in a worker the sum over all workers. */
  metrics?: MetricsSource;
  /** How long a wrong admin token waits for its 401. */
  authFailureDelayMs?: number;
}

const DEFAULT_AUTH_FAILURE_DELAY_MS = 500;

declare module 'fastify' {
  interface FastifyContextConfig {
    /** A route that holds no data and needs no admin token (health, the dashboard page). */
    public?: boolean;
  }
}

/**
 * The admin API: accounts (billing, limit overrides, prepaid credit) and keys.
 * Every route needs the admin token. Bodies are checked by admin-schemas.ts;
 * answers are built by admin-views.ts.
 */
export function buildAdminServer(deps: AdminServerDeps): FastifyInstance {
  // Fastify's own request logging is off: create-key responses carry a full key.
  const app = Fastify({ logger: false, bodyLimit: 64 * 1024 });

  app.addHook('onRequest', async (request, reply) => {
    // Health probes and the dashboard page and assets hold no data; the dashboard's API calls carry the token.
    if (request.routeOptions.config?.public === true) return undefined;
    if (!deps.adminToken) {
      return sendAdminError(reply, 503, 'admin_disabled', 'The admin API is disabled because ADMIN_TOKEN is not set.');
    }
    if (!adminTokenMatches(request.headers.authorization, deps.adminToken)) {
      // Each wrong guess costs the guesser time (the comparison itself is constant-time).
      await new Promise((resolve) => setTimeout(resolve, deps.authFailureDelayMs ?? DEFAULT_AUTH_FAILURE_DELAY_MS));
      return sendAdminError(reply, 401, 'unauthorized', "Send the admin token as 'Authorization: Bearer <ADMIN_TOKEN>'.");
    }
    return undefined;
  });

  app.setErrorHandler((error: { statusCode?: number; code?: string; message: string }, request, reply) => {
    if (error instanceof StoreUnavailableError) {
      deps.logger.error({ event: 'admin', detail: error.message }, 'admin call failed: store unavailable');
      // A write that timed out may still have reached the store: credit adjustments are not idempotent.
      const message =
        request.method === 'GET'
          ? 'The key store is unavailable. Retry shortly.'
          : 'The key store is unavailable; the change may or may not have been applied. Read the record before retrying.';
      return sendAdminError(reply, 503, 'store_unavailable', message);
    }
    if (error.statusCode && error.statusCode < 500) {
      const code = error.code?.startsWith('FST_ERR_CTP') ? 'invalid_json' : 'invalid_field';
      return sendAdminError(reply, error.statusCode, code, `Bad request: ${error.message}`);
    }
    deps.logger.error({ event: 'admin', err: error }, 'admin call failed');
    return sendAdminError(reply, 500, 'internal_error', 'Internal error.');
  });

  app.setNotFoundHandler((request, reply) =>
    sendAdminError(reply, 404, 'not_found', `No admin route ${request.method} ${request.url.split('?')[0]}.`),
  );

  registerAccountRoutes(app, deps);
  registerKeyRoutes(app, deps);
  registerDashboard(app);
  registerAuditRoutes(app, deps);
  registerHealthRoutes(app, deps.health);
  if (deps.metrics) registerMetricsRoute(app, deps.metrics);

  return app;
}
