/**
 * The admin dashboard ("API Keys") driven in a real browser: Debian's
 * Chromium through playwright-core, against the real server on a real Redis.
 * Chromium is required: without /usr/bin/chromium the suite fails (never skips).
 */
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Locator, type Page } from 'playwright-core';
import { startAppUnderTest, TEST_ADMIN_TOKEN, type AppUnderTest } from '../support/running-app';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { registerSecrets } from '../support/secret-scan';

const CHROMIUM = '/usr/bin/chromium';
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
const ARTIFACTS = join(__dirname, '..', '..', 'test-artifacts');
const TOKEN_STORAGE_KEY = 'gateway-authz.admin-token';
const FULL_KEY = /^gk_(live|test)_[0-9A-Za-z]{36}$/;
const XSS_KEY_NAME = '<img src=x onerror=alert(1)>';
const XSS_ACCOUNT_NAME = '<b onmouseover=alert(2)>Evil & Co</b>';

jest.setTimeout(60_000);

let redis: TestRedis | undefined;
let server: AppUnderTest;
let browser: Browser | undefined;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `The dashboard tests need Chromium at ${CHROMIUM} and never skip. ` +
        'Install the Debian package `chromium` (apt-get update && apt-get install -y chromium), as .ci/run does.',
    );
  }
  browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  redis = await startTestRedis();
  // Chromium shares the (small) machine with Redis and the server: the default
  // 50 ms per-command deadline, meant for the Check hot path, is too tight here.
  server = await startAppUnderTest({ redisUrl: redis.url, env: { REDIS_TIMEOUT_MS: '1000' } });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
  await redis?.stop();
});

// ------------------------------------------------------------------ helpers

interface Tab {
  context: BrowserContext;
  page: Page;
  /** Every window.alert/confirm/prompt the page opened. */
  dialogs: string[];
  /** Uncaught page errors and console messages about the Content-Security-Policy. */
  problems: string[];
}

const openContexts: BrowserContext[] = [];

async function openDashboard(): Promise<Tab> {
  const context = await browser!.newContext({ viewport: { width: 1280, height: 800 } });
  openContexts.push(context);
  const page = await context.newPage();
  const dialogs: string[] = [];
  const problems: string[] = [];
  page.on('dialog', (dialog) => {
    dialogs.push(`${dialog.type()}: ${dialog.message()}`);
    void dialog.dismiss();
  });
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    if (/content security policy/i.test(message.text())) problems.push(`CSP: ${message.text()}`);
  });
  const response = await page.goto(`${server.adminUrl}/dashboard`);
  expect(response?.status()).toBe(200);
  return { context, page, dialogs, problems };
}

afterEach(async () => {
  for (const context of openContexts.splice(0)) await context.close();
});

