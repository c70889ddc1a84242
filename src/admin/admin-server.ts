import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { registerWebhookRoutes } from '../http/webhook-routes';
import { STRICT_TARGETS } from '../webhooks/endpoint-targets';
import { DEFAULT_ADMIN_AUTH_LIMITS, type AuthLimitKind } from './admin-auth-limits';
import { registerJsonBodyParser } from '../http/json-body';
import { registerApiDocument } from '../http/openapi';
import { StoreUnavailableError } from '../ports/store';
import { AdminAuthLimiter, clientAddressKey, DEFAULT_TRUSTED_FOR_MS, type AuthAdmission } from './admin-auth-limiter';
import type { AdminServerDeps } from './admin-deps';
import { sendAdminError } from './admin-errors';
import { adminTokenMatches, bearerTokenOf } from './admin-token';
import { actorOf, registerAuthorization } from './admin-authorization';
import { registerOperatorSignIn, registerSignInNotOffered } from './operator-sign-in';
import { hashOperatorToken, isWellFormedOperatorToken, operatorTokenIsLive, type OperatorTokenRecord } from '../operators/operator-token';
import { registerDashboard } from './register-dashboard';
import { registerAccountRoutes } from './routes/accounts';
import { registerApiDescriptionRoutes } from './routes/api-description';
import { registerAuditRoutes } from './routes/audit';
import { registerHealthRoutes } from './routes/health';
import { registerMetricsRoute } from './routes/metrics';
import { registerKeyRoutes } from './routes/keys';
import { registerMemberRoutes } from './routes/members';
import { registerUsageRoutes } from './routes/usage';
import { registerOperatorTokenRoutes } from './routes/operator-tokens';

export type { AdminServerDeps } from './admin-deps';

const DEFAULT_AUTH_FAILURE_DELAY_MS = 500;
const TRUSTED_HOURS = DEFAULT_TRUSTED_FOR_MS / 3_600_000;

/**
 * The admin API: accounts (billing, limit overrides, prepaid credit, active-key cap), keys and members.
 * Every route needs the admin token. Bodies are checked by admin-schemas.ts;
 * answers are built by admin-views.ts.
 */
