/**
 * Operators sign in to the operator dashboard with OpenID Connect, end to end:
 * a real OpenID provider (oidc-provider, its own process) whose users carry a
 * `groups` claim, the built service on a real Redis, and Debian's Chromium.
 * One operator of each role signs in and sees what they can and cannot do;
 * what the page hides, the admin API refuses too. Chromium is required (never skips).
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { launchChromium } from '../support/chromium';
import { startCustomerApp, startOidcProvider, type CustomerAppProcess, type OidcTestProvider } from '../support/customer-stack';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { registerSecrets } from '../support/secret-scan';
import { freePort } from '../support/free-port';
import { until } from '../support/waiting';
import { loopbackPage, signInThroughProvider } from '../support/provider-sign-in';
import { TEST_ADMIN_TOKEN } from '../support/running-app';

jest.setTimeout(90_000);

const SESSION_SECRET = 'operator-journey-session-secret-0123456789abcdef';

let redis: TestRedis;
let provider: OidcTestProvider;
let app: CustomerAppProcess;
let browser: Browser;

beforeAll(async () => {
  registerSecrets(SESSION_SECRET, TEST_ADMIN_TOKEN);
  const adminPort = await freePort();
  const adminOrigin = `http://127.0.0.1:${adminPort}`;
  redis = await startTestRedis();
  provider = await startOidcProvider({
    clients: [
      { client_id: 'operator-dashboard', token_endpoint_auth_method: 'none', redirect_uris: [`${adminOrigin}/dashboard/auth/callback`] },
    ],
    users: {
      ada: { name: 'Ada Admin', groups: ['staff', 'gw-admins'] },
      bill: { name: 'Bill Billing', groups: ['staff', 'gw-billing'] },
      sue: { name: 'Sue Support', groups: ['gw-support'] },
      mallory: { name: 'Mallory', groups: ['staff'] },
    },
  });
  [app, browser] = await Promise.all([
    startCustomerApp(
      {
        REDIS_URL: redis.url,
        REDIS_TIMEOUT_MS: '1000',
        ADMIN_PORT: String(adminPort),
        ADMIN_TOKEN: TEST_ADMIN_TOKEN,
        OPERATOR_OIDC_ISSUER_URL: provider.issuer,
        OPERATOR_OIDC_CLIENT_ID: 'operator-dashboard',
        OPERATOR_OIDC_REDIRECT_URL: `${adminOrigin}/dashboard/auth/callback`,
        OPERATOR_OIDC_ROLE_MAP: 'gw-admins=admin,gw-billing=billing,gw-support=support',
        OPERATOR_SESSION_SECRET: SESSION_SECRET,
        OPERATOR_PLAIN_HTTP_LOCALHOST: 'true',
        LOG_LEVEL: 'info',
      },
      'store',
    ),
    launchChromium('The operator sign-in journey'),
  ]);
  const admin = (method: string, path: string, body?: object) =>
    fetch(`${app.adminUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  expect((await admin('POST', '/admin/accounts', { id: 'acme', name: 'Acme Corp', billing: { creditBalance: 1000 } })).status).toBe(201);
  expect((await admin('POST', '/admin/accounts/acme/keys', { name: 'prod backend' })).status).toBe(201);
  // An operator-level change (no account), for the audit section to show.
  const automation = await admin('POST', '/admin/operator-tokens', { name: 'journey automation', scopes: ['keys:read'] });
  expect(automation.status).toBe(201);
  registerSecrets(((await automation.json()) as { token: string }).token);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await app?.stop();
  await provider?.stop();
  await redis?.stop();
});

const openContexts: BrowserContext[] = [];
afterEach(async () => {
  for (const context of openContexts.splice(0)) await context.close();
});

async function signIn(login: string): Promise<Page> {
  const { context, page } = await loopbackPage(browser, openContexts);
  await signInThroughProvider(page, {
    startUrl: `${app.adminUrl}/dashboard`,
    link: 'Sign in with single sign-on',
    login,
    callbackPath: '/dashboard/auth/callback',
  });
  for (const cookie of await context.cookies(app.adminUrl)) registerSecrets(cookie.value);
  return page;
}

/** A call from the signed-in page itself, with its cookie, Origin and CSRF token: what a hidden button would have sent. */
async function callFromPage(page: Page, method: string, path: string, body?: object): Promise<number> {
  return page.evaluate<number, { method: string; path: string; body?: object }>(
    async ({ method, path, body }) => {
      const session = (await (await fetch('/dashboard/auth/session')).json()) as { csrfToken: string };
      const response = await fetch(path, {
        method,
        headers: { 'x-csrf-token': session.csrfToken, 'content-type': 'application/json' },
        body: JSON.stringify(body ?? {}),
      });
      return response.status;
    },
    { method, path, ...(body ? { body } : {}) },
  );
}

