import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { operatorAuditActor, type AuditActor } from '../accounts/customer-identity';
import type { OperatorPermission } from '../operators/operator-permissions';
import { operatorActorOf, permissionsOf, type OperatorPrincipal } from '../operators/operator-principal';
import { sendAdminError } from './admin-errors';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** A route that holds no data and needs no operator (health, the dashboard page). */
    public?: boolean;
    /**
     * What an operator needs to call this admin route, from the vocabulary of
     * src/operators/operator-permissions.ts; a function for a route whose
     * body decides (PATCH /admin/accounts/:id). A route that declares none is
     * refused to every operator, and test/integration/admin-permissions.test.ts
     * fails naming it. 'authenticated': any operator (GET /admin/operator/me).
     */
    permission?: OperatorPermission | 'authenticated' | ((request: FastifyRequest) => readonly OperatorPermission[]);
  }
  interface FastifyRequest {
    /** Who authenticated this admin request; set for every route but the public ones. */
    operator: OperatorPrincipal | undefined;
  }
}

export interface AdminRouteEntry {
  method: string;
  url: string;
  config: { public?: boolean; permission?: unknown };
}

const ROUTES = new WeakMap<FastifyInstance, AdminRouteEntry[]>();

/** Every route registered on an admin server, as declared: what the permission test walks. */
export function registeredAdminRoutes(app: FastifyInstance): readonly AdminRouteEntry[] {
  return ROUTES.get(app) ?? [];
}

/** The audit actor of the operator behind a request. */
export function actorOf(request: FastifyRequest): AuditActor {
  if (!request.operator) throw new Error('an admin change without an authenticated operator');
  return operatorAuditActor(operatorActorOf(request.operator));
}

/** The permissions a route needs for this request; undefined when it declares none. */
export function neededPermissions(request: FastifyRequest): readonly OperatorPermission[] | undefined {
  const declared = request.routeOptions.config?.permission;
  if (declared === undefined) return undefined;
  if (declared === 'authenticated') return [];
  return typeof declared === 'function' ? declared(request) : [declared];
}

/**
 * Checks every non-public admin route's declared permission against what the
 * authenticated operator holds. After the body is parsed (a PATCH's fields
 * decide), before the handler validates it.
 */
export function registerAuthorization(app: FastifyInstance): void {
  app.decorateRequest('operator', undefined);
  const routes: AdminRouteEntry[] = [];
  ROUTES.set(app, routes);
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) routes.push({ method, url: route.url, config: route.config ?? {} });
  });
  app.addHook('preHandler', async (request, reply) => {
    if (request.routeOptions.config?.public === true || request.is404) return undefined;
    const operator = request.operator;
    if (!operator) return sendAdminError(reply, 401, 'unauthorized', 'Authenticate first.');
    const needed = neededPermissions(request);
    const route = `${request.method} ${request.routeOptions.url ?? ''}`;
    if (needed === undefined) {
      return sendAdminError(reply, 403, 'forbidden', `${route} declares no operator permission, so no operator may call it.`);
    }
    const held = permissionsOf(operator);
    const missing = needed.filter((permission) => !held.includes(permission));
    if (missing.length === 0) return undefined;
    return refuseMissing(reply, route, missing);
  });
}

function refuseMissing(reply: FastifyReply, route: string, missing: readonly OperatorPermission[]): FastifyReply {
  return sendAdminError(
    reply,
    403,
    'forbidden',
    `${route} needs the ${missing.join(' and ')} permission${missing.length > 1 ? 's' : ''}, which you do not have. ` +
      'An admin can grant it through your role or a token with that scope.',
  );
}
