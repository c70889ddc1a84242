import type { FastifyInstance } from 'fastify';
import { buildAdminServer } from '../../src/admin/admin-server';
import type { AuditEntry } from '../../src/ports/store';
import { systemClock } from '../../src/platform/clock';
import { rolesFromClaim } from '../../src/platform/operator-sign-in-settings';
import { RedisSessionStorage } from '../../src/store/redis/redis-session-storage';
import { redisKeys } from '../../src/store/redis/redis-keys';
import { LogCapture } from '../support/log-capture';
import {
  signInOperator,
  refusedSignIn,
  stubOperatorRelyingParty,
  stubOperatorSignInSettings,
  STUB_ISSUER,
} from '../support/operator-sign-in-stub';
import { captureAdminResponses } from '../support/secret-scan';
import { freePort } from '../support/free-port';
import { storeOnTestRedis } from '../support/store-on-test-redis';

/**
 * Operator sign-in on the admin listener, in process over real HTTP on a real
 * Redis, with a stub identity provider (the Chromium journey in
 * test/dashboard/operator-sign-in-journey.test.ts uses a real one): sessions,
 * roles from the claim, CSRF and Origin on cookie-authenticated changes, and
 * the audit naming the person.
 */
const world = storeOnTestRedis({ commandTimeoutMs: 1000 });
let admin: FastifyInstance;
let adminUrl: string;
let sessions: RedisSessionStorage;
const logs = new LogCapture();

beforeAll(async () => {
  sessions = await RedisSessionStorage.connect({ mode: 'standalone', url: world.redis.url }, 1000, redisKeys.operatorSession);
  const port = await freePort();
  adminUrl = `http://127.0.0.1:${port}`;
  admin = buildAdminServer({
    store: world.store,
    clock: systemClock,
    logger: logs.logger,
    operatorSignIn: { settings: stubOperatorSignInSettings(adminUrl), sessions, relyingParty: stubOperatorRelyingParty },
  });
  await admin.listen({ host: '127.0.0.1', port });
  captureAdminResponses(adminUrl);
});
afterAll(async () => {
  await admin?.close();
  await sessions?.close();
});

describe('signing in', () => {
  it('maps the role claim to roles, and describes the session with its permissions', async () => {
    const billing = await signInOperator(adminUrl, 'bea', ['everyone', 'gw-billing']);
    const session = await billing.call('GET', '/dashboard/auth/session');
    expect(session.body).toMatchObject({
      operator: { kind: 'person', issuer: STUB_ISSUER, subject: 'bea' },
      roles: ['billing'],
      permissions: ['accounts:read', 'billing:write', 'usage:read'],
    });
  });

  it('refuses a person none of whose groups maps to a role, and says why', async () => {
    expect(await refusedSignIn(adminUrl, 'eve', ['everyone'])).toContain('sign_in=no_operator_role');
  });

  it("keeps the operator sessions under their own keys in Redis, never the customer dashboard's", async () => {
    await signInOperator(adminUrl, 'sam', ['gw-support']);
    expect((await world.client.keys('gwa:operator-session:*')).length).toBeGreaterThan(0);
    expect(await world.client.keys('gwa:session:*')).toEqual([]);
  });

  it('reads roles from a string or an array claim, and only mapped values', () => {
    const map = { 'gw-admins': ['admin' as const], ops: ['billing' as const, 'support' as const] };
    expect(rolesFromClaim('gw-admins', map)).toEqual(['admin']);
    expect(rolesFromClaim(['ops', 'x', 42], map)).toEqual(['billing', 'support']);
    expect(rolesFromClaim(['__proto__', 'constructor'], map)).toEqual([]);
    expect(rolesFromClaim(undefined, map)).toEqual([]);
  });
});

describe('changes with a session cookie', () => {
  it('are made, and audited under the person (issuer and subject)', async () => {
    const admin = await signInOperator(adminUrl, 'ada', ['gw-admins']);
    expect((await admin.call('POST', '/admin/accounts', { id: 'signed-in', name: 'Signed In' })).status).toBe(201);
    const trail = await admin.call('GET', '/admin/accounts/signed-in/audit');
    expect((trail.body.entries as AuditEntry[])[0]).toMatchObject({
      action: 'account.create',
      actor: { kind: 'operator', operator: { kind: 'person', issuer: STUB_ISSUER, subject: 'ada' } },
    });
  });

  it("are refused without the CSRF token, with another session's, or from another origin", async () => {
    const ada = await signInOperator(adminUrl, 'ada', ['gw-admins']);
    const bob = await signInOperator(adminUrl, 'bob', ['gw-admins']);
    const attempt = (headers: Record<string, string>) =>
      fetch(`${adminUrl}/admin/accounts`, {
        method: 'POST',
        headers: { cookie: ada.cookie, 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ id: 'forged', name: 'Forged' }),
      });
    expect((await attempt({ origin: adminUrl })).status).toBe(403);
    expect((await attempt({ origin: adminUrl, 'x-csrf-token': bob.csrfToken })).status).toBe(403);
    expect((await attempt({ origin: 'https://evil.example', 'x-csrf-token': ada.csrfToken })).status).toBe(403);
    expect((await ada.call('GET', '/admin/accounts/forged')).status).toBe(404);
  });

  it('end with sign-out: the cookie no longer authenticates', async () => {
    const ada = await signInOperator(adminUrl, 'ada', ['gw-admins']);
    expect((await ada.call('GET', '/admin/accounts')).status).toBe(200);
    expect((await ada.call('POST', '/dashboard/auth/logout')).status).toBe(204);
    expect((await ada.call('GET', '/admin/accounts')).status).toBe(401);
  });
});
