/**
 * Customer sign-in, end to end: a real OpenID provider (oidc-provider, in its
 * own process), the built service (its own process, on a real Redis), and
 * Debian's Chromium through playwright-core. Chromium is required: without
 * /usr/bin/chromium the suite fails (never skips).
 */
import { createHash } from 'node:crypto';
import { mkdirSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import Redis from 'ioredis';
import type { Browser, BrowserContext, Page, Request } from 'playwright-core';
import { launchChromium } from '../support/chromium';
import { startCustomerApp, startOidcProvider, type CustomerAppProcess, type OidcTestProvider } from '../support/customer-stack';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { findLeaks, registerSecrets as registerWithScan } from '../support/secret-scan';
import { freePort } from '../support/free-port';

/** A computed style of the first element matching `selector` (an expression string: the tests are not type-checked against the DOM). */
function styleOf(page: Page, selector: string, property: string): Promise<string> {
  return page.evaluate<string>(`getComputedStyle(document.querySelector(${JSON.stringify(selector)})).${property}`);
}

const SESSION_SECRET = 'test-customer-session-secret-0123456789abcdef';
const CLIENT_SECRET = 'test-oidc-client-secret-fedcba9876543210';
const IDLE_MS = 60_000;
const MAX_AGE_MS = 300_000;
const COOKIE = 'gwa_session';
const ARTIFACTS = join(__dirname, '..', '..', 'test-artifacts');

/** A full-page screenshot at the tab's 375 px width, in test-artifacts/. */
async function keepScreenshot(page: Page, name: string): Promise<void> {
  mkdirSync(ARTIFACTS, { recursive: true });
  const file = join(ARTIFACTS, name);
  await page.screenshot({ path: file, fullPage: true });
  expect(statSync(file).size).toBeGreaterThan(1_000);
}

/** Every secret this file saw (also registered with the suite-wide scan), for its own log check at the end. */
const seenSecrets: string[] = [];
function registerSecrets(...secrets: string[]): void {
  seenSecrets.push(...secrets);
  registerWithScan(...secrets);
}

jest.setTimeout(90_000);

let redis: TestRedis;
let redisClient: Redis;
let provider: OidcTestProvider;
/** A public client (PKCE, no secret). */
let publicApp: CustomerAppProcess;
/** Two replicas of a confidential client behind one public origin (the first one's). */
let replicaA: CustomerAppProcess;
let replicaB: CustomerAppProcess;
let browser: Browser;

const MEMBERSHIPS = {
  alice: [
    { accountId: 'acme', role: 'owner' as const },
    { accountId: 'globex', role: 'viewer' as const },
  ],
};

beforeAll(async () => {
  registerSecrets(SESSION_SECRET, CLIENT_SECRET);
  const [publicPort, replicaPort] = [await freePort(), await freePort()];
  const publicOrigin = `http://127.0.0.1:${publicPort}`;
  const replicaOrigin = `http://127.0.0.1:${replicaPort}`;
  redis = await startTestRedis();
  redisClient = new Redis(redis.url, { disconnectTimeout: 50 });
  provider = await startOidcProvider({
    clients: [
      { client_id: 'dashboard-public', token_endpoint_auth_method: 'none', redirect_uris: [`${publicOrigin}/auth/callback`] },
      {
        client_id: 'dashboard-confidential',
        client_secret: CLIENT_SECRET,
        token_endpoint_auth_method: 'client_secret_basic',
        redirect_uris: [`${replicaOrigin}/auth/callback`],
      },
    ],
    users: {
      alice: { email: 'Alice@Example.com', email_verified: true, name: 'Alice <img src=x onerror=alert(1)>' },
      nobody: { email: 'nobody@example.com', email_verified: true, name: 'No Body' },
    },
  });
  const common = {
    REDIS_URL: redis.url,
    REDIS_TIMEOUT_MS: '1000',
    OIDC_ISSUER_URL: provider.issuer,
    CUSTOMER_SESSION_SECRET: SESSION_SECRET,
    CUSTOMER_PLAIN_HTTP_LOCALHOST: 'true',
    LOG_LEVEL: 'info',
  };
  const replicaEnv = {
    ...common,
    OIDC_CLIENT_ID: 'dashboard-confidential',
    OIDC_CLIENT_SECRET: CLIENT_SECRET,
    OIDC_REDIRECT_URL: `${replicaOrigin}/auth/callback`,
  };
  [publicApp, replicaA, replicaB, browser] = await Promise.all([
    startCustomerApp(
      {
        ...common,
        CUSTOMER_PORT: String(publicPort),
        OIDC_CLIENT_ID: 'dashboard-public',
        OIDC_REDIRECT_URL: `${publicOrigin}/auth/callback`,
        CUSTOMER_SESSION_IDLE_TIMEOUT_MS: String(IDLE_MS),
        CUSTOMER_SESSION_MAX_AGE_MS: String(MAX_AGE_MS),
      },
      MEMBERSHIPS,
    ),
    startCustomerApp({ ...replicaEnv, CUSTOMER_PORT: String(replicaPort) }, MEMBERSHIPS),
    startCustomerApp(replicaEnv, MEMBERSHIPS),
    launchChromium('The customer sign-in tests'),
  ]);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await Promise.all([publicApp?.stop(), replicaA?.stop(), replicaB?.stop()]);
  await provider?.stop();
  redisClient?.disconnect();
  await redis?.stop();
});

// ------------------------------------------------------------------ helpers

const openContexts: BrowserContext[] = [];

afterEach(async () => {
  for (const context of openContexts.splice(0)) await context.close();
});

interface Tab {
  context: BrowserContext;
  page: Page;
  /** Every request the browser made, in order. */
  requests: Request[];
}

async function newTab(): Promise<Tab> {
  const context = await browser.newContext({ viewport: { width: 375, height: 800 } });
  openContexts.push(context);
  // Only loopback: the provider's development login page imports a web font.
  await context.route(/^https?:\/\/(?!127\.0\.0\.1[:/]|localhost[:/])/, (route) => route.abort());
  const page = await context.newPage();
  const requests: Request[] = [];
  page.on('request', (request) => requests.push(request));
  return { context, page, requests };
}

/** From the dashboard's sign-in page through the provider's login form and back. */
async function signIn(tab: Tab, app: CustomerAppProcess, login = 'alice'): Promise<void> {
  const { page } = tab;
  await page.goto(`${app.customerUrl}/`);
  await page.getByRole('link', { name: 'Sign in with your identity provider' }).click();
  await page.locator('input[name="login"]').fill(login);
  await page.locator('input[name="password"]').fill('any password will do');
  const [response] = await Promise.all([
    page.waitForResponse((response) => response.url().includes('/auth/callback'), { timeout: 20_000 }),
    page.getByRole('button', { name: 'Sign-in' }).click(),
  ]);
  await page.waitForLoadState();
  registerCallbackSecrets(response.url());
}

function registerCallbackSecrets(callbackUrl: string): void {
  const params = new URL(callbackUrl).searchParams;
  for (const name of ['code', 'state']) {
    const value = params.get(name);
    if (value) registerSecrets(value);
  }
}

/** The session cookie in this browser: its value (id.signature), registered as secrets. */
async function sessionCookie(context: BrowserContext, app: CustomerAppProcess) {
  const cookies = await context.cookies(app.customerUrl);
  const cookie = cookies.find((c) => c.name === COOKIE);
  if (!cookie) throw new Error(`no ${COOKIE} cookie; cookies: ${cookies.map((c) => c.name).join(', ')}`);
  const id = cookie.value.slice(0, cookie.value.lastIndexOf('.'));
  registerSecrets(cookie.value, id);
  return { cookie, id, header: `${COOKIE}=${cookie.value}` };
}

const sessionKey = (id: string) => `gwa:session:${createHash('sha256').update(id).digest('hex')}`;

/** A request as a script or another site would send it (no browser), with the given cookie and headers. */
async function send(app: CustomerAppProcess, method: string, path: string, headers: Record<string, string> = {}, body?: string) {
  const response = await fetch(`${app.customerUrl}${path}`, {
    method,
    headers,
    redirect: 'manual',
    ...(body !== undefined ? { body } : {}),
  });
  return {
    status: response.status,
    location: response.headers.get('location'),
    setCookie: response.headers.getSetCookie(),
    text: await response.text(),
  };
}

async function csrfTokenOf(app: CustomerAppProcess, cookieHeader: string): Promise<string> {
  const session = await send(app, 'GET', '/auth/session', { cookie: cookieHeader });
  expect(session.status).toBe(200);
  const token = (JSON.parse(session.text) as { csrfToken: string }).csrfToken;
  registerSecrets(token);
  return token;
}

function refusals(app: CustomerAppProcess): { reason?: string; claim?: string; oauthError?: string }[] {
  return app
    .logs()
    .map((line) => JSON.parse(line) as { event?: string; reason?: string; claim?: string; oauthError?: string })
    .filter((line) => line.event === 'customer_sign_in_refused');
}

/** The refusals logged since `before`, once `count` of them have arrived (the service's log lines come from a child process, a little after its answers) or 2 s have passed. */
async function refusalsSince(app: CustomerAppProcess, before: number, count: number): Promise<ReturnType<typeof refusals>> {
  for (let waited = 0; refusals(app).length - before < count && waited < 2000; waited += 50) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return refusals(app).slice(before);
}

async function expectSignedOut(page: Page, app: CustomerAppProcess): Promise<void> {
  await page.goto(`${app.customerUrl}/`);
  await page.getByRole('link', { name: 'Sign in with your identity provider' }).waitFor();
}

// ------------------------------------------------------------------ sign in, see, sign out

describe('signing in with OpenID Connect', () => {
  it('signs in through the provider (public client: PKCE S256, state, nonce), shows who and which accounts, and signs out server-side', async () => {
    const tab = await newTab();
    const { page, context } = tab;
    await signIn(tab, publicApp);

    // The authorization request: code flow, PKCE with S256, state and nonce, the configured redirect URL and scopes.
    const authorization = tab.requests
      .map((request) => new URL(request.url()))
      .find((url) => url.href.startsWith(`${provider.issuer}/auth?`));
    expect(authorization).toBeDefined();
    const params = authorization!.searchParams;
    expect(params.get('response_type')).toBe('code');
    expect(params.get('client_id')).toBe('dashboard-public');
    expect(params.get('redirect_uri')).toBe(`${publicApp.customerUrl}/auth/callback`);
    expect(params.get('scope')).toBe('openid email profile');
    expect(params.get('code_challenge_method')).toBe('S256');
    expect(params.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(params.get('state')).toMatch(/^[A-Za-z0-9_-]{20,}$/);
    expect(params.get('nonce')).toMatch(/^[A-Za-z0-9_-]{20,}$/);
    expect(params.get('code_verifier')).toBeNull();
    for (const name of ['state', 'nonce', 'code_challenge']) registerSecrets(params.get(name)!);

    // Signed in: who (the provider's name claim, as text), and the accounts the membership lookup gave.
    await page.getByRole('heading', { name: 'Your accounts' }).waitFor();
    expect(await page.getByTestId('signed-in-as').textContent()).toBe(
      `Signed in as Alice <img src=x onerror=alert(1)> (${provider.issuer})`,
    );
    expect(await page.locator('img').count()).toBe(0);
    expect(await page.getByTestId('accounts').locator('li').allTextContents()).toEqual([
      'acme: owner (keys and members)',
      'globex: viewer (sees keys and usage)',
    ]);
    expect(await styleOf(page, 'header.topbar', 'backgroundColor')).toBe('rgb(29, 35, 48)');
    await keepScreenshot(page, 'customer-signed-in.png');

    // The cookie: HttpOnly, SameSite=Lax, Path=/, not Secure only because of CUSTOMER_PLAIN_HTTP_LOCALHOST; no expiry (browser session).
    const { cookie, id } = await sessionCookie(context, publicApp);
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/', secure: false, expires: -1 });
    // The session is in Redis under the hash of its id, with a time to live; the id itself is nowhere in Redis.
    expect(await redisClient.exists(sessionKey(id))).toBe(1);
    const ttl = await redisClient.pttl(sessionKey(id));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(IDLE_MS);
    expect(await redisClient.keys(`*${id}*`)).toEqual([]);
    const stored = (await redisClient.get(sessionKey(id)))!;
    expect(JSON.parse(stored)).toMatchObject({
      identity: { issuer: provider.issuer, subject: 'alice', verifiedEmail: 'alice@example.com' },
    });
    for (const secret of provider.issued) expect(stored).not.toContain(secret);

    // Sign out: the session is deleted from Redis, the cookie cleared, and the old cookie is worth nothing.
    await page.getByRole('button', { name: 'Sign out' }).click();
    expect(await page.getByTestId('notice').textContent()).toBe('You are signed out.');
    expect(await redisClient.exists(sessionKey(id))).toBe(0);
    expect((await context.cookies(publicApp.customerUrl)).map((c) => c.name)).not.toContain(COOKIE);
    const replayed = await send(publicApp, 'GET', '/auth/session', { cookie: `${COOKIE}=${cookie.value}` });
    expect(replayed.status).toBe(401);
    expect(JSON.parse(replayed.text)).toEqual({ error: { code: 'not_signed_in', message: 'Sign in first.' } });
  });

  it('signs in a confidential client (client_secret_basic), and another replica serves the same session', async () => {
    const tab = await newTab();
    await signIn(tab, replicaA);
    await tab.page.getByRole('heading', { name: 'Your accounts' }).waitFor();
    const { header } = await sessionCookie(tab.context, replicaA);

    // Replica B (same settings, same Redis) knows the session and its CSRF token.
    const onB = await send(replicaB, 'GET', '/', { cookie: header });
    expect(onB.status).toBe(200);
    expect(onB.text).toContain('Signed in as <strong>Alice &lt;img src=x onerror=alert(1)&gt;</strong>');
    const token = await csrfTokenOf(replicaA, header);
    const changed = await send(replicaB, 'POST', '/api/probe', { cookie: header, origin: replicaA.customerUrl, 'x-csrf-token': token });
    expect(changed.status).toBe(200);
    expect(JSON.parse(changed.text)).toEqual({ changed: true, subject: 'alice' });
    // The client secret never reaches the browser.
    expect(tab.requests.map((request) => request.url()).join('\n')).not.toContain(CLIENT_SECRET);
  });

  it('shows a clear "no access" page to a person who is a member of no account', async () => {
    const tab = await newTab();
    await signIn(tab, publicApp, 'nobody');
    const { page } = tab;
    await page.getByRole('heading', { name: 'No access' }).waitFor();
    expect(await page.getByTestId('no-access').textContent()).toBe(
      'You are not a member of any account here, so there is nothing to show.',
    );
    const body = (await page.locator('main').textContent()) ?? '';
    expect(body).toContain(`issuer ${provider.issuer} and subject nobody or your email address nobody@example.com`);
    // Styled as the API Keys page: its stylesheet (allowed by the page's CSP) and its top bar.
    expect(await styleOf(page, 'header.topbar', 'backgroundColor')).toBe('rgb(29, 35, 48)');
    expect(await styleOf(page, 'section.card', 'borderRadius')).toBe('8px');
    await keepScreenshot(page, 'customer-no-access.png');
    const status = await send(publicApp, 'GET', '/', { cookie: (await sessionCookie(tab.context, publicApp)).header });
    expect(status.status).toBe(403);
    await page.getByRole('button', { name: 'Sign out' }).click();
    expect(await page.getByTestId('notice').textContent()).toBe('You are signed out.');
  });
});

// ------------------------------------------------------------------ refusals

describe("the provider's answer is checked", () => {
  it('refuses a tampered state, and nothing is signed in', async () => {
    const tab = await newTab();
    await provider.tamperNext({ response: { state: 'a-state-this-browser-never-sent' } });
    const before = refusals(publicApp).length;
    await signIn(tab, publicApp);
    expect(new URL(tab.page.url()).searchParams.get('state')).toBe('a-state-this-browser-never-sent');
    await tab.page.getByRole('heading', { name: 'Sign-in did not complete' }).waitFor();
    expect(await tab.page.getByTestId('error').textContent()).toContain('does not match a sign-in started in this browser');
    expect(await refusalsSince(publicApp, before, 1)).toEqual([expect.objectContaining({ reason: 'unknown_sign_in' })]);
    await expectSignedOut(tab.page, publicApp);
  });

  it('refuses a replayed authorization code: in the same browser, and with a fresh sign-in of its own', async () => {
    const tab = await newTab();
    let callbackUrl = '';
    tab.page.on('request', (request) => {
      if (request.url().startsWith(`${publicApp.customerUrl}/auth/callback?`)) callbackUrl = request.url();
    });
    await signIn(tab, publicApp);
    await tab.page.getByRole('heading', { name: 'Your accounts' }).waitFor();
    expect(callbackUrl).not.toBe('');
    const before = refusals(publicApp).length;

    // 1. The same answer again: its sign-in was used up.
    await tab.page.goto(callbackUrl);
    await tab.page.getByRole('heading', { name: 'Sign-in did not complete' }).waitFor();

    // 2. The code with a new sign-in's state (another browser that got hold of the code): the provider refuses the code.
    const started = await send(publicApp, 'GET', '/auth/login');
    expect(started.status).toBe(303);
    const freshState = new URL(started.location!).searchParams.get('state')!;
    const freshCookie = /^gwa_session=[^;]+/.exec(started.setCookie.join('\n'))?.[0];
    expect(freshCookie).toBeDefined();
    registerSecrets(freshState, freshCookie!.slice(COOKIE.length + 1));
    const injected = new URL(callbackUrl);
    injected.searchParams.set('state', freshState);
    const answer = await send(publicApp, 'GET', `${injected.pathname}${injected.search}`, { cookie: freshCookie! });
    expect(answer.status).toBe(400);
    expect(answer.text).toContain('The identity provider refused to complete this sign-in (invalid_grant)');
    expect(await refusalsSince(publicApp, before, 2)).toEqual([
      expect.objectContaining({ reason: 'unknown_sign_in' }),
      expect.objectContaining({ reason: 'code_refused', oauthError: 'invalid_grant' }),
    ]);
    const notSignedIn = await send(publicApp, 'GET', '/auth/session', { cookie: freshCookie! });
    expect(notSignedIn.status).toBe(401);
  });

  it('refuses an ID token whose nonce is not the one this sign-in sent', async () => {
    const tab = await newTab();
    // The authorization request reaches the provider with another nonce (as a code injected from another sign-in would carry).
    await provider.tamperNext({ request: { nonce: 'a-nonce-this-sign-in-never-sent' } });
    const before = refusals(publicApp).length;
    await signIn(tab, publicApp);
    await tab.page.getByRole('heading', { name: 'Sign-in did not complete' }).waitFor();
    expect(await tab.page.getByTestId('error').textContent()).toBe(
      "The identity provider's ID token was not issued for this sign-in (its nonce does not match).",
    );
    expect(await refusalsSince(publicApp, before, 1)).toEqual([expect.objectContaining({ reason: 'response_invalid', claim: 'nonce' })]);
    await expectSignedOut(tab.page, publicApp);
  });
});

// ------------------------------------------------------------------ session lifetime

describe('sessions end on the server', () => {
  it('after the idle timeout, on the service clock: the page says so and the session is gone from Redis', async () => {
    const tab = await newTab();
    await signIn(tab, publicApp);
    const { id } = await sessionCookie(tab.context, publicApp);
    await publicApp.advanceClock(IDLE_MS - 10_000);
    await tab.page.goto(`${publicApp.customerUrl}/`);
    await tab.page.getByRole('heading', { name: 'Your accounts' }).waitFor();
    await publicApp.advanceClock(IDLE_MS);
    await tab.page.goto(`${publicApp.customerUrl}/`);
    expect(await tab.page.getByTestId('notice').textContent()).toBe(
      'Your session ended because it was not used for a while. Sign in again to continue.',
    );
    expect(await redisClient.exists(sessionKey(id))).toBe(0);
  });

  it('at the maximum age, however active', async () => {
    const tab = await newTab();
    await signIn(tab, publicApp);
    const { id, header } = await sessionCookie(tab.context, publicApp);
    const step = IDLE_MS / 2;
    for (let elapsed = step; elapsed < MAX_AGE_MS; elapsed += step) {
      await publicApp.advanceClock(step);
      expect((await send(publicApp, 'GET', '/auth/session', { cookie: header })).status).toBe(200);
    }
    await publicApp.advanceClock(step);
    const ended = await send(publicApp, 'GET', '/auth/session', { cookie: header });
    expect(ended.status).toBe(401);
    expect(JSON.parse(ended.text)).toEqual({ error: { code: 'session_expired', message: 'Your session has ended. Sign in again.' } });
    expect(await redisClient.exists(sessionKey(id))).toBe(0);
    await tab.page.goto(`${publicApp.customerUrl}/`);
    await tab.page.getByRole('link', { name: 'Sign in with your identity provider' }).waitFor();
  });
});

// ------------------------------------------------------------------ cross-site requests

describe('cross-site request forgery', () => {
  let evil: Server | undefined;
  afterEach(async () => {
    await new Promise((resolve) => (evil ? evil.close(resolve) : resolve(undefined)));
    evil = undefined;
  });

  it('refuses a state-changing request without the right Origin or without the session CSRF token', async () => {
    const tab = await newTab();
    await signIn(tab, publicApp);
    const { header, id } = await sessionCookie(tab.context, publicApp);
    const token = await csrfTokenOf(publicApp, header);
    const origin = publicApp.customerUrl;
    const json = { cookie: header, 'content-type': 'application/json' };
    const errorOf = (text: string) => (JSON.parse(text) as { error: { code: string } }).error.code;

    const otherOrigin = await send(publicApp, 'POST', '/api/probe', { ...json, origin: 'http://localhost:1', 'x-csrf-token': token }, '{}');
    expect([otherOrigin.status, errorOf(otherOrigin.text)]).toEqual([403, 'cross_site_request']);
    const noOrigin = await send(publicApp, 'POST', '/api/probe', { ...json, 'x-csrf-token': token }, '{}');
    expect([noOrigin.status, errorOf(noOrigin.text)]).toEqual([403, 'cross_site_request']);
    const noToken = await send(publicApp, 'POST', '/api/probe', { ...json, origin }, '{}');
    expect([noToken.status, errorOf(noToken.text)]).toEqual([403, 'csrf_token_missing']);
    const wrongToken = await send(publicApp, 'POST', '/api/probe', { ...json, origin, 'x-csrf-token': `${token.slice(0, -2)}xx` }, '{}');
    expect([wrongToken.status, errorOf(wrongToken.text)]).toEqual([403, 'csrf_token_invalid']);
    // The sign-out form without its token field, and from another origin: refused, still signed in.
    const form = { cookie: header, 'content-type': 'application/x-www-form-urlencoded' };
    expect((await send(publicApp, 'POST', '/auth/logout', { ...form, origin }, 'x=1')).status).toBe(403);
    expect(
      (await send(publicApp, 'POST', '/auth/logout', { ...form, origin: 'http://localhost:1' }, `_csrf=${encodeURIComponent(token)}`))
        .status,
    ).toBe(403);
    expect(await redisClient.exists(sessionKey(id))).toBe(1);

    const allowed = await send(publicApp, 'POST', '/api/probe', { ...json, origin, 'x-csrf-token': token }, '{}');
    expect([allowed.status, JSON.parse(allowed.text)]).toEqual([200, { changed: true, subject: 'alice' }]);
  });

  it('a form on another site posting to the dashboard in the signed-in browser changes nothing', async () => {
    const tab = await newTab();
    await signIn(tab, publicApp);
    const { id } = await sessionCookie(tab.context, publicApp);
    const evilPort = await freePort();
    evil = createServer((_request, response) => {
      response.setHeader('content-type', 'text/html');
      response.end(
        `<form method="post" action="${publicApp.customerUrl}/auth/logout"><input type="hidden" name="_csrf" value="guess"><button>Win a prize</button></form>` +
          `<form method="post" action="${publicApp.customerUrl}/api/probe"><button>Another prize</button></form>`,
      );
    });
    await new Promise<void>((resolve) => evil!.listen(evilPort, '127.0.0.1', resolve));
    const logs = publicApp.logs().length;
    // localhost and 127.0.0.1 are different sites: the SameSite=Lax cookie stays home, and the Origin is foreign.
    for (const button of ['Win a prize', 'Another prize']) {
      await tab.page.goto(`http://localhost:${evilPort}/`);
      const [response] = await Promise.all([
        tab.page.waitForResponse(`${publicApp.customerUrl}/**`),
        tab.page.getByRole('button', { name: button }).click(),
      ]);
      expect(response.status()).toBe(403);
    }
    // The service runs in a child process: its log lines reach this process a little after the answers.
    const refusals = () =>
      publicApp
        .logs()
        .slice(logs)
        .filter((line) => line.includes('customer_cross_site_refused'));
    for (let waited = 0; refusals().length < 2 && waited < 2000; waited += 50) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(refusals()).toHaveLength(2);
    expect(await redisClient.exists(sessionKey(id))).toBe(1);
    await tab.page.goto(`${publicApp.customerUrl}/`);
    await tab.page.getByRole('heading', { name: 'Your accounts' }).waitFor();
  });
});

// ------------------------------------------------------------------ secrets

describe('secrets stay out of the logs', () => {
  it('no log line of any service process holds a code, token, session id, CSRF token or the client secret', () => {
    expect(provider.issued.length).toBeGreaterThan(0);
    const lines = [publicApp, replicaA, replicaB].flatMap((app, index) => app.logs().map((text) => ({ file: `app-${index}`, text })));
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.some((line) => line.text.includes('customer_sign_in'))).toBe(true);
    expect(findLeaks(lines, [...provider.issued, ...seenSecrets])).toEqual([]);
  });
});
