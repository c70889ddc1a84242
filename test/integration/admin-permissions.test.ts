import type { FastifyInstance } from 'fastify';
import { buildAdminServer } from '../../src/admin/admin-server';
import { registeredAdminRoutes } from '../../src/admin/admin-authorization';
import {
  accountPatchPermissions,
  OPERATOR_PERMISSIONS,
  OPERATOR_ROLES,
  permissionsOfRoles,
  type OperatorPermission,
  type OperatorRole,
} from '../../src/operators/operator-permissions';
import { RedisOperatorTokens } from '../../src/store/redis/redis-operator-tokens';
import { LogCapture } from '../support/log-capture';
import { captureAdminResponses } from '../support/secret-scan';
import { storeOnTestRedis } from '../support/store-on-test-redis';
import { TEST_ADMIN_TOKEN } from '../support/running-app';
import { systemClock } from '../../src/platform/clock';
import { RedisSessionStorage } from '../../src/store/redis/redis-session-storage';
import { redisKeys } from '../../src/store/redis/redis-keys';
import { freePort } from '../support/free-port';
import {
  signInOperator,
  stubOperatorRelyingParty,
  stubOperatorSignInSettings,
  type OperatorBrowser,
} from '../support/operator-sign-in-stub';
import type { ApiCreatedOperatorToken, ApiErrorBody } from '../../src/cli/api-types';

/**
 * The operator permission matrix, route by route, over real HTTP on a real
 * Redis. The routes are the server's own (registeredAdminRoutes: whatever was
 * registered), so a route added without a decision here fails the first test.
 */

/** What each admin route needs, decided here independently of the route's own declaration. */
const EXPECTED: Record<string, OperatorPermission | 'authenticated' | 'by body'> = {
  'POST /admin/accounts': 'accounts:write',
  'GET /admin/accounts': 'accounts:read',
  'GET /admin/accounts/:id': 'accounts:read',
  'PATCH /admin/accounts/:id': 'by body',
  'POST /admin/accounts/:id/credit': 'billing:write',
  'POST /admin/accounts/:id/keys': 'keys:write',
  'GET /admin/accounts/:id/keys': 'keys:read',
  'GET /admin/keys/:keyId': 'keys:read',
  'PATCH /admin/keys/:keyId': 'keys:write',
  'POST /admin/keys/:keyId/rotate': 'keys:write',
  'POST /admin/keys/:keyId/revoke': 'keys:write',
  'GET /admin/accounts/:id/members': 'members:read',
  'POST /admin/accounts/:id/members': 'members:write',
  'PATCH /admin/accounts/:id/members/:memberId': 'members:write',
  'DELETE /admin/accounts/:id/members/:memberId': 'members:write',
  'GET /admin/accounts/:id/webhooks': 'accounts:read',
  'POST /admin/accounts/:id/webhooks': 'accounts:write',
  'GET /admin/accounts/:id/webhooks/settings': 'accounts:read',
  'PUT /admin/accounts/:id/webhooks/settings': 'accounts:write',
  'PATCH /admin/accounts/:id/webhooks/:endpointId': 'accounts:write',
  'DELETE /admin/accounts/:id/webhooks/:endpointId': 'accounts:write',
  'POST /admin/accounts/:id/webhooks/:endpointId/rotate-secret': 'accounts:write',
  'POST /admin/accounts/:id/webhooks/:endpointId/test': 'accounts:write',
  'GET /admin/accounts/:id/webhooks/:endpointId/deliveries': 'accounts:read',
  'GET /admin/accounts/:id/usage': 'usage:read',
  'GET /admin/accounts/:id/audit': 'audit:read',
  'GET /admin/audit': 'audit:read',
  'GET /admin/operator/me': 'authenticated',
  'POST /admin/operator-tokens': 'operators:admin',
  'GET /admin/operator-tokens': 'operators:admin',
  'POST /admin/operator-tokens/:tokenId/revoke': 'operators:admin',
};

/** Routes that hold no data and need no operator. */
const PUBLIC = (method: string, url: string) =>
  ((method === 'GET' || method === 'HEAD') &&
    (['/healthz', '/readyz', '/metrics', '/openapi/admin.json', '/dashboard'].includes(url) || url.startsWith('/dashboard/assets/'))) ||
  SIGN_IN_STEPS.includes(`${method.replace('HEAD', 'GET')} ${url}`);

/** Operator sign-in: the steps of signing in and out, and the session's description (401 without a session). */
const SIGN_IN_STEPS = [
  'GET /dashboard/auth/login',
  'GET /dashboard/auth/callback',
  'POST /dashboard/auth/logout',
  'GET /dashboard/auth/session',
];

