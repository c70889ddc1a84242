/**
 * The customer API as the customer server mounts it, over real HTTP and a
 * real Redis: sign-in (a stub identity provider, as in
 * customer-session-cookie.test.ts) gives the session; the server's Origin and
 * CSRF checks run before the API's own membership and role checks; sign-in
 * binds an invitation for the person's verified email.
 */
import type { FastifyInstance } from 'fastify';
import { addMember, memberDirectory } from '../../src/accounts/member-actions';
import { registerCustomerApi } from '../../src/customer/customer-api';
import { buildCustomerServer } from '../../src/customer/customer-server';
import type { RelyingParty } from '../../src/http/sign-in/oidc-relying-party';
import { systemClock } from '../../src/platform/clock';
import { OPERATOR } from '../../src/accounts/customer-identity';
import { loadSettings, DEFAULT_PLAN, type CustomerSignInSettings } from '../../src/platform/settings';
import { MemorySessionStorage } from '../../src/store/memory-session-storage';
import { RedisStore } from '../../src/store/redis/redis-store';
import { LogCapture } from '../support/log-capture';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { captureAdminResponses, registerSecrets } from '../support/secret-scan';

const SESSION_SECRET = 'mounted-api-test-session-secret-0123456789';
const ORIGIN = 'https://console.example.com';
const ISSUER = 'https://login.example.com';

function signInSettings(): CustomerSignInSettings {
  const result = loadSettings({
    OIDC_ISSUER_URL: ISSUER,
    OIDC_CLIENT_ID: 'dashboard',
    OIDC_REDIRECT_URL: `${ORIGIN}/auth/callback`,
    CUSTOMER_SESSION_SECRET: SESSION_SECRET,
  });
  if (!result.ok) throw new Error(result.problems.join('; '));
  return result.settings.customerSignIn!;
}

const stubProvider: RelyingParty = {
  beginLogin: async (nowMs) => ({
    authorizationUrl: `${ISSUER}/authorize?state=stub-state`,
    pending: { state: 'stub-state', nonce: 'stub-nonce', codeVerifier: 'stub-verifier', startedAtMs: nowMs },
  }),
  completeLogin: async () => ({ issuer: ISSUER, subject: 'ada-1', displayName: 'Ada', verifiedEmail: 'ada@example.com' }),
};

let redis: TestRedis;
let store: RedisStore;
let app: FastifyInstance;
let url: string;
const logs = new LogCapture();