describe('operator sign-in, one operator of each role', () => {
  it('admin: sees keys with their actions, creates a key, and reads the audit trail naming them', async () => {
    const page = await signIn('ada');
    await page.getByTestId('operator-who').filter({ hasText: 'Signed in as Ada Admin (admin)' }).waitFor();
    await page.getByTestId('keys-table').getByText('prod backend').waitFor();
    expect(await page.getByTestId('create-section').isVisible()).toBe(true);
    expect(await page.getByRole('button', { name: /^Revoke key/ }).count()).toBe(1);

    await page.locator('#key-name').fill('made by ada');
    await page.getByRole('button', { name: 'Create key' }).click();
    await page
      .getByTestId('new-key-value')
      .filter({ hasText: /^gk_live_/ })
      .waitFor();
    const created = (await page.getByTestId('new-key-value').textContent()) ?? '';
    registerSecrets(created);
    expect(created).toMatch(/^gk_live_/);
    await page.getByRole('button', { name: 'Done' }).click();

    await page.getByTestId('audit-section').waitFor();
    await page.locator('#audit-actor').fill('ada');
    await page.locator('#audit-apply').click();
    await page.getByTestId('audit-entry').filter({ hasText: 'key.create on acme' }).filter({ hasText: 'by ada @' }).waitFor();
  });

  it('billing: no keys and no audit on the page, refused keys by the API, but may set the spend cap', async () => {
    const page = await signIn('bill');
    await page.getByTestId('operator-who').filter({ hasText: '(billing)' }).waitFor();
    await page.getByTestId('keys-not-allowed').waitFor();
    expect(await page.getByTestId('keys-table').isVisible()).toBe(false);
    expect(await page.getByTestId('create-section').isVisible()).toBe(false);
    expect(await page.getByTestId('audit-section').isVisible()).toBe(false);
    expect(await callFromPage(page, 'POST', '/admin/accounts/acme/keys', { name: 'sneaky' })).toBe(403);
    expect(await callFromPage(page, 'PATCH', '/admin/accounts/acme', { billing: { monthlySpendCap: 50_000 } })).toBe(200);
    expect(await callFromPage(page, 'PATCH', '/admin/accounts/acme', { name: 'Renamed' })).toBe(403);
  });

  it('support: reads keys and the audit (operator tokens made too), with no key actions; every change is refused', async () => {
    const page = await signIn('sue');
    await page.getByTestId('operator-who').filter({ hasText: '(support)' }).waitFor();
    await page.getByTestId('keys-table').getByText('prod backend').waitFor();
    expect(await page.getByRole('button', { name: /^Revoke key/ }).count()).toBe(0);
    expect(await page.getByRole('button', { name: /^Regenerate key/ }).count()).toBe(0);
    expect(await page.getByTestId('create-section').isVisible()).toBe(false);
    await page.getByTestId('audit-entry').first().waitFor();
    await page.locator('main:not([aria-busy])').waitFor();
    await page.locator('#audit-action').selectOption('operator_token.create');
    await page.locator('#audit-apply').click();
    await page
      .getByTestId('audit-entry')
      .filter({ hasText: 'operator_token.create of token “journey automation”' })
      .filter({ hasText: 'by break-glass ADMIN_TOKEN' })
      .waitFor();
    expect(await callFromPage(page, 'POST', '/admin/accounts/acme/credit', { amount: 100 })).toBe(403);
    expect(await callFromPage(page, 'POST', '/admin/accounts/acme/keys', { name: 'sneaky' })).toBe(403);
  });

  it('someone without a mapped group is not signed in, and is told why', async () => {
    const page = await signIn('mallory');
    try {
      await page.getByTestId('error').filter({ hasText: 'none of your groups is mapped to an operator role' }).waitFor();
    } catch (error) {
      // Say where the sign-in ended and what the page says, not only that the words never showed.
      const shown = await page.getByTestId('error').allTextContents();
      throw new Error(`signed in as mallory, the page at ${page.url()} says: ${shown.join(' | ') || 'nothing'}`, { cause: error });
    }
    expect(await page.getByTestId('keys-section').isVisible()).toBe(false);
  });

  it('signing out ends the session, also while the page is still loading what the operator may see', async () => {
    const { context, page } = await loopbackPage(browser, openContexts);
    // The sign-in's read of an account's keys waits until released: the page is busy when Sign out is clicked.
    let releaseKeys!: () => void;
    const keysHeld = new Promise<void>((resolve) => (releaseKeys = resolve));
    let keysRead = false;
    await page.route(/\/admin\/accounts\/[^/]+\/keys$/, async (route) => {
      keysRead = true;
      await keysHeld;
      await route.continue();
    });
    await signInThroughProvider(page, {
      startUrl: `${app.adminUrl}/dashboard`,
      link: 'Sign in with single sign-on',
      login: 'sue',
      callbackPath: '/dashboard/auth/callback',
    });
    for (const cookie of await context.cookies(app.adminUrl)) registerSecrets(cookie.value);
    try {
      await page.getByTestId('operator-who').filter({ hasText: '(support)' }).waitFor();
      await until(() => keysRead, 'the keys read');
      expect(await page.locator('main[aria-busy="true"]').count()).toBe(1);
      await page.getByTestId('sign-out').click();
      await page.getByTestId('sign-in').waitFor();
    } finally {
      releaseKeys();
    }
    expect(await page.evaluate(async () => (await fetch('/admin/accounts')).status)).toBe(401);
  });
});