/** PATCH /admin/accounts/:id bodies (each invalid, so an allowed call changes nothing) and what each needs. */
const ACCOUNT_PATCHES: { body: object; needs: OperatorPermission[] }[] = [
  { body: { name: 5 }, needs: ['accounts:write'] },
  { body: { maxActiveKeys: 'x' }, needs: ['accounts:write'] },
  { body: { keyRestrictions: 'x' }, needs: ['accounts:write'] },
  { body: { billing: { status: 'x' } }, needs: ['billing:write'] },
  { body: { billing: { creditBalance: 'x' } }, needs: ['billing:write'] },
  { body: { billing: { monthlySpendCap: 'x' } }, needs: ['billing:write'] },
  { body: { limits: 'x' }, needs: ['billing:write'] },
  { body: { tokenBudgets: 'x' }, needs: ['billing:write'] },
  { body: { name: 5, billing: { monthlySpendCap: 'x' } }, needs: ['accounts:write', 'billing:write'] },
  { body: { surprise: 1 }, needs: ['accounts:write'] },
];

const world = storeOnTestRedis({ commandTimeoutMs: 1000 });
let tokens: RedisOperatorTokens;
let admin: FastifyInstance;
let adminUrl: string;
const logs = new LogCapture();

let sessions: RedisSessionStorage;

beforeAll(async () => {
  tokens = await RedisOperatorTokens.connect({ mode: 'standalone', url: world.redis.url }, 1000);
  sessions = await RedisSessionStorage.connect({ mode: 'standalone', url: world.redis.url }, 1000, redisKeys.operatorSession);
  const port = await freePort();
  adminUrl = `http://127.0.0.1:${port}`;
  admin = buildAdminServer({
    store: world.store,
    clock: systemClock,
    logger: logs.logger,
    adminToken: TEST_ADMIN_TOKEN,
    operatorTokens: tokens,
    operatorSignIn: { settings: stubOperatorSignInSettings(adminUrl), sessions, relyingParty: stubOperatorRelyingParty },
  });
  await admin.listen({ host: '127.0.0.1', port });
  captureAdminResponses(adminUrl);
  expect((await call(TEST_ADMIN_TOKEN, 'POST', '/admin/accounts', { id: 'perm-acct', name: 'Permissions' })).status).toBe(201);
});
afterAll(async () => {
  await admin?.close();
  await tokens?.close();
  await sessions?.close();
});

type Answer = { status: number; body: (ApiErrorBody & Partial<ApiCreatedOperatorToken>) | undefined };

