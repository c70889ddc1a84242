/**
 * The admin dashboard ("API Keys") driven in a real browser: Debian's
 * Chromium through playwright-core, against the real server on a real Redis.
 * Chromium is required: without /usr/bin/chromium the suite fails (never skips).
 */
import { existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { extname, join } from 'node:path';
import type { Browser, BrowserContext, Locator, Page } from 'playwright-core';
import { DASHBOARD_ASSETS } from '../../src/admin/register-dashboard';
import { WEB_ROOT } from '../../src/http/web-assets';
import { startAppUnderTest, TEST_ADMIN_TOKEN, type AppUnderTest } from '../support/running-app';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { launchChromium } from '../support/chromium';
import { registerSecrets } from '../support/secret-scan';
import { createOfficialCheckClient, decisionFor } from '../support/envoy-official-client';
import { startServerProcess } from '../support/server-process';

const ARTIFACTS = join(__dirname, '..', '..', 'test-artifacts');
const TOKEN_STORAGE_KEY = 'gateway-authz.admin-token';
const FULL_KEY = /^gk_(live|test)_[0-9A-Za-z]{36}$/;
const XSS_KEY_NAME = '<img src=x onerror=alert(1)>';
const XSS_ACCOUNT_NAME = '<b onmouseover=alert(2)>Evil & Co</b>';
const DESKTOP = { width: 1280, height: 800 };
/** A small phone: the narrowest width the page is made for. */
const PHONE = { width: 375, height: 812 };
const CONTENT_TYPES: Record<string, string> = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css' };

jest.setTimeout(60_000);

let redis: TestRedis | undefined;
let server: AppUnderTest;
let browser: Browser | undefined;

beforeAll(async () => {
  browser = await launchChromium('The dashboard tests');
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
  /** Uncaught page errors, console messages about the Content-Security-Policy, and dashboard files that did not load. */
  problems: string[];
}

const openContexts: BrowserContext[] = [];

async function openDashboard(viewport = DESKTOP): Promise<Tab> {
  const context = await browser!.newContext({ viewport });
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
  page.on('response', (response) => {
    const { pathname } = new URL(response.url());
    if (pathname.startsWith('/dashboard') && response.status() !== 200) problems.push(`${pathname}: HTTP ${response.status()}`);
  });
  page.on('requestfailed', (failed) => problems.push(`${failed.url()}: ${failed.failure()?.errorText ?? 'failed'}`));
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
    // Signed in once the keys are listed too: a test's next step (a reload, say) must not cut that read short.
    await page.locator('main:not([aria-busy])').waitFor({ timeout: 10_000 });
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
  try {
    await page.locator(`tr[data-key-id="${keyId}"][data-status="${status}"]`).waitFor();
  } catch (error) {
    // Say what the page and the server were doing, not only that the row never changed.
    const row = await keyRow(page, keyId)
      .getAttribute('data-status', { timeout: 1_000 })
      .catch(() => 'no such row');
    // The row's own text holds an error a change to it ended with (key-table.js inRow); the server's lines naming the
    // key say whether the change reached it and how it was answered.
    const rowText = await keyRow(page, keyId)
      .textContent({ timeout: 1_000 })
      .catch(() => '');
    const openDialogs = await page.locator('dialog[open]').count();
    const busy = await page.locator('main[aria-busy="true"]').count();
    const serverErrors = server.logs.lines.filter((line) => line.includes('"level":"error"') || line.includes('"level":50'));
    const aboutTheKey = server.logs.lines.filter((line) => line.includes(keyId));
    throw new Error(
      `row ${keyId} is ${row}, not ${status}; the row reads: ${rowText}; the page says: ${await page.getByTestId('error').textContent()}; ` +
        `open dialogs: ${openDialogs}; busy: ${busy > 0}\nserver errors:\n${serverErrors.join('')}\nserver lines naming the key:\n${aboutTheKey.join('')}`,
      { cause: error },
    );
  }
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
  return answer.body as {
    status: string;
    revokeAt: string | null;
    revokedAt: string | null;
    replacedBy: string | null;
    restrictions: object | null;
  };
}

async function apiKeys(accountId: string) {
  const answer = await server.admin('GET', `/admin/accounts/${accountId}/keys`);
  expect(answer.status).toBe(200);
  return answer.body.keys as Array<{ id: string; prefix: string; name: string; status: string; replaces: string | null }>;
}

/** Five keys: live and test, one revoked, one regenerated with a grace period (so the old key shows its end). */
async function seedShowcaseKeys(accountId: string) {
  await createKey(accountId, 'prod backend', 'live');
  const staging = await createKey(accountId, 'staging', 'test');
  await createKey(accountId, 'CI', 'test');
  const revoked = await createKey(accountId, 'old laptop script', 'live');
  expect((await server.admin('POST', `/admin/keys/${revoked.id}/revoke`)).status).toBe(200);
  const rotated = await server.admin('POST', `/admin/keys/${staging.id}/rotate`, { graceSeconds: 86_400 });
  expect(rotated.status).toBe(201);
  return { revoked };
}

async function saveScreenshot(page: Page, name: string): Promise<void> {
  mkdirSync(ARTIFACTS, { recursive: true });
  const file = join(ARTIFACTS, name);
  await page.screenshot({ path: file, fullPage: true });
  expect(existsSync(file)).toBe(true);
  expect(statSync(file).size).toBeGreaterThan(0);
}

async function expectNoSidewaysScroll(page: Page, state: string): Promise<void> {
  const width = await page.evaluate<number>('document.scrollingElement.scrollWidth');
  expect({ state, width, fits: width <= PHONE.width }).toEqual({ state, width, fits: true });
}

function isFocused(page: Page, target: Locator): Promise<boolean> {
  return target
    .and(page.locator(':focus'))
    .count()
    .then((count) => count === 1);
}

/** Presses Tab until `target` has the focus; fails when Tab does not get there within a page's worth of stops. */
async function tabTo(page: Page, target: Locator): Promise<void> {
  for (let presses = 0; presses < 40; presses++) {
    await page.keyboard.press('Tab');
    if (await isFocused(page, target)) return;
  }
  throw new Error(`Tab never reached ${String(target)}`);
}

function expectNoProblems(tab: Tab): void {
  expect(tab.problems).toEqual([]);
  expect(tab.dialogs).toEqual([]);
}

// ------------------------------------------------------------------ the page itself

/** Status of a request sent with exactly this path: fetch() would resolve `..` and `%2e%2e` before sending. */
function rawStatus(method: string, path: string): Promise<number> {
  const { hostname, port } = new URL(server.adminUrl);
  return new Promise((resolve, reject) => {
    const request = httpRequest({ host: hostname, port, method, path }, (response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    });
    request.on('error', reject);
    request.end();
  });
}

describe('GET /dashboard', () => {
  it('serves the page and its assets without a token, as they are in src/web/, with strict security headers', async () => {
    const paths = Object.keys(DASHBOARD_ASSETS);
    expect(paths.length).toBeGreaterThanOrEqual(5);
    for (const path of paths) {
      const file = DASHBOARD_ASSETS[path]!;
      const response = await fetch(`${server.adminUrl}${path}`);
      expect({ path, status: response.status }).toEqual({ path, status: 200 });
      expect(response.headers.get('content-type')).toBe(`${CONTENT_TYPES[extname(file)]}; charset=utf-8`);
      expect(response.headers.get('x-content-type-options')).toBe('nosniff');
      expect(response.headers.get('cache-control')).toBe('no-store');
      expect(response.headers.get('referrer-policy')).toBe('no-referrer');
      expect(response.headers.get('x-frame-options')).toBe('DENY');
      expect(response.headers.get('cross-origin-opener-policy')).toBe('same-origin');
      expect(response.headers.get('cross-origin-resource-policy')).toBe('same-origin');
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
      expect(await response.text()).toBe(readFileSync(join(WEB_ROOT, file), 'utf8'));
    }
    const page = await (await fetch(`${server.adminUrl}/dashboard`)).text();
    expect(page).toContain('API Keys');
    expect(page).not.toMatch(/<script>|<style|style=|\son[a-z]+=/i);
  });

  it('keeps the token requirement on everything else, including the other files of src/web/', async () => {
    for (const [method, path] of [
      ['GET', '/dashboard/other.js'],
      ['GET', '/dashboard/'],
      ['GET', '/dashboard/app.js'],
      ['GET', '/dashboard/assets/'],
      ['GET', '/dashboard/assets/shared/'],
      ['GET', '/dashboard/assets/tsconfig.json'],
      ['GET', '/dashboard/assets/operator/index.html'],
      ['GET', '/dashboard/assets/shared/nothing.js'],
      ['GET', '/dashboard/assets/shared/../operator/operator.js'],
      ['GET', '/dashboard/assets/shared/%2e%2e/operator/operator.js'],
      ['GET', '/dashboard/assets/../../package.json'],
      ['GET', '/dashboard/assets//shared/dom.js'],
      ['POST', '/dashboard'],
      ['HEAD', '/dashboard'],
      ['HEAD', '/dashboard/assets/shared/dom.js'],
      ['POST', '/dashboard/assets/shared/dom.js'],
      ['GET', '/admin/accounts'],
      ['GET', '/'],
    ] as const) {
      expect({ method, path, status: await rawStatus(method, path) }).toEqual({ method, path, status: 401 });
    }
  });

  it('is served the same by the built server (dist/: npm run build copies src/web/ to dist/web/)', async () => {
    const built = await startServerProcess({ ADMIN_TOKEN: TEST_ADMIN_TOKEN });
    try {
      for (const [path, file] of Object.entries(DASHBOARD_ASSETS)) {
        const response = await fetch(`${built.adminUrl}${path}`);
        expect({ path, status: response.status }).toEqual({ path, status: 200 });
        expect(await response.text()).toBe(readFileSync(join(WEB_ROOT, file), 'utf8'));
      }
      expect((await fetch(`${built.adminUrl}/dashboard/assets/tsconfig.json`)).status).toBe(401);
    } finally {
      await built.stop();
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
    await createAccount('restrict-flow', 'Restrict Flow Co');
    await createAccount('xss', XSS_ACCOUNT_NAME);
    await createAccount('phone', 'Narrow Screens Ltd');
    await createAccount('tab-order', 'Tab Order AG');
    await createAccount('keyboard', 'Keyboard Co');
  });

  it('refuses a wrong token plainly and lists the accounts with the right one', async () => {
    const tab = await openDashboard();
    const { page } = tab;

    await signIn(page, 'not-the-admin-token-at-all');
    const alert = page.getByTestId('error');
    await page.getByRole('alert').filter({ hasText: 'not valid' }).waitFor();
    expect(await alert.textContent()).toBe(
      "That token is not valid here. Send an operator API token (gko_…) or the break-glass ADMIN_TOKEN as 'Authorization: Bearer <token>'. (HTTP 401, unauthorized)",
    );
    expect(await page.getByRole('heading', { name: 'API Keys' }).isVisible()).toBe(false);
    expect(await page.evaluate(`sessionStorage.getItem(${JSON.stringify(TOKEN_STORAGE_KEY)})`)).toBeNull();

    await signIn(page);
    await page.getByRole('heading', { name: 'API Keys' }).waitFor();
    expect(await alert.textContent()).toBe('');
    const options = await page.locator('#account-select option').allTextContents();
    expect(options).toEqual(expect.arrayContaining(['Acme Corp (acme)', 'Create Flow Ltd (create-flow)']));
    expect(await page.getByTestId('hint').innerText()).toBe(
      "Use one key per environment or integration (e.g. 'prod backend', 'staging', 'CI'), so you can rotate one " +
        'without touching the others. Rotate a key immediately if it was exposed in a client, a screenshot or a repository.',
    );
    expect(await page.getByLabel('Admin token').inputValue()).toBe('');
    expectNoProblems(tab);
  });

  it('signs in with a token submitted while the page is still looking for a single sign-on session', async () => {
    // The page asks for a session at load; on a busy machine the answer can come after the operator has submitted.
    // A submit then was dropped (one change at a time), with nothing said: the token must sign in.
    const context = await browser!.newContext({ viewport: DESKTOP });
    openContexts.push(context);
    const page = await context.newPage();
    let answerSession: () => void = () => undefined;
    const sessionAnswered = new Promise<void>((resolve) => (answerSession = resolve));
    await page.route('**/dashboard/auth/session', async (route) => {
      await sessionAnswered;
      await route.continue();
    });
    const asked = page.waitForRequest('**/dashboard/auth/session');
    await page.goto(`${server.adminUrl}/dashboard`);
    await asked;
    await signIn(page);
    await page.getByRole('heading', { name: 'API Keys' }).waitFor({ timeout: 10_000 });
    answerSession();
    await page.locator('main:not([aria-busy])').waitFor({ timeout: 10_000 });
    expect(await page.getByRole('heading', { name: 'API Keys' }).isVisible()).toBe(true);
    expect(await page.evaluate(`sessionStorage.getItem(${JSON.stringify(TOKEN_STORAGE_KEY)})`)).toBe(TEST_ADMIN_TOKEN);
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
    await page.locator('main:not([aria-busy])').waitFor();
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
      'RegenerateRestrictRevoke',
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

  it('restricts a key in its Restrict dialog, and the next Check honours it', async () => {
    const restricted = await createKey('restrict-flow', 'embeddings job');
    const check = createOfficialCheckClient(server.grpcAddress);
    try {
      expect(await decisionFor(check, restricted.key)).toBe('allow');
      const tab = await openDashboard();
      const { page } = tab;
      await signedIn(page);
      await chooseAccount(page, 'restrict-flow');

      await keyRow(page, restricted.id)
        .getByRole('button', { name: /^Restrict key/ })
        .click();
      const dialog = page.getByRole('dialog');
      await dialog.getByLabel(/^Endpoints/).fill('/v1/embeddings');
      await dialog.getByRole('button', { name: 'Save' }).click();
      await page.getByRole('status').filter({ hasText: 'were saved' }).waitFor();
      expect((await apiKey(restricted.id)).restrictions).toEqual({ endpoints: ['/v1/embeddings'] });
      expect(await decisionFor(check, restricted.key)).toBe('endpoint_not_permitted');
      expectNoProblems(tab);
    } finally {
      check.close();
    }
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

  it('renders a readable page (full-page screenshot in test-artifacts/dashboard-operator.png)', async () => {
    const { revoked } = await seedShowcaseKeys('acme');

    const tab = await openDashboard();
    const { page } = tab;
    await signedIn(page);
    await chooseAccount(page, 'acme');
    await waitForRowStatus(page, revoked.id, 'revoked');
    expect(await page.locator('tr[data-testid="key-row"]').count()).toBe(5);

    await saveScreenshot(page, 'dashboard-operator.png');
    expectNoProblems(tab);
  });

  it('fits a 375 px wide screen: no sideways scrolling with keys, the new-key panel or a dialog (screenshot dashboard-operator-375px.png)', async () => {
    const { revoked } = await seedShowcaseKeys('phone');
    const longName = 'nightly-reconciliation-batch-job-for-the-eu-west-billing-cluster';
    const long = await createKey('phone', longName);
    const tab = await openDashboard(PHONE);
    const { page, context } = tab;
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.adminUrl });
    await expectNoSidewaysScroll(page, 'sign-in');

    await signedIn(page);
    await chooseAccount(page, 'phone');
    await waitForRowStatus(page, revoked.id, 'revoked');
    expect(await page.locator('tr[data-testid="key-row"]').count()).toBe(6);
    await expectNoSidewaysScroll(page, 'key list');
    // The table becomes one block per key, each value under its column's name.
    const nameCell = keyRow(page, long.id).locator('td.name');
    expect(await nameCell.textContent()).toBe(longName);
    const label = `getComputedStyle(document.querySelector('tr[data-key-id="${long.id}"] td.name'), '::before').content`;
    expect(await page.evaluate<string>(label)).toBe('"Name"');
    const box = (await keyRow(page, long.id).boundingBox())!;
    expect(box.x + box.width).toBeLessThanOrEqual(PHONE.width);

    await page.getByLabel('Name').fill('phone app');
    await page.getByRole('button', { name: 'Create key' }).click();
    const key = await shownKey(page);
    await expectNoSidewaysScroll(page, 'new-key panel');
    await dismissKey(page, key);

    await keyRow(page, long.id)
      .getByRole('button', { name: /^Regenerate key/ })
      .click();
    const dialog = page.getByRole('dialog');
    await dialog.waitFor();
    await expectNoSidewaysScroll(page, 'regenerate dialog');
    const dialogBox = (await dialog.boundingBox())!;
    expect(dialogBox.x).toBeGreaterThanOrEqual(0);
    expect(dialogBox.x + dialogBox.width).toBeLessThanOrEqual(PHONE.width);
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'hidden' });

    await saveScreenshot(page, 'dashboard-operator-375px.png');
    expectNoProblems(tab);
  });

  it('shows a prepaid balance as money in the configured currency, not as a bare count of units (screenshot dashboard-operator-balance-375px.png)', async () => {
    const created = await server.admin('POST', '/admin/accounts', {
      id: 'wallet-ui',
      name: 'Wallet UI',
      billing: { creditBalance: 4_200 },
    });
    expect(created.status).toBe(201);
    const tab = await openDashboard(PHONE);
    const { page } = tab;
    await signedIn(page);
    await chooseAccount(page, 'wallet-ui');
    // 4,200 micro-dollars (the default unit).
    await page.getByTestId('account-summary').filter({ hasText: 'prepaid balance' }).waitFor();
    expect(await page.getByTestId('account-summary').textContent()).toBe('Account id wallet-ui · billing active · prepaid balance $0.0042');
    await expectNoSidewaysScroll(page, 'balance');
    await saveScreenshot(page, 'dashboard-operator-balance-375px.png');
    expectNoProblems(tab);
  });

  it('reaches every control with Tab, each with a visible focus ring', async () => {
    await seedShowcaseKeys('tab-order');
    const tab = await openDashboard();
    const { page } = tab;
    await signedIn(page);
    await chooseAccount(page, 'tab-order');
    await page.locator('tr[data-testid="key-row"]').nth(4).waitFor();

    // Every visible control, numbered in data-control (the test has no DOM types: the page code is a string).
    const controls = await page.evaluate<
      string[]
    >(`[...document.querySelectorAll('button, input, select, textarea, a[href], [tabindex="0"]')]
      .filter((element) => element.checkVisibility())
      .map((element, index) => (element.dataset.control = String(index)))`);
    expect(controls.length).toBeGreaterThanOrEqual(12); // sign out, account, refresh, the table, 7 row buttons, name, environment, create

    const reached = new Map<string, { outline: string; width: number }>();
    await page.locator('body').focus();
    for (let presses = 0; presses < controls.length + 5 && reached.size < controls.length; presses++) {
      await page.keyboard.press('Tab');
      const focused = await page.evaluate<{ control: string; outline: string; width: number } | null>(`(() => {
        const element = document.activeElement;
        if (!element || !element.dataset.control) return null;
        const style = getComputedStyle(element);
        return { control: element.dataset.control, outline: style.outlineStyle, width: parseFloat(style.outlineWidth) };
      })()`);
      if (focused) reached.set(focused.control, { outline: focused.outline, width: focused.width });
    }
    expect([...reached.keys()].sort()).toEqual([...controls].sort());
    for (const [control, ring] of reached)
      expect({ control, ...ring, visible: ring.outline !== 'none' && ring.width >= 2 }).toMatchObject({ visible: true });
    expectNoProblems(tab);
  });

  // A dialog's close event is a queued task, and Chromium may run a key press queued after it first: Escape, then Enter on
  // the row's button at once, opened the dialog again before the close event of the Escape forgot its key, so the
  // confirmation that followed did nothing (seen once in CI, in the keyboard test below).
  it('keeps a key dialog about its key when the close event of its last closing arrives after it was opened again', async () => {
    const { page } = await openDashboard();
    const kept = await page.evaluate(`(async () => {
      const { keyDialog } = await import('/dashboard/assets/shared/key-dialogs.js');
      const dialog = document.createElement('dialog');
      const focus = document.createElement('button');
      dialog.append(focus);
      document.body.append(dialog);
      const about = keyDialog(dialog);
      about.open({ id: 'first' }, focus);
      dialog.close(); // as Escape does: the close event is queued, not fired
      about.open({ id: 'second' }, focus);
      await new Promise((resolve) => dialog.addEventListener('close', resolve, { once: true }));
      const kept = about.take();
      dialog.remove();
      return kept ? kept.id : null;
    })()`);
    expect(kept).toBe('second');
  });

  it('works with the keyboard alone: sign in, create a key, copy it, regenerate it, cancel and confirm a revoke', async () => {
    const tab = await openDashboard();
    const { page, context } = tab;
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.adminUrl });
    const focused = (locator: Locator) => isFocused(page, locator);

    // The token field has the focus on arrival; Enter submits.
    expect(await focused(page.getByLabel('Admin token'))).toBe(true);
    await page.keyboard.type(TEST_ADMIN_TOKEN);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'API Keys' }).waitFor();

    // Choose the account by typing its name into the focused list.
    await tabTo(page, page.getByLabel('Account', { exact: true }));
    await page.keyboard.type('Keyboard');
    await page.locator('#keys-caption', { hasText: 'Keys of Keyboard Co' }).waitFor();
    await page.getByTestId('no-keys').waitFor();

    await tabTo(page, page.getByLabel('Name'));
    await page.keyboard.type('typed on a keyboard');
    await page.keyboard.press('Tab');
    expect(await focused(page.getByLabel('Environment'))).toBe(true);
    await page.keyboard.type('test');
    await tabTo(page, page.getByRole('button', { name: 'Create key' }));
    await page.keyboard.press('Enter');
    const key = await shownKey(page);
    expect(key.startsWith('gk_test_')).toBe(true);

    // The panel takes the focus on its Copy button; Done hands it back to the form.
    expect(await focused(page.getByRole('button', { name: 'Copy' }))).toBe(true);
    await page.keyboard.press('Enter');
    await page.getByTestId('copy-status').filter({ hasText: 'Copied' }).waitFor();
    expect(await page.evaluate('navigator.clipboard.readText()')).toBe(key);
    await page.keyboard.press('Tab');
    expect(await focused(page.getByRole('button', { name: 'Done' }))).toBe(true);
    await page.keyboard.press('Enter');
    await page.getByTestId('new-key-panel').waitFor({ state: 'hidden' });
    expect(await focused(page.getByLabel('Name'))).toBe(true);
    const [created] = await apiKeys('keyboard');
    expect(created).toMatchObject({ name: 'typed on a keyboard', prefix: key.slice(0, 12), status: 'active' });

    // Regenerate: the dialog opens on "Immediately"; the arrow keys choose a grace period.
    await tabTo(page, keyRow(page, created!.id).getByRole('button', { name: /^Regenerate key/ }));
    await page.keyboard.press('Enter');
    const dialog = page.getByRole('dialog');
    await dialog.waitFor();
    expect(await focused(dialog.getByLabel('Immediately (recommended if the key was exposed)'))).toBe(true);
    await page.keyboard.press('ArrowDown');
    expect(await dialog.getByLabel('Keep the old key working for 1 hour').isChecked()).toBe(true);
    await page.keyboard.press('Tab');
    expect(await focused(dialog.getByRole('button', { name: 'Regenerate key' }))).toBe(true);
    await page.keyboard.press('Enter');
    const fresh = await shownKey(page);
    expect(await page.getByTestId('new-key-context').textContent()).toContain('keeps working for 1 hour');
    expect((await apiKey(created!.id)).status).toBe('active');
    await page.keyboard.press('Tab');
    await page.keyboard.press('Enter');
    await page.getByTestId('new-key-panel').waitFor({ state: 'hidden' });
    expect(await page.content()).not.toContain(fresh);
    expect(await focused(page.getByRole('region', { name: 'Keys of Keyboard Co' }))).toBe(true);

    // Revoke: Escape cancels and gives the focus back to the row's button; the dialog starts on Cancel.
    const successor = (await apiKeys('keyboard')).find((candidate) => candidate.replaces === created!.id)!;
    const revokeButton = keyRow(page, successor.id).getByRole('button', { name: /^Revoke key/ });
    await tabTo(page, revokeButton);
    await page.keyboard.press('Enter');
    await dialog.waitFor();
    expect(await focused(dialog.getByRole('button', { name: 'Cancel' }))).toBe(true);
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'hidden' });
    expect(await focused(revokeButton)).toBe(true);
    expect((await apiKey(successor.id)).status).toBe('active');

    await page.keyboard.press('Enter');
    await dialog.waitFor();
    await page.keyboard.press('Shift+Tab');
    expect(await focused(dialog.getByRole('button', { name: 'Revoke key' }))).toBe(true);
    await page.keyboard.press('Enter');
    await waitForRowStatus(page, successor.id, 'revoked');
    expect((await apiKey(successor.id)).status).toBe('revoked');
    expect(await focused(page.getByRole('status').filter({ hasText: 'was revoked' }))).toBe(true);
    expectNoProblems(tab);
  });
});