beforeAll(async () => {
  registerSecrets(SESSION_SECRET);
  redis = await startTestRedis();
  store = await RedisStore.connect({ url: redis.url, commandTimeoutMs: 1000 });
  const deps = { store, clock: systemClock, logger: logs.logger };
  for (const id of ['mounted-dev', 'mounted-invited']) {
    await store.createAccount({ id, name: id, status: 'active', createdAt: new Date().toISOString() });
  }
  await addMember(deps, OPERATOR, {
    accountId: 'mounted-dev',
    role: 'developer',
    principal: { kind: 'identity', issuer: ISSUER, subject: 'ada-1' },
  });
  await addMember(deps, OPERATOR, {
    accountId: 'mounted-invited',
    role: 'owner',
    principal: { kind: 'invitation', email: 'ada@example.com' },
  });
  app = await buildCustomerServer({
    signIn: signInSettings(),
    sessions: new MemorySessionStorage(systemClock),
    memberships: memberDirectory(deps),
    clock: systemClock,
    logger: logs.logger,
    relyingParty: stubProvider,
    registerApi: (server) =>
      registerCustomerApi(server, { ...deps, defaultPlan: DEFAULT_PLAN, defaultMaxActiveKeys: 50, countsFlushIntervalMs: 30_000 }),
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  captureAdminResponses(url);
});

afterAll(async () => {
  await app?.close();
  await store?.close();
  await redis?.stop();
});

/** As the TLS-terminating proxy forwards it. */
const call = (method: string, path: string, headers: Record<string, string> = {}, body?: object) =>
  fetch(`${url}${path}`, {
    method,
    redirect: 'manual',
    headers: { 'x-forwarded-proto': 'https', ...headers, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });

const cookieOf = (response: Response) => {
  const line = response.headers.getSetCookie().find((cookie) => cookie.startsWith('__Host-gwa_session='));
  if (!line) throw new Error('no session cookie');
  const value = line.split(';')[0]!;
  registerSecrets(value.slice('__Host-gwa_session='.length));
  return value;
};

async function signIn(): Promise<{ cookie: string; csrf: string }> {
  const started = await call('GET', '/auth/login');
  const callback = await call('GET', '/auth/callback?code=stub-code&state=stub-state', { cookie: cookieOf(started) });
  expect(callback.status).toBe(303);
  const cookie = cookieOf(callback);
  // The CSRF token legitimately travels in /auth/session answers (captured for the suite's scan): this file checks its logs for it.
  const session = (await (await call('GET', '/auth/session', { cookie })).json()) as { csrfToken: string };
  return { cookie, csrf: session.csrfToken };
}

it('binds the invitation at sign-in, lists both accounts, and serves the API behind the session, Origin and CSRF checks', async () => {
  const { cookie, csrf } = await signIn();
  const me = (await (await call('GET', '/api/me', { cookie })).json()) as { accounts: { id: string; role: string }[] };
  expect(me.accounts).toEqual([
    { id: 'mounted-dev', name: 'mounted-dev', role: 'developer' },
    { id: 'mounted-invited', name: 'mounted-invited', role: 'owner' },
  ]);

  const create = (headers: Record<string, string>) =>
    call('POST', '/api/accounts/mounted-dev/keys', { cookie, ...headers }, { name: 'ci' });
  // The server's checks, answered in its words, before the API runs.
  expect(((await (await create({ origin: ORIGIN })).json()) as { error: { code: string } }).error.code).toBe('csrf_token_missing');
  const wrongToken = await create({ origin: ORIGIN, 'x-csrf-token': `${csrf}x` });
  expect(wrongToken.status).toBe(403);
  expect(((await wrongToken.json()) as { error: { code: string } }).error.code).toBe('csrf_token_invalid');
  const crossSite = await create({ origin: 'https://evil.example', 'x-csrf-token': csrf });
  expect(crossSite.status).toBe(403);
  expect(((await crossSite.json()) as { error: { code: string } }).error.code).toBe('cross_site_request');
  expect(await store.listKeys('mounted-dev')).toEqual([]);

  const created = await create({ origin: ORIGIN, 'x-csrf-token': csrf });
  expect(created.status).toBe(201);
  const key = (await created.json()) as { key: string; createdBy: unknown };
  registerSecrets(key.key);
  expect(key.createdBy).toEqual({ kind: 'member', issuer: ISSUER, subject: 'ada-1' });

  // The API's own check: a developer does not manage members.
  const invite = await call(
    'POST',
    '/api/accounts/mounted-dev/members',
    { cookie, origin: ORIGIN, 'x-csrf-token': csrf },
    { email: 'x@example.com', role: 'viewer' },
  );
  expect(invite.status).toBe(403);
  expect(((await invite.json()) as { error: { code: string } }).error.code).toBe('forbidden');
  // As owner of the account the invitation made them a member of, they do.
  const members = await call('GET', '/api/accounts/mounted-invited/members', { cookie });
  expect(((await members.json()) as { members: { subject: string; status: string }[] }).members).toEqual([
    expect.objectContaining({ subject: 'ada-1', status: 'active', email: 'ada@example.com', role: 'owner' }),
  ]);
});

it("answers an API call without a session with the server's 401", async () => {
  const response = await call('GET', '/api/me');
  expect(response.status).toBe(401);
  expect(((await response.json()) as { error: { code: string } }).error.code).toBe('not_signed_in');
});