async function call(token: string, method: string, path: string, body?: unknown): Promise<Answer> {
  const response = await fetch(`${adminUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await response.text();
  return { status: response.status, body: text ? (JSON.parse(text) as Answer['body']) : undefined };
}

async function createToken(name: string, scopes: readonly OperatorPermission[]): Promise<string> {
  const created = await call(TEST_ADMIN_TOKEN, 'POST', '/admin/operator-tokens', { name, scopes });
  expect(created.status).toBe(201);
  return created.body!.token!;
}

/** A concrete path for a route pattern: the account exists; keys, members and tokens do not. */
function pathOf(url: string): string {
  return url
    .replace(':id', 'perm-acct')
    .replace(':keyId', 'key_0000000000000000')
    .replace(':memberId', 'mem_0000000000')
    .replace(':tokenId', 'otk_0000000000000000')
    .replace(':endpointId', 'whe_0000000000000000');
}

/** Bodies that fail validation where one is needed, so an allowed call changes nothing. */
function bodyOf(method: string, url: string): unknown {
  if (method === 'GET' || method === 'DELETE') return undefined;
  if (url === '/admin/accounts/:id/keys') return { environment: 'nope' };
  return { unknownField: true };
}

const apiRoutes = () => registeredAdminRoutes(admin).filter((route) => route.method !== 'HEAD' && !PUBLIC(route.method, route.url));

describe('every admin route declares a permission', () => {
  it('the routes this server registers are exactly the routes decided here, each with the permission decided here', () => {
    const registered = apiRoutes().map((route) => `${route.method} ${route.url}`);
    expect(registered.filter((route) => !(route in EXPECTED))).toEqual([]);
    expect(Object.keys(EXPECTED).filter((route) => !registered.includes(route))).toEqual([]);
    for (const route of apiRoutes()) {
      const expected = EXPECTED[`${route.method} ${route.url}`];
      if (expected === 'by body') expect(typeof route.config.permission).toBe('function');
      else expect(`${route.method} ${route.url} ${String(route.config.permission)}`).toBe(`${route.method} ${route.url} ${expected}`);
    }
  });

  it('a public route is only one that holds no data', () => {
    const publicRoutes = registeredAdminRoutes(admin).filter((route) => route.config.public === true);
    expect(publicRoutes.length).toBeGreaterThan(5);
    for (const route of publicRoutes) expect(`${route.method} ${route.url} ${PUBLIC(route.method, route.url)}`).toContain('true');
  });

  it('the body of PATCH /admin/accounts/:id decides its permissions field by field', () => {
    for (const { body, needs } of ACCOUNT_PATCHES) expect([...accountPatchPermissions(body)].sort()).toEqual([...needs].sort());
  });
});

describe('the matrix, enforced on every route for each token scope, each role and each signed-in role', () => {
  type Caller = (method: string, path: string, body?: unknown) => Promise<Answer>;
  const principals: { label: string; held: readonly OperatorPermission[]; caller: () => Caller }[] = [];
  const issued = new Map<string, string>();
  const signedIn = new Map<string, OperatorBrowser>();
  const withToken =
    (token: () => string): (() => Caller) =>
    () =>
    (method, path, body) =>
      call(token(), method, path, body);
  for (const permission of OPERATOR_PERMISSIONS) {
    principals.push({ label: `token scoped ${permission}`, held: [permission], caller: withToken(() => issued.get(permission)!) });
  }
  for (const role of OPERATOR_ROLES) {
    principals.push({
      label: `token with role ${role}'s permissions`,
      held: permissionsOfRoles([role]),
      caller: withToken(() => issued.get(role)!),
    });
    principals.push({
      label: `person signed in with role ${role}`,
      held: permissionsOfRoles([role]),
      caller: () => (method, path, body) => signedIn.get(role)!.call(method, path, body) as Promise<Answer>,
    });
  }
  principals.push({ label: 'break-glass ADMIN_TOKEN', held: OPERATOR_PERMISSIONS, caller: withToken(() => TEST_ADMIN_TOKEN) });

  beforeAll(async () => {
    for (const permission of OPERATOR_PERMISSIONS) issued.set(permission, await createToken(`scope ${permission}`, [permission]));
    for (const role of OPERATOR_ROLES) {
      issued.set(role, await createToken(`role ${role}`, permissionsOfRoles([role])));
      signedIn.set(role, await signInOperator(adminUrl, `${role}-person`, [`gw-${role === 'admin' ? 'admins' : role}`]));
    }
  });

  it.each(principals.map((principal) => [principal.label, principal] as const))('%s', async (_label, principal) => {
    const outcomes: string[] = [];
    const expectations: string[] = [];
    const caller = principal.caller();
    const check = async (method: string, url: string, body: unknown, needs: readonly OperatorPermission[]) => {
      const answer = await caller(method, pathOf(url), body);
      const refused = answer.status === 403 && answer.body?.error?.code === 'forbidden';
      const allowed = needs.every((permission) => principal.held.includes(permission));
      const outcome = refused ? 'refused' : answer.status === 401 ? 'unauthenticated' : 'served';
      outcomes.push(`${method} ${url} ${JSON.stringify(body ?? null)} → ${outcome}`);
      expectations.push(`${method} ${url} ${JSON.stringify(body ?? null)} → ${allowed ? 'served' : 'refused'}`);
    };
    for (const route of apiRoutes()) {
      const expected = EXPECTED[`${route.method} ${route.url}`]!;
      if (expected === 'by body') {
        for (const { body, needs } of ACCOUNT_PATCHES) await check(route.method, route.url, body, needs);
      } else {
        await check(route.method, route.url, bodyOf(route.method, route.url), expected === 'authenticated' ? [] : [expected]);
      }
    }
    expect(outcomes).toEqual(expectations);
  });
});

describe('the roles, as the issue describes them', () => {
  const may = (role: OperatorRole, permission: OperatorPermission) => permissionsOfRoles([role]).includes(permission);

  it('admin holds every permission', () => {
    expect(permissionsOfRoles(['admin'])).toEqual([...OPERATOR_PERMISSIONS]);
  });

  it('billing: credit, plans, billing status, spend caps and usage, but no keys', () => {
    expect(['billing:write', 'usage:read', 'accounts:read'].every((permission) => may('billing', permission as OperatorPermission))).toBe(
      true,
    );
    expect(may('billing', 'keys:read') || may('billing', 'keys:write') || may('billing', 'operators:admin')).toBe(false);
  });

  it('support: reads accounts, key metadata, members, audit and usage; changes nothing', () => {
    for (const permission of ['accounts:read', 'keys:read', 'members:read', 'audit:read', 'usage:read'] as const) {
      expect(may('support', permission)).toBe(true);
    }
    expect(permissionsOfRoles(['support']).filter((permission) => !permission.endsWith(':read'))).toEqual([]);
  });
});

describe('a route without a declared permission', () => {
  it('is refused to every operator, even the break-glass token', async () => {
    const server = buildAdminServer({ store: world.store, clock: systemClock, logger: logs.logger, adminToken: TEST_ADMIN_TOKEN });
    server.get('/admin/undeclared', async () => ({ secret: 'data' }));
    await server.ready();
    try {
      expect(registeredAdminRoutes(server).some((route) => route.url === '/admin/undeclared')).toBe(true);
      const answer = await server.inject({
        method: 'GET',
        url: '/admin/undeclared',
        headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` },
      });
      expect(answer.statusCode).toBe(403);
      expect(answer.json<ApiErrorBody>().error.message).toContain('declares no operator permission');
    } finally {
      await server.close();
    }
  });
});