async function signIn(page: Page, token = TEST_ADMIN_TOKEN): Promise<void> {
  await page.getByLabel('Admin token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

async function signedIn(page: Page): Promise<void> {
  await signIn(page);
  try {
    await page.getByRole('heading', { name: 'API Keys' }).waitFor({ timeout: 10_000 });
  } catch (error) {
    const serverErrors = server.logs.lines.filter((line) => line.includes('"level":"error"') || line.includes('"level":50'));
    throw new Error(
      `not signed in; the page says: ${await page.getByTestId('error').textContent()}\nserver errors:\n${serverErrors.join('')}`,
      { cause: error },
    );
  }
}

async function chooseAccount(page: Page, accountId: string): Promise<void> {
  const select = page.getByLabel('Account', { exact: true });
  await page.locator(`#account-select option[value="${accountId}"]`).waitFor({ state: 'attached' });
  await select.selectOption(accountId);
  await page.locator('#keys-caption', { hasText: 'Keys of ' }).waitFor();
}

function keyRow(page: Page, keyId: string): Locator {
  return page.locator(`tr[data-key-id="${keyId}"]`);
}

async function waitForRowStatus(page: Page, keyId: string, status: string): Promise<void> {
  await page.locator(`tr[data-key-id="${keyId}"][data-status="${status}"]`).waitFor();
}

/** The full key in the new-key panel; registered as a secret so the suite's log scan looks for it. */
async function shownKey(page: Page): Promise<string> {
  const panel = page.getByTestId('new-key-panel');
  await panel.waitFor();
  const key = (await panel.getByTestId('new-key-value').textContent()) ?? '';
  registerSecrets(key);
  expect(key).toMatch(FULL_KEY);
  expect(await panel.getByTestId('new-key-warning').textContent()).toBe('This key will not be shown again. Store it now.');
  return key;
}

async function dismissKey(page: Page, key: string): Promise<void> {
  await page.getByRole('button', { name: 'Done' }).click();
  await page.getByTestId('new-key-panel').waitFor({ state: 'hidden' });
  expect(await page.content()).not.toContain(key);
  expect(await page.content()).not.toContain(key.slice(12));
}

async function createAccount(id: string, name: string): Promise<void> {
  const created = await server.admin('POST', '/admin/accounts', { id, name });
  expect(created.status).toBe(201);
}

async function createKey(accountId: string, name: string, environment: 'live' | 'test' = 'live') {
  const created = await server.admin('POST', `/admin/accounts/${accountId}/keys`, { name, environment });
  expect(created.status).toBe(201);
  return created.body as { id: string; key: string; prefix: string };
}

async function apiKey(keyId: string) {
  const answer = await server.admin('GET', `/admin/keys/${keyId}`);
  expect(answer.status).toBe(200);
  return answer.body as { status: string; revokeAt: string | null; revokedAt: string | null; replacedBy: string | null };
}

async function apiKeys(accountId: string) {
  const answer = await server.admin('GET', `/admin/accounts/${accountId}/keys`);
  expect(answer.status).toBe(200);
  return answer.body.keys as Array<{ id: string; prefix: string; name: string; status: string; replaces: string | null }>;
}

function expectNoProblems(tab: Tab): void {
  expect(tab.problems).toEqual([]);
  expect(tab.dialogs).toEqual([]);
}

// ------------------------------------------------------------------ the page itself

describe('GET /dashboard', () => {
  it('serves the page and its assets without a token, with strict security headers', async () => {
    for (const [path, type] of [
      ['/dashboard', 'text/html'],
      ['/dashboard/app.js', 'text/javascript'],
      ['/dashboard/app.css', 'text/css'],
    ] as const) {
      const response = await fetch(`${server.adminUrl}${path}`);
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toContain(type);
      expect(response.headers.get('x-content-type-options')).toBe('nosniff');
      expect(response.headers.get('cache-control')).toBe('no-store');
      expect(response.headers.get('referrer-policy')).toBe('no-referrer');
      const csp = response.headers.get('content-security-policy') ?? '';
      for (const directive of [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "img-src 'self' data:",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
      ]) {
        expect(csp).toContain(directive);
      }
      expect(csp).not.toContain('unsafe-inline');
      expect(csp).not.toContain('unsafe-eval');
    }
    const page = await (await fetch(`${server.adminUrl}/dashboard`)).text();
    expect(page).toContain('API Keys');
    expect(page).not.toMatch(/<script>|<style|style=|\son[a-z]+=/i);
  });

  it('keeps the token requirement on everything else', async () => {
    for (const [method, path] of [
      ['GET', '/dashboard/other.js'],
      ['GET', '/dashboard/'],
      ['POST', '/dashboard'],
      ['HEAD', '/dashboard'],
      ['GET', '/admin/accounts'],
      ['GET', '/'],
    ] as const) {
      const response = await fetch(`${server.adminUrl}${path}`, { method });
      expect({ method, path, status: response.status }).toEqual({ method, path, status: 401 });
    }
  });
});

// ------------------------------------------------------------------ browser flows

describe('dashboard in Chromium', () => {
  beforeAll(async () => {
    await createAccount('acme', 'Acme Corp');
    await createAccount('create-flow', 'Create Flow Ltd');
    await createAccount('rotate-now', 'Rotate Now Inc');
    await createAccount('rotate-grace', 'Rotate Grace GmbH');
    await createAccount('revoke-flow', 'Revoke Flow SA');
    await createAccount('xss', XSS_ACCOUNT_NAME);
  });

  it('refuses a wrong token plainly and lists the accounts with the right one', async () => {
    const tab = await openDashboard();
    const { page } = tab;

    await signIn(page, 'not-the-admin-token-at-all');
    const alert = page.getByTestId('error');
    await page.getByRole('alert').filter({ hasText: 'admin token' }).waitFor();
    expect(await alert.textContent()).toBe("Send the admin token as 'Authorization: Bearer <ADMIN_TOKEN>'. (HTTP 401, unauthorized)");
    expect(await page.getByRole('heading', { name: 'API Keys' }).isVisible()).toBe(false);
    expect(await page.evaluate(`sessionStorage.getItem(${JSON.stringify(TOKEN_STORAGE_KEY)})`)).toBeNull();

    await signIn(page);
    await page.getByRole('heading', { name: 'API Keys' }).waitFor();
    expect(await alert.textContent()).toBe('');
    const options = await page.locator('#account-select option').allTextContents();
    expect(options).toEqual(expect.arrayContaining(['Acme Corp (acme)', 'Create Flow Ltd (create-flow)']));
    expect(await page.getByTestId('hint').textContent()).toBe(
      "Use one key per environment or integration (e.g. 'prod backend', 'staging', 'CI'), so you can rotate one " +
        'without touching the others. Rotate a key immediately if it was exposed in a client, a screenshot or a repository.',
    );
    expect(await page.getByLabel('Admin token').inputValue()).toBe('');
    expectNoProblems(tab);
  });

  it('keeps the token in sessionStorage only (this tab), and Sign out removes it', async () => {
    const tab = await openDashboard();
    const { page, context } = tab;
    await signedIn(page);

    expect(await page.evaluate(`sessionStorage.getItem(${JSON.stringify(TOKEN_STORAGE_KEY)})`)).toBe(TEST_ADMIN_TOKEN);
    expect(await page.evaluate('localStorage.length')).toBe(0);
    expect(await page.evaluate('document.cookie')).toBe('');
    expect(await context.cookies()).toEqual([]);

    // A reload of the same tab stays signed in; another tab does not get the token.
    await page.reload();
    await page.getByRole('heading', { name: 'API Keys' }).waitFor();
    const otherTab = await context.newPage();
    await otherTab.goto(`${server.adminUrl}/dashboard`);
    await otherTab.getByLabel('Admin token').waitFor();
    expect(await otherTab.evaluate(`sessionStorage.getItem(${JSON.stringify(TOKEN_STORAGE_KEY)})`)).toBeNull();

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('Admin token').waitFor();
    expect(await page.evaluate(`sessionStorage.length`)).toBe(0);
    expect(await page.getByRole('heading', { name: 'API Keys' }).isVisible()).toBe(false);
    expect(await page.locator('#account-select option').count()).toBe(0);
    expectNoProblems(tab);
  });

  it('creates a key and shows it once, then never again', async () => {
    const tab = await openDashboard();
    const { page, context } = tab;
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.adminUrl });
    await signedIn(page);
    await chooseAccount(page, 'create-flow');
    await page.getByTestId('no-keys').waitFor();

    await page.getByLabel('Name').fill('prod backend');
    await page.getByLabel('Environment').selectOption('test');
    await page.getByRole('button', { name: 'Create key' }).click();
    const key = await shownKey(page);
    expect(key.startsWith('gk_test_')).toBe(true);

    await page.getByRole('button', { name: 'Copy' }).click();
    await page.getByTestId('copy-status').filter({ hasText: 'Copied' }).waitFor();
    expect(await page.evaluate('navigator.clipboard.readText()')).toBe(key);

    const [stored] = await apiKeys('create-flow');
    expect(stored).toMatchObject({ name: 'prod backend', prefix: key.slice(0, 12), status: 'active' });
    const row = keyRow(page, stored!.id);
    await row.waitFor();
    expect(await row.locator('td').allTextContents()).toEqual([
      `${key.slice(0, 12)}…`,
      'prod backend',
      'test',
      'active',
      expect.stringMatching(/^\d{4}-\d\d-\d\d \d\d:\d\d UTC$/),
      'never',
      'never',
      'RegenerateRevoke',
    ]);

    await dismissKey(page, key);
    await page.reload();
    await chooseAccount(page, 'create-flow');
    await row.waitFor();
    expect(await page.content()).not.toContain(key);
    expectNoProblems(tab);
  });

  it('regenerates a key immediately: new key shown once, the old one revoked', async () => {
    const old = await createKey('rotate-now', 'CI');
    const tab = await openDashboard();
    const { page } = tab;
    await signedIn(page);
    await chooseAccount(page, 'rotate-now');

    await keyRow(page, old.id)
      .getByRole('button', { name: /^Regenerate key/ })
      .click();
    const dialog = page.getByRole('dialog');
    await dialog.waitFor();
    expect(await dialog.textContent()).toContain(`“CI” (${old.prefix}…)`);
    expect(await dialog.getByLabel('Immediately (recommended if the key was exposed)').isChecked()).toBe(true);
    await dialog.getByRole('button', { name: 'Regenerate key' }).click();

    const fresh = await shownKey(page);
    expect(fresh).not.toBe(old.key);
    expect(await page.getByTestId('new-key-context').textContent()).toContain('was revoked');
    await waitForRowStatus(page, old.id, 'revoked');
    expect(await keyRow(page, old.id).getByRole('button').count()).toBe(0);

    const successor = (await apiKeys('rotate-now')).find((key) => key.replaces === old.id);
    expect(successor).toMatchObject({ name: 'CI', status: 'active', prefix: fresh.slice(0, 12) });
    await waitForRowStatus(page, successor!.id, 'active');
    expect(await apiKey(old.id)).toMatchObject({ status: 'revoked', replacedBy: successor!.id });

    await dismissKey(page, fresh);
    expectNoProblems(tab);
  });

  it('regenerates a key with a grace period: the old key keeps working until it ends', async () => {
    const old = await createKey('rotate-grace', 'staging', 'test');
    const tab = await openDashboard();
    const { page } = tab;
    await signedIn(page);
    await chooseAccount(page, 'rotate-grace');

    await keyRow(page, old.id)
      .getByRole('button', { name: /^Regenerate key/ })
      .click();
    const dialog = page.getByRole('dialog');
    await dialog.getByLabel('Keep the old key working for 24 hours').check();
    const before = Date.now();
    await dialog.getByRole('button', { name: 'Regenerate key' }).click();

    const fresh = await shownKey(page);
    expect(fresh.startsWith('gk_test_')).toBe(true);
    expect(await page.getByTestId('new-key-context').textContent()).toContain('keeps working for 24 hours');

    const stored = await apiKey(old.id);
    expect(stored.status).toBe('active');
    const revokeAt = Date.parse(stored.revokeAt ?? '');
    expect(revokeAt).toBeGreaterThanOrEqual(before + 86_400_000 - 5_000);
    expect(revokeAt).toBeLessThanOrEqual(Date.now() + 86_400_000 + 5_000);

    const successor = (await apiKeys('rotate-grace')).find((key) => key.replaces === old.id);
    expect(successor).toBeDefined();
    await waitForRowStatus(page, successor!.id, 'active');
    const oldRow = keyRow(page, old.id);
    expect(await oldRow.getAttribute('data-status')).toBe('active');
    const shownEnd = new Date(revokeAt).toISOString().slice(0, 16).replace('T', ' ');
    expect(await oldRow.locator('td.expires').textContent()).toContain(`${shownEnd} UTC`);
    // Already replaced: it can be revoked early, but not regenerated a second time.
    expect(await oldRow.getByRole('button').allTextContents()).toEqual(['Revoke']);

    await dismissKey(page, fresh);
    expectNoProblems(tab);
  });

  it('revokes a key after confirmation', async () => {
    const doomed = await createKey('revoke-flow', 'leaked laptop');
    const kept = await createKey('revoke-flow', 'prod backend');
    const tab = await openDashboard();
    const { page } = tab;
    await signedIn(page);
    await chooseAccount(page, 'revoke-flow');

    // Cancel first: nothing happens.
    await keyRow(page, doomed.id)
      .getByRole('button', { name: /^Revoke key/ })
      .click();
    await page.getByRole('dialog').getByRole('button', { name: 'Cancel' }).click();
    await page.getByRole('dialog').waitFor({ state: 'hidden' });
    expect((await apiKey(doomed.id)).status).toBe('active');

    await keyRow(page, doomed.id)
      .getByRole('button', { name: /^Revoke key/ })
      .click();
    const dialog = page.getByRole('dialog');
    expect(await dialog.textContent()).toContain(`Revoke key “leaked laptop” (${doomed.prefix}…)?`);
    await dialog.getByRole('button', { name: 'Revoke key' }).click();

    await waitForRowStatus(page, doomed.id, 'revoked');
    await page.getByRole('status').filter({ hasText: 'was revoked' }).waitFor();
    expect(await keyRow(page, doomed.id).getByRole('button').count()).toBe(0);
    expect((await apiKey(doomed.id)).status).toBe('revoked');
    expect((await apiKey(kept.id)).status).toBe('active');
    expect(await keyRow(page, kept.id).getAttribute('data-status')).toBe('active');
    expectNoProblems(tab);
  });

  it('shows user-provided strings as literal text, never as HTML', async () => {
    const key = await createKey('xss', XSS_KEY_NAME);
    const tab = await openDashboard();
    const { page } = tab;
    await signedIn(page);
    await chooseAccount(page, 'xss');

    const row = keyRow(page, key.id);
    await row.waitFor();
    expect(await row.locator('td.name').textContent()).toBe(XSS_KEY_NAME);
    expect(await page.locator('#account-select option[value="xss"]').textContent()).toBe(`${XSS_ACCOUNT_NAME} (xss)`);
    expect(await page.locator('#keys-caption').textContent()).toBe(`Keys of ${XSS_ACCOUNT_NAME}`);
    expect(await page.locator('#keys-table img').count()).toBe(0);
    expect(await page.locator('img, b').count()).toBe(0);

    // The confirmation dialogs quote the name as text too.
    await row.getByRole('button', { name: /^Regenerate key/ }).click();
    expect(await page.locator('#rotate-subject').textContent()).toContain(`“${XSS_KEY_NAME}”`);
    await page.getByRole('dialog').getByRole('button', { name: 'Cancel' }).click();
    expect(await page.locator('img, b').count()).toBe(0);

    await page.waitForTimeout(300); // an onerror handler would have fired by now
    expectNoProblems(tab);
  });

  it('renders a readable page (full-page screenshot in test-artifacts/dashboard.png)', async () => {
    await createKey('acme', 'prod backend', 'live');
    const staging = await createKey('acme', 'staging', 'test');
    await createKey('acme', 'CI', 'test');
    const laptop = await createKey('acme', 'old laptop script', 'live');
    expect((await server.admin('POST', `/admin/keys/${laptop.id}/revoke`)).status).toBe(200);
    const rotated = await server.admin('POST', `/admin/keys/${staging.id}/rotate`, { graceSeconds: 86_400 });
    expect(rotated.status).toBe(201);

    const tab = await openDashboard();
    const { page } = tab;
    await signedIn(page);
    await chooseAccount(page, 'acme');
    await waitForRowStatus(page, laptop.id, 'revoked');
    expect(await page.locator('tr[data-testid="key-row"]').count()).toBe(5);

    mkdirSync(ARTIFACTS, { recursive: true });
    const file = join(ARTIFACTS, 'dashboard.png');
    await page.screenshot({ path: file, fullPage: true });
    expect(existsSync(file)).toBe(true);
    expect(statSync(file).size).toBeGreaterThan(0);
    expectNoProblems(tab);
  });
});
