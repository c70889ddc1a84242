/**
 * The session cookie as production sets it (HTTPS behind a TLS-terminating
 * proxy): `__Host-` prefix, Secure, HttpOnly, SameSite=Lax, Path=/, no
 * Domain and no expiry; a new session id at sign-in; and a clear refusal when
 * the request did not arrive over HTTPS. The identity provider side is a stub
 * here (the real one, openid-client against oidc-provider, is exercised in
 * customer-sign-in.test.ts, which cannot run production's https origin).
 */
import type { FastifyInstance } from 'fastify';
import { buildCustomerServer } from '../../src/customer/customer-server';
import { sessionIdHash } from '../../src/http/sign-in/session-store-adapter';
import type { RelyingParty } from '../../src/http/sign-in/oidc-relying-party';
import { ManualClock } from '../../src/platform/clock';
import { createLogger } from '../../src/platform/logger';
import { loadSettings, type CustomerSignInSettings } from '../../src/platform/settings';
import { MemorySessionStorage } from '../../src/store/memory-session-storage';
import { registerSecrets } from '../support/secret-scan';

const SESSION_SECRET = 'cookie-test-session-secret-0123456789abcdef';
const T0 = Date.parse('2026-11-23T09:00:00Z');

function signInSettings(): CustomerSignInSettings {
  const result = loadSettings({
    OIDC_ISSUER_URL: 'https://login.example.com',
    OIDC_CLIENT_ID: 'dashboard',
    OIDC_REDIRECT_URL: 'https://console.example.com/auth/callback',
    CUSTOMER_SESSION_SECRET: SESSION_SECRET,
  });
  if (!result.ok) throw new Error(result.problems.join('; '));
  return result.settings.customerSignIn!;
}

const stubProvider: RelyingParty = {
  beginLogin: async (nowMs) => ({
    authorizationUrl: 'https://login.example.com/authorize?state=stub-state',
    pending: { state: 'stub-state', nonce: 'stub-nonce', codeVerifier: 'stub-verifier', startedAtMs: nowMs },
  }),
  completeLogin: async () => ({ issuer: 'https://login.example.com', subject: 'u-1', displayName: 'Ada' }),
};

let app: FastifyInstance;
let storage: MemorySessionStorage;

beforeAll(async () => {
  registerSecrets(SESSION_SECRET);
  const clock = new ManualClock(T0);
  storage = new MemorySessionStorage(clock);
  app = await buildCustomerServer({
    signIn: signInSettings(),
    sessions: storage,
    memberships: { membershipsOf: async () => [{ accountId: 'acme', role: 'owner' }] },
    clock,
    logger: createLogger('silent'),
    relyingParty: stubProvider,
  });
});

afterAll(async () => {
  await app.close();
});

const HTTPS = { 'x-forwarded-proto': 'https' };

function sessionCookieOf(setCookie: string | string[] | undefined): { header: string; value: string; id: string } {
  const line = [setCookie ?? []].flat().find((cookie) => cookie.startsWith('__Host-gwa_session='));
  if (!line) throw new Error(`no session cookie in ${JSON.stringify(setCookie)}`);
  const value = line.split(';')[0]!.slice('__Host-gwa_session='.length);
  const id = value.slice(0, value.lastIndexOf('.'));
  registerSecrets(value, id);
  return { header: line, value, id };
}

it('refuses to start a sign-in on a request that did not arrive over HTTPS, saying why', async () => {
  const response = await app.inject({ method: 'GET', url: '/auth/login' });
  expect(response.statusCode).toBe(400);
  expect(response.body).toContain('<h1>This dashboard needs HTTPS</h1>');
  expect(response.body).toContain('a proxy in front must send X-Forwarded-Proto: https');
  expect(response.headers['set-cookie']).toBeUndefined();
});

it('sets a __Host- cookie: Secure, HttpOnly, SameSite=Lax, Path=/, no Domain, no expiry', async () => {
  const response = await app.inject({ method: 'GET', url: '/auth/login', headers: HTTPS });
  expect(response.statusCode).toBe(303);
  expect(response.headers.location).toBe('https://login.example.com/authorize?state=stub-state');
  const cookie = sessionCookieOf(response.headers['set-cookie']);
  const attributes = cookie.header
    .split(';')
    .slice(1)
    .map((attribute) => attribute.trim())
    .sort();
  expect(attributes).toEqual(['HttpOnly', 'Path=/', 'SameSite=Lax', 'Secure']);
  expect(cookie.id).toMatch(/^[A-Za-z0-9_-]{32}$/); // 24 random bytes
});

it('issues a new session id at sign-in and deletes the pre-sign-in session', async () => {
  const started = await app.inject({ method: 'GET', url: '/auth/login', headers: HTTPS });
  const before = sessionCookieOf(started.headers['set-cookie']);
  expect(await storage.read(sessionIdHash(before.id))).not.toBeNull();
  const callback = await app.inject({
    method: 'GET',
    url: '/auth/callback?code=stub-code&state=stub-state',
    headers: { ...HTTPS, cookie: `__Host-gwa_session=${before.value}` },
  });
  expect(callback.statusCode).toBe(303);
  expect(callback.headers.location).toBe('/');
  const after = sessionCookieOf(callback.headers['set-cookie']);
  expect(after.id).not.toBe(before.id);
  expect(await storage.read(sessionIdHash(before.id))).toBeNull();
  const home = await app.inject({ method: 'GET', url: '/', headers: { ...HTTPS, cookie: `__Host-gwa_session=${after.value}` } });
  expect(home.statusCode).toBe(200);
  expect(home.body).toContain('Signed in as <strong>Ada</strong>');
  // The planted (pre-sign-in) id is worth nothing.
  const planted = await app.inject({
    method: 'GET',
    url: '/auth/session',
    headers: { ...HTTPS, cookie: `__Host-gwa_session=${before.value}` },
  });
  expect(planted.statusCode).toBe(401);
});

it('ignores a session cookie whose signature does not match (a forged id)', async () => {
  const started = await app.inject({ method: 'GET', url: '/auth/login', headers: HTTPS });
  const cookie = sessionCookieOf(started.headers['set-cookie']);
  const forged = `${cookie.id}.${'A'.repeat(43)}`;
  const callback = await app.inject({
    method: 'GET',
    url: '/auth/callback?code=stub-code&state=stub-state',
    headers: { ...HTTPS, cookie: `__Host-gwa_session=${forged}` },
  });
  expect(callback.statusCode).toBe(400);
  expect(callback.body).toContain('does not match a sign-in started in this browser');
});