export function buildAdminServer(deps: AdminServerDeps): FastifyInstance {
  // Fastify's own request logging is off: create-key responses carry a full key.
  const app = Fastify({ logger: false, bodyLimit: 64 * 1024 });
  const limiter = new AdminAuthLimiter(deps.authLimits ?? DEFAULT_ADMIN_AUTH_LIMITS, deps.clock);
  registerJsonBodyParser(app);

  registerAuthorization(app);
  // Before the authentication hook: it reads the session this loads.
  if (deps.operatorSignIn) registerOperatorSignIn(app, deps.operatorSignIn, deps.clock, deps.logger);
  app.addHook('onRequest', async (request, reply) => {
    // Health probes, the API descriptions and the dashboard page and assets hold no data; the dashboard's API calls carry a credential.
    if (request.routeOptions.config?.public === true) return undefined;
    // A signed-in operator dashboard session, unless the request brings a token of its own.
    if (request.operatorSession && request.headers.authorization === undefined) {
      request.operator = request.operatorSession;
      return undefined;
    }
    // Admission, the check of a token and its count happen in one synchronous step, so parallel guesses are all counted.
    const client = clientAddressKey(request.ip);
    const admission = limiter.admit(client);
    if (!admission.admitted) return refuseGuessing(deps, reply, admission);
    const presented = bearerTokenOf(request.headers.authorization);
    // A request without credentials guessed nothing: it is answered at once and not counted.
    if (presented === undefined) return sendAdminError(reply, 401, 'unauthorized', credentialsHint(deps, request.headers.authorization));
    if (deps.operatorTokens && isWellFormedOperatorToken(presented)) {
      // Counted as a failure before the lookup, forgiven once the token is found: parallel guesses cannot all pass admission.
      const reached = limiter.recordFailure(client);
      let record: OperatorTokenRecord | null;
      try {
        record = await deps.operatorTokens.findOperatorToken(hashOperatorToken(presented));
      } catch (error) {
        limiter.forgiveFailure(client);
        throw error;
      }
      if (record && operatorTokenIsLive(record, deps.clock.now())) {
        limiter.forgiveFailure(client);
        limiter.recordSuccess(client);
        request.operator = { kind: 'token', tokenId: record.id, name: record.name, scopes: record.scopes };
        return undefined;
      }
      return refuseWrongToken(request, reply, reached);
    }
    if (deps.adminToken && adminTokenMatches(request.headers.authorization, deps.adminToken)) {
      limiter.recordSuccess(client);
      request.operator = { kind: 'break-glass' };
      // Every use, not only changes: the break-glass token is for emergencies and bootstrap, and each use is worth a look.
      deps.logger.warn(
        // The route's pattern, not the path: a path can hold anything, a customer key included.
        { event: 'admin_break_glass', method: request.method, route: request.routeOptions.url ?? 'unknown route' },
        'admin call with the break-glass ADMIN_TOKEN',
      );
      return undefined;
    }
    return refuseWrongToken(request, reply, limiter.recordFailure(client));
  });

  const refuseWrongToken = async (request: FastifyRequest, reply: FastifyReply, reached: AuthLimitKind[]) => {
    deps.authMetrics?.adminAuthFailed();
    for (const limit of reached) logLimitReached(deps, request, limit);
    // Each wrong guess costs the guesser time (the comparisons themselves are constant-time or by hash).
    await new Promise((resolve) => setTimeout(resolve, deps.authFailureDelayMs ?? DEFAULT_AUTH_FAILURE_DELAY_MS));
    return sendAdminError(reply, 401, 'unauthorized', credentialsHint(deps, request.headers.authorization));
  };

  app.setErrorHandler((error: { statusCode?: number; code?: string; message: string }, request, reply) => {
    if (error instanceof StoreUnavailableError) {
      deps.logger.error({ event: 'admin', detail: error.message }, 'admin call failed: store unavailable');
      // A write that timed out may still have reached the store: a credit adjustment without an Idempotency-Key is not idempotent.
      const message =
        request.method === 'GET'
          ? 'The key store is unavailable. Retry shortly.'
          : 'The key store is unavailable; the change may or may not have been applied. Read the record before retrying.';
      return sendAdminError(reply, 503, 'store_unavailable', message);
    }
    if (error.code === 'FST_CSRF_INVALID_TOKEN' || error.code === 'FST_CSRF_MISSING_SECRET') {
      return sendAdminError(reply, 403, 'forbidden', 'The CSRF token does not belong to this session. Reload the page and try again.');
    }
    if (error.code === 'FST_ERR_CTP_INVALID_JSON_BODY') {
      const message =
        'The body is not valid JSON (or holds a __proto__ or constructor.prototype key). Send a JSON object, or no body at all.';
      return sendAdminError(reply, 400, 'invalid_json', message);
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

  void registerApiDocument(app, {
    title: 'gateway-authz admin API',
    description:
      'Accounts, keys, members, usage and the audit trail, for operators. Every call but health, metrics and these ' +
      "descriptions needs 'Authorization: Bearer <token>' (an operator API token, or the break-glass ADMIN_TOKEN), and " +
      'the permission its operation names. Errors answer {"error": {"code", "message", "field"?}}.',
    securitySchemes: {
      adminToken: { type: 'http', scheme: 'bearer', description: 'An operator API token (gko_…), or the break-glass ADMIN_TOKEN.' },
    },
  });
  // In a plugin registered after the description's, which sees only the routes added once it has loaded.
  void app.register(async (routes) => {
    registerAccountRoutes(routes, deps);
    registerKeyRoutes(routes, deps);
    registerMemberRoutes(routes, deps);
    registerWebhookRoutes(routes, {
      accountPath: '/admin/accounts/:id',
      accountParam: 'id',
      deps: { ...deps, targets: deps.webhookTargets ?? STRICT_TARGETS },
      actorOf,
      // Reading endpoints and their delivery logs is reading the account; any change (a secret shown, a test sent) writes it.
      configFor: (method) => ({ permission: method === 'GET' ? 'accounts:read' : 'accounts:write' }),
      tags: ['webhooks'],
      currency: deps.currency,
    });
    registerUsageRoutes(routes, deps);
    registerDashboard(routes);
    registerAuditRoutes(routes, deps);
    registerOperatorTokenRoutes(routes, deps);
    if (!deps.operatorSignIn) registerSignInNotOffered(routes);
    registerHealthRoutes(routes, deps.health);
    if (deps.metrics) registerMetricsRoute(routes, deps.metrics);
    registerApiDescriptionRoutes(routes, deps);
  });

  return app;
}

/** 429 with retry-after in whole seconds (rounded up, so a client that waits that long is admitted). */
function refuseGuessing(deps: AdminServerDeps, reply: FastifyReply, refusal: Exclude<AuthAdmission, { admitted: true }>): FastifyReply {
  deps.authMetrics?.adminAuthRefused(refusal.limit);
  const seconds = Math.ceil(refusal.retryAfterMs / 1000);
  const message =
    refusal.limit === 'address'
      ? `Too many wrong admin tokens from this address: every request from it is refused for ${seconds} s, without its token being checked.`
      : `Too many wrong admin tokens from many addresses (a guessing attack): for ${seconds} s only addresses that used the right token in the last ${TRUSTED_HOURS} hours are served.`;
  return sendAdminError(reply.header('retry-after', String(seconds)), 429, 'too_many_auth_failures', message);
}

/** What a 401 says: which credentials this server takes (never whether a presented token was close). */
function credentialsHint(deps: AdminServerDeps, header: string | undefined): string {
  const kinds = deps.adminToken ? 'an operator API token (gko_…) or the break-glass ADMIN_TOKEN' : 'an operator API token (gko_…)';
  const sent = header === undefined ? 'No credentials were sent. ' : 'That token is not valid here. ';
  return `${sent}Send ${kinds} as 'Authorization: Bearer <token>'.`;
}

function logLimitReached(deps: AdminServerDeps, request: FastifyRequest, limit: AuthLimitKind): void {
  const limits = deps.authLimits ?? DEFAULT_ADMIN_AUTH_LIMITS;
  deps.logger.warn(
    { event: 'admin_auth_limit', limit, clientAddress: request.ip, ...limits },
    limit === 'address'
      ? 'too many wrong admin tokens from one address: refusing it until its window ends'
      : 'too many wrong admin tokens in total: serving only recently authenticated addresses until the window ends',
  );
}
