/**
 * The customer's journey, end to end, as the issue names it: a real OpenID
 * provider (oidc-provider, its own process), the built service (its own
 * process, with its own members and customer API, on a real Redis), Debian's
 * Chromium through playwright-core, and real Checks over gRPC with the keys
 * the page showed. Chromium is required: without /usr/bin/chromium the suite
 * fails (never skips).
 */
import { mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { addMember } from '../../src/accounts/member-actions';
import { createKey } from '../../src/keys/key-actions';
import { OPERATOR, type MemberRole } from '../../src/accounts/customer-identity';
import { NO_TOKEN_BUDGETS } from '../../src/accounts/limits/token-budgets';
import { RedisStore } from '../../src/store/redis/redis-store';
import { launchChromium } from '../support/chromium';
import {
  loopbackDashboardEnv,
  startCustomerApp,
  startOidcProvider,
  type CustomerAppProcess,
  type OidcTestProvider,
} from '../support/customer-stack';
import { createOfficialCheckClient, decisionFor, type OfficialCheckClient } from '../support/envoy-official-client';
import { LogCapture } from '../support/log-capture';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { until } from '../support/waiting';
import { registerSecrets } from '../support/secret-scan';
import { freePort } from '../support/free-port';
import { loopbackPage, signInThroughProvider } from '../support/provider-sign-in';

const SESSION_SECRET = 'journey-customer-session-secret-0123456789abcdef';
const COOKIE = 'gwa_session';
const ARTIFACTS = join(__dirname, '..', '..', 'test-artifacts');
const FLUSH_MS = 200;

jest.setTimeout(120_000);

let redis: TestRedis;
let store: RedisStore;
let provider: OidcTestProvider;
let app: CustomerAppProcess;
let browser: Browser;
let check: OfficialCheckClient;

const suffix = `${process.pid}`;
const ACME = `acme-${suffix}`;
const GLOBEX = `globex-${suffix}`;
const INITECH = `initech-${suffix}`;

beforeAll(async () => {
  registerSecrets(SESSION_SECRET);
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  redis = await startTestRedis();
  store = await RedisStore.connect({ url: redis.url, commandTimeoutMs: 1000 });
  provider = await startOidcProvider({
    clients: [{ client_id: 'dashboard', token_endpoint_auth_method: 'none', redirect_uris: [`${origin}/auth/callback`] }],
    users: {
      alice: { email: 'alice@example.com', email_verified: true, name: 'Alice' },
      bob: { email: 'bob@example.com', email_verified: true, name: 'Bob' },
      carol: { email: 'carol@example.com', email_verified: true, name: 'Carol' },
      nobody: { email: 'nobody@example.com', email_verified: true, name: 'No Body' },
    },
  });
  const deps = { store, clock: { now: () => Date.now() }, logger: new LogCapture().logger };
  for (const [id, name] of [
    [ACME, 'Acme Corp'],
    [GLOBEX, 'Globex'],
    [INITECH, 'Initech'],
  ] as const) {
    await store.createAccount({ id, name, status: 'active', createdAt: new Date().toISOString(), creditBalance: 1_000_000 });
  }
  const members: [string, string, MemberRole][] = [
    [ACME, 'alice', 'owner'],
    [ACME, 'bob', 'viewer'],
    [GLOBEX, 'alice', 'developer'],
    [INITECH, 'carol', 'owner'],
  ];
  for (const [accountId, subject, role] of members) {
    const added = await addMember(deps, OPERATOR, { accountId, role, principal: { kind: 'identity', issuer: provider.issuer, subject } });
    expect(added.kind).toBe('added');
  }
  [app, browser] = await Promise.all([
    startCustomerApp(
      {
        ...loopbackDashboardEnv({ redisUrl: redis.url, issuer: provider.issuer, port, sessionSecret: SESSION_SECRET }),
        LAST_USED_FLUSH_MS: String(FLUSH_MS),
      },
      'store',
    ),
    launchChromium('The customer journey tests'),
  ]);
  check = createOfficialCheckClient(app.grpcAddress);
}, 120_000);

afterAll(async () => {
  check?.close();
  await browser?.close();
  await app?.stop();
  await provider?.stop();
  await store?.close();
  await redis?.stop();
});

const openContexts: BrowserContext[] = [];
afterEach(async () => {
  for (const context of openContexts.splice(0)) await context.close();
});

function newPage(width = 1280): Promise<{ context: BrowserContext; page: Page }> {
  return loopbackPage(browser, openContexts, { width, clipboardOrigin: app.customerUrl });
}

async function signIn(page: Page, login: string): Promise<void> {
  await signInThroughProvider(page, {
    startUrl: `${app.customerUrl}/`,
    link: 'Sign in with your identity provider',
    login,
    callbackPath: '/auth/callback',
  });
}

async function sessionCookie(context: BrowserContext): Promise<string> {
  const cookie = (await context.cookies(app.customerUrl)).find((c) => c.name === COOKIE);
  if (!cookie) throw new Error(`no ${COOKIE} cookie`);
  registerSecrets(cookie.value, cookie.value.slice(0, cookie.value.lastIndexOf('.')));
  return `${COOKIE}=${cookie.value}`;
}

/** The page, loaded for this account, once its keys are listed. */
async function openKeys(page: Page, caption: string): Promise<void> {
  await page.getByTestId('open-keys').click();
  await page.getByRole('heading', { name: 'API Keys' }).waitFor();
  await page.locator('#keys-caption', { hasText: caption }).waitFor();
}

/** The full key in the "copy once" panel, registered with the secret scan. */
async function shownKey(page: Page): Promise<string> {
  await page.getByTestId('new-key-panel').waitFor();
  const key = (await page.getByTestId('new-key-value').textContent()) ?? '';
  expect(key).toMatch(/^gk_live_[A-Za-z0-9]{36}$/);
  registerSecrets(key);
  return key;
}

async function closeKeyPanel(page: Page): Promise<void> {
  await page.getByRole('button', { name: 'Done' }).click();
  await page.getByTestId('new-key-panel').waitFor({ state: 'hidden' });
}

const row = (page: Page, name: string) => page.getByTestId('key-row').filter({ has: page.locator('td.name', { hasText: name }) });

/** A call to the customer API from inside the page, with the session's CSRF token, as a script on the page could make it. */
function callFromPage(page: Page, method: string, path: string, body?: object): Promise<{ status: number; code: string | null }> {
  return page.evaluate(
    async ({ method, path, body }) => {
      const session = (await (await fetch('/auth/session')).json()) as { csrfToken: string };
      const response = await fetch(path, {
        method,
        headers: { 'x-csrf-token': session.csrfToken, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const answer = (await response.json()) as { error?: { code: string } };
      return { status: response.status, code: answer.error?.code ?? null };
    },
    { method, path, body },
  );
}

/** The document's scroll width and the viewport's: equal when nothing sticks out sideways. */
function pageWidths(page: Page): Promise<{ scroll: number; client: number }> {
  return page.evaluate('({ scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth })');
}

/** Where an element's text is drawn (not its box, which a block stretches to the full width). */
function textBox(page: Page, selector: string): Promise<{ x: number; y: number; width: number; height: number }> {
  return page.evaluate(`(() => {
    const range = document.createRange();
    range.selectNodeContents(document.querySelector(${JSON.stringify(selector)}));
    const { x, y, width, height } = range.getBoundingClientRect();
    return { x, y, width, height };
  })()`);
}

/** Each usage row's cells as text: key, requests, tokens, spend. */
async function usageCells(page: Page): Promise<string[][]> {
  const rows = await page.getByTestId('usage-row').all();
  return Promise.all(rows.map((row) => row.locator('td').allTextContents()));
}

async function usageTotal(page: Page): Promise<string> {
  return (await page.getByTestId('usage-summary').textContent()) ?? '';
}

describe('the customer journey in Chromium', () => {
  it('an owner signs in, sees only her accounts, creates, copies, uses, regenerates, revokes, renames and expires keys, sees usage, and signs out', async () => {
    const { context, page } = await newPage();
    await signIn(page, 'alice');
    await openKeys(page, 'Keys of Acme Corp');

    // Only her two accounts, and she can switch between them.
    const options = await page.getByTestId('account-select').locator('option').allTextContents();
    expect(options).toEqual([`Acme Corp (${ACME}) · owner`, `Globex (${GLOBEX}) · developer`]);
    await page.getByTestId('account-select').selectOption(GLOBEX);
    await page.locator('#keys-caption', { hasText: 'Keys of Globex' }).waitFor();
    await page.getByTestId('members-section').waitFor({ state: 'hidden' }); // a developer there: no members, no audit
    expect(await page.getByTestId('audit-section').isHidden()).toBe(true);
    await page.getByTestId('account-select').selectOption(ACME);
    await page.locator('#keys-caption', { hasText: 'Keys of Acme Corp' }).waitFor();
    expect(await page.getByTestId('hint').textContent()).toContain('one key per environment or integration');

    // Create: the full key once, with the warning; the copy button puts exactly it on the clipboard.
    await page.locator('#key-name').fill('prod backend');
    await page.getByTestId('create-key').click();
    const first = await shownKey(page);
    expect(await page.getByTestId('new-key-warning').textContent()).toBe('This key will not be shown again. Store it now.');
    await page.getByRole('button', { name: 'Copy' }).click();
    await page.getByTestId('copy-status').filter({ hasText: 'Copied' }).waitFor();
    expect(await page.evaluate<string>('navigator.clipboard.readText()')).toBe(first);
    await closeKeyPanel(page);
    await row(page, 'prod backend').waitFor();
    expect(await page.content()).not.toContain(first);
    // Never shown again: not after a reload, not in any answer of the API.
    await page.reload();
    await row(page, 'prod backend').waitFor();
    expect(await page.content()).not.toContain(first);
    const listed = await page.evaluate(async (path) => (await fetch(path)).text(), `/api/accounts/${ACME}/keys`);
    expect(listed).toContain('prod backend');
    expect(listed).not.toContain(first);
    expect(listed).not.toContain(first.slice(12));

    // The key works in a real Check.
    expect(await decisionFor(check, first)).toBe('allow');

    // Regenerate immediately (the default): the old key is refused at once, the new one allowed.
    await row(page, 'prod backend')
      .getByRole('button', { name: /^Regenerate key/ })
      .click();
    expect(await page.getByLabel('Immediately (recommended if the key was exposed)').isChecked()).toBe(true);
    await page.getByRole('button', { name: 'Regenerate key', exact: true }).click();
    const second = await shownKey(page);
    expect(await page.getByTestId('new-key-context').textContent()).toContain('was revoked');
    await closeKeyPanel(page);
    expect(await decisionFor(check, first)).toBe('key_revoked');
    expect(await decisionFor(check, second)).toBe('allow');

    // Regenerate with a grace period: both work until it ends.
    await row(page, 'prod backend')
      .filter({ has: page.locator('.badge.status-active') })
      .first()
      .getByRole('button', { name: /^Regenerate key/ })
      .click();
    await page.getByLabel('Keep the old key working for 1 hour').check();
    await page.getByRole('button', { name: 'Regenerate key', exact: true }).click();
    const third = await shownKey(page);
    expect(await page.getByTestId('new-key-context').textContent()).toContain('keeps working for 1 hour');
    await closeKeyPanel(page);
    expect(await decisionFor(check, second)).toBe('allow');
    expect(await decisionFor(check, third)).toBe('allow');

    // Revoke the one in its grace period: refused from now on.
    const inGrace = page.getByTestId('key-row').filter({ hasText: 'in its regeneration grace period' });
    await inGrace.getByRole('button', { name: /^Revoke key/ }).click();
    await page.getByRole('button', { name: 'Revoke key', exact: true }).click();
    await page.getByTestId('notice').filter({ hasText: 'was revoked' }).waitFor();
    expect(await decisionFor(check, second)).toBe('key_revoked');
    expect(await decisionFor(check, third)).toBe('allow');

    // Rename and set an expiry, then clear it.
    const expiryDay = new Date(Date.now() + 30 * 86_400_000).toISOString().slice(0, 10);
    const current = page.getByTestId('key-row').filter({ has: page.locator('.badge.status-active') });
    await current.getByRole('button', { name: /^Rename, set the expiry or restrict/ }).click();
    await page.locator('#edit-name').fill('prod backend v2');
    await page.getByLabel('Expires after (UTC; empty: never)').fill(expiryDay);
    await page.getByRole('button', { name: 'Save', exact: true }).click();
    await page.getByTestId('notice').filter({ hasText: 'was saved' }).waitFor();
    const renamed = row(page, 'prod backend v2');
    expect(await renamed.locator('td.expires time').getAttribute('datetime')).toBe(`${expiryDay}T23:59:59.999Z`);
    expect((await store.getKey((await renamed.getAttribute('data-key-id'))!))?.expiresAt).toBe(`${expiryDay}T23:59:59.999Z`);
    await renamed.getByRole('button', { name: /^Rename, set the expiry or restrict/ }).click();
    await page.getByLabel('Expires after (UTC; empty: never)').fill('');
    await page.getByRole('button', { name: 'Save', exact: true }).click();
    await row(page, 'prod backend v2')
      .locator('td.expires', { hasText: /^never$/ })
      .waitFor();
    expect(await decisionFor(check, third)).toBe('allow');

    // Revoked and replaced keys can be hidden, and shown again.
    const allRows = await page.getByTestId('key-row').count();
    await page.getByLabel('Hide revoked and replaced keys').check();
    expect(await page.getByTestId('key-row').count()).toBe(1);
    expect(await page.getByTestId('key-row').getAttribute('data-status')).toBe('active');
    await page.getByLabel('Hide revoked and replaced keys').uncheck();
    expect(await page.getByTestId('key-row').count()).toBe(allRows);

    // Usage: the allowed Checks, counted in process and flushed with the last-used times (every FLUSH_MS).
    // Allowed: first 1, second 2, third 3.
    // Allowed answers are counted once the recorder flushed (FLUSH_MS): refresh until they are all there.
    const deadline = Date.now() + 10_000;
    let summary = '';
    while (!summary.startsWith('6 requests') && Date.now() < deadline) {
      await page.waitForTimeout(FLUSH_MS);
      await page.getByRole('button', { name: 'Refresh' }).click();
      await page.locator('main:not([aria-busy])').waitFor();
      summary = await usageTotal(page);
    }
    expect(summary).toMatch(/^6 requests allowed in the last 24 hours/);
    const usageRows = await usageCells(page);
    expect(usageRows.slice(0, 3).map(([key, requests]) => `${key!.replace(/\(gk_live_[^)]*\)/, '(…)')} ${requests}`)).toEqual([
      'prod backend v2 (…) 3',
      'prod backend (…) 2',
      'prod backend (…) 1',
    ]);
    expect(await page.locator('#usage-chart canvas').count()).toBeGreaterThan(0);
    await page.getByRole('button', { name: 'Last 30 days' }).click();
    await page.getByTestId('usage-summary').filter({ hasText: 'in the last 30 days' }).waitFor();
    expect(await usageTotal(page)).toMatch(/^6 requests/);
    expect(await page.getByTestId('limits').textContent()).toContain('Prepaid: credit remains: yes');
    // The default plan's limits, with thousands separators as every other count on the page.
    expect(await page.getByTestId('limits').textContent()).toContain('Each key: 600 requests per 1m, 100,000 requests per 1d');
    expect(await page.getByTestId('limits').textContent()).toContain('The whole account: 3,000 requests per 1m, 1,000,000 requests per 1d');
    expect(await row(page, 'prod backend v2').locator('td.last-used time').count()).toBe(1);

    // Owners see members and the audit trail, with who made each change.
    const members = await page.getByTestId('member-row').allTextContents();
    expect(members.join('\n')).toContain('bob');
    expect(await page.getByTestId('audit-entry').first().textContent()).toContain('by alice');
    // In words: no action codes, no name=value details.
    const audit = (await page.getByTestId('audit-entry').allTextContents()).join('\n');
    expect(audit).toMatch(/Created key gk_live_\w{4}…, by alice/);
    expect(audit).toMatch(/Regenerated key gk_live_\w{4}… as gk_live_\w{4}…; the old one kept working for 3600 seconds, by alice/);
    expect(audit).toMatch(/Changed the name, expiry of key gk_live_\w{4}…, by alice/);
    expect(audit).toMatch(/Revoked key gk_live_\w{4}…, by alice/);
    expect(audit).not.toMatch(/key\.(create|rotate|update|revoke)|[a-zA-Z]+=/);

    mkdirSync(ARTIFACTS, { recursive: true });
    const screenshot = join(ARTIFACTS, 'customer-dashboard.png');
    await page.screenshot({ path: screenshot, fullPage: true });
    expect(statSync(screenshot).size).toBeGreaterThan(10_000);

    // 375 px wide: everything fits, no horizontal scroll.
    await page.setViewportSize({ width: 375, height: 800 });
    await page.waitForTimeout(100);
    const widths = await pageWidths(page);
    expect(widths.scroll).toBeLessThanOrEqual(widths.client);
    // The "Hide revoked and replaced keys" box sits beside its words, on their line, not alone above them.
    const hideBox = (await page.getByTestId('hide-inactive').boundingBox())!;
    const hideWords = await textBox(page, 'label[for="hide-inactive"]');
    expect(hideBox.x + hideBox.width).toBeLessThanOrEqual(hideWords.x);
    expect(hideBox.y).toBeLessThan(hideWords.y + hideWords.height);
    expect(hideWords.y).toBeLessThan(hideBox.y + hideBox.height);
    await page.screenshot({ path: join(ARTIFACTS, 'customer-dashboard-375.png'), fullPage: true });

    // Sign out ends the session on the server: the old cookie is refused.
    const cookie = await sessionCookie(context);
    await page.getByTestId('sign-out').click();
    await page.getByTestId('notice').filter({ hasText: 'You are signed out.' }).waitFor();
    for (const path of ['/auth/session', `/api/accounts/${ACME}/keys`]) {
      const replayed = await fetch(`${app.customerUrl}${path}`, { headers: { cookie } });
      expect(replayed.status).toBe(401);
    }
  });

  it('an owner opens an account by name from the start page, restricts a key in the Edit dialog, and the very next Check honours it; clearing lifts it', async () => {
    const { page } = await newPage();
    await signIn(page, 'alice');
    // The start page: one link per account, by name, straight to its keys.
    expect(await page.getByTestId('accounts').locator('li').allTextContents()).toEqual([
      `Acme Corp (${ACME}): owner (keys and members)`,
      `Globex (${GLOBEX}): developer (keys)`,
    ]);
    await page.getByRole('link', { name: `Globex (${GLOBEX})` }).click();
    await page.locator('#keys-caption', { hasText: 'Keys of Globex' }).waitFor();
    await page.goBack();
    await page.getByRole('link', { name: `Acme Corp (${ACME})` }).click();
    await page.locator('#keys-caption', { hasText: 'Keys of Acme Corp' }).waitFor();
    await page.locator('#key-name').fill('embeddings only');
    await page.getByTestId('create-key').click();
    const key = await shownKey(page);
    await closeKeyPanel(page);
    expect(await decisionFor(check, key)).toBe('allow');

    await row(page, 'embeddings only')
      .getByRole('button', { name: /^Rename, set the expiry or restrict/ })
      .click();
    await page.getByLabel(/^Endpoints/).fill('/v1/embeddings');
    await page.getByRole('button', { name: 'Save', exact: true }).click();
    await page.getByTestId('notice').filter({ hasText: 'was saved' }).waitFor();
    expect(await decisionFor(check, key)).toBe('endpoint_not_permitted');
    await page
      .getByTestId('audit-entry')
      .filter({ hasText: /Changed the restrictions of key gk_live_\w{4}… \(restrictions now: endpoints \/v1\/embeddings\), by alice/ })
      .waitFor();

    // A bad range is refused with the API's words, and nothing changes.
    await row(page, 'embeddings only')
      .getByRole('button', { name: /^Rename, set the expiry or restrict/ })
      .click();
    expect(await page.getByLabel(/^Endpoints/).inputValue()).toBe('/v1/embeddings');
    await page.getByLabel(/^Source addresses/).fill('10.0.0.0/33');
    await page.getByRole('button', { name: 'Save', exact: true }).click();
    await row(page, 'embeddings only').getByTestId('row-error').filter({ hasText: 'the prefix length must be 0 to 32' }).waitFor();

    await row(page, 'embeddings only')
      .getByRole('button', { name: /^Rename, set the expiry or restrict/ })
      .click();
    await page.getByLabel(/^Endpoints/).fill('');
    await page.getByLabel(/^Source addresses/).fill('');
    await page.getByRole('button', { name: 'Save', exact: true }).click();
    await page.getByTestId('notice').filter({ hasText: 'was saved' }).waitFor();
    expect(await decisionFor(check, key)).toBe('allow');

    // At the active-key cap, "Create key" says so beside the button, not only at the top of the page.
    await store.updateAccount(ACME, { maxActiveKeys: 0 });
    try {
      await page.getByTestId('create-key').click();
      const beside = page.getByTestId('create-card').getByTestId('create-error');
      await beside.filter({ hasText: 'may hold at most 0' }).waitFor();
      expect(await beside.getAttribute('role')).toBe('alert');
    } finally {
      await store.updateAccount(ACME, { maxActiveKeys: null });
    }
  });

  it('Create key clicked while the page is still loading usage, members and webhooks creates the key, not nothing', async () => {
    const { page } = await newPage();
    await signIn(page, 'alice');
    // The page lists the keys first, then loads usage, members, the audit trail and webhooks: hold the usage read
    // back until the key has been created, so the click surely comes while the first load is in flight.
    let releaseUsage!: () => void;
    const usageHeld = new Promise<void>((resolve) => (releaseUsage = resolve));
    let usageRequested = false;
    await page.route('**/usage?*', async (route) => {
      usageRequested = true;
      await usageHeld;
      await route.continue();
    });
    await page.getByRole('link', { name: `Acme Corp (${ACME})` }).click();
    await page.locator('#keys-caption', { hasText: 'Keys of Acme Corp' }).waitFor();
    await page.locator('#key-name').fill('while loading');
    await page.getByTestId('create-key').click();
    try {
      const key = await shownKey(page);
      expect(usageRequested).toBe(true);
      expect(await decisionFor(check, key)).toBe('allow');
    } finally {
      releaseUsage();
    }
    // The first load's answers, arriving after the change's own reload, do not hide the new key.
    await page
      .getByTestId('usage-summary')
      .filter({ hasText: /requests/ })
      .waitFor();
    await row(page, 'while loading').waitFor();
    await closeKeyPanel(page);
  });

  it('a change clicked while the page reloads after the last one is done, not ignored; a double click makes one key', async () => {
    const { page } = await newPage();
    await signIn(page, 'alice');
    await page.getByRole('link', { name: `Acme Corp (${ACME})` }).click();
    await page.locator('#keys-caption', { hasText: 'Keys of Acme Corp' }).waitFor();
    await page
      .getByTestId('usage-summary')
      .filter({ hasText: /requests/ })
      .waitFor();
    // From here on every usage read waits until released: each change's reload stays in flight.
    let releaseUsage!: () => void;
    const usageHeld = new Promise<void>((resolve) => (releaseUsage = resolve));
    let usageReads = 0;
    await page.route('**/usage?*', async (route) => {
      usageReads += 1;
      await usageHeld;
      await route.continue();
    });
    try {
      await page.locator('#key-name').fill('first of two');
      await page.getByTestId('create-key').dblclick();
      const first = await shownKey(page);
      await until(() => usageReads >= 1, "the first change's reload");
      await closeKeyPanel(page);
      expect(await page.locator('main[aria-busy="true"]').count()).toBe(1);
      await page.locator('#key-name').fill('second of two');
      await page.getByTestId('create-key').click();
      await page.getByTestId('new-key-panel').filter({ hasText: 'second of two' }).waitFor();
      const second = await shownKey(page);
      expect(second).not.toBe(first);
    } finally {
      releaseUsage();
    }
    await page.locator('main:not([aria-busy])').waitFor();
    const names = await page.getByTestId('key-row').locator('td.name').allTextContents();
    expect(names.filter((name) => name === 'first of two')).toHaveLength(1);
    expect(names.filter((name) => name === 'second of two')).toHaveLength(1);
  });

  it('an error from a row low on a long page shows in that row, in view and announced, not at the top of the page', async () => {
    const deps = { store, clock: { now: () => Date.now() }, logger: new LogCapture().logger };
    // Oldest first: the page lists newest first, so these two end up at the bottom.
    for (const name of ['lowest', 'next up', ...Array.from({ length: 28 }, (_, i) => `filler ${i + 1}`)]) {
      const created = await createKey(deps, OPERATOR, { accountId: GLOBEX, name, environment: 'live' });
      expect(created.kind).toBe('created');
      if (created.kind === 'created') registerSecrets(created.key);
    }
    const { page } = await newPage();
    await signIn(page, 'alice');
    await page.getByRole('link', { name: `Globex (${GLOBEX})` }).click();
    await row(page, 'lowest').waitFor();
    const viewport = page.viewportSize()!;
    expect((await row(page, 'lowest').boundingBox())!.y).toBeGreaterThan(viewport.height);
    /** The row's error: announced, and fully in view. */
    const expectShownInRow = async (name: string, text: string) => {
      const beside = row(page, name).getByTestId('row-error');
      await beside.filter({ hasText: text }).waitFor();
      expect(await beside.getAttribute('role')).toBe('alert');
      const box = (await beside.boundingBox())!;
      expect(box.y).toBeGreaterThanOrEqual(0);
      expect(box.y + box.height).toBeLessThanOrEqual(viewport.height);
      expect(await page.getByTestId('error').textContent()).toBe('');
    };

    // Revoked behind the page's back: regenerating it is refused.
    const lowest = (await store.listKeys(GLOBEX))!.find((key) => key.name === 'lowest')!;
    await store.revokeKey(lowest.id, Date.now());
    await row(page, 'lowest')
      .getByRole('button', { name: /^Regenerate key/ })
      .click();
    await page.getByRole('button', { name: 'Regenerate key', exact: true }).click();
    await expectShownInRow('lowest', 'is revoked and cannot be regenerated');

    // A bad range in the Edit dialog; the earlier row's error goes.
    await row(page, 'next up')
      .getByRole('button', { name: /^Rename, set the expiry or restrict/ })
      .click();
    await page.getByLabel(/^Source addresses/).fill('10.0.0.0/33');
    await page.getByRole('button', { name: 'Save', exact: true }).click();
    await expectShownInRow('next up', 'the prefix length must be 0 to 32');
    // The part at fault named once, at the head of the message.
    expect(await row(page, 'next up').getByTestId('row-error').textContent()).toMatch(
      /^restrictions\.sourceAddresses: '10\.0\.0\.0\/33' is not/,
    );
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, 'customer-row-error.png') });
    expect(await row(page, 'lowest').getByTestId('row-error').textContent()).toBe('');
  });

  it('a viewer sees keys and usage but no create, regenerate, edit or revoke control, and the API refuses those calls', async () => {
    // Metered usage, as the usage processor applies it to the ledger: the viewer sees its tokens and spend.
    const metered = (await store.listKeys(ACME))![0]!;
    const now = Date.now();
    // Costs in micro-dollars (the default unit): 4,200 + 3 is $0.004203.
    for (const [tokens, costMinorUnits] of [
      [{ inputTokens: 1000, outputTokens: 200, cachedInputTokens: 300, cacheCreationTokens: 40 }, 4_200],
      [{ inputTokens: 10, outputTokens: 5, cachedInputTokens: 0, cacheCreationTokens: 0 }, 3],
    ] as const) {
      const applied = await store.applyUsage(
        {
          requestId: `journey-${suffix}-${costMinorUnits}`,
          accountId: ACME,
          keyId: metered.id,
          keyPrefix: metered.prefix,
          family: 'chat-completions',
          style: 'chat',
          model: 'gpt-4o-mini',
          tokens,
          costMinorUnits,
          estimated: false,
          atMs: now,
        },
        NO_TOKEN_BUDGETS,
      );
      expect(applied.kind).toBe('applied');
    }
    const { page } = await newPage(375);
    await signIn(page, 'bob');
    await openKeys(page, 'Keys of Acme Corp');
    await page.getByTestId('usage-summary').filter({ hasText: 'requests allowed' }).waitFor();
    expect(await page.getByTestId('usage-metered').textContent()).toBe(
      'Tokens: 1,555 (1,010 input, 205 output, 300 cached input, 40 cache writes). Spend: $0.004203.',
    );
    const meteredRow = (await usageCells(page)).find(([key]) => key!.includes(`(${metered.prefix}…)`));
    expect(meteredRow?.slice(2)).toEqual(['1,555', '$0.004203']);
    // The chart's series selector works from the keyboard: Tokens, then Spend.
    for (const [name, caption] of [
      ['Tokens', 'Chart: tokens per hour'],
      ['Spend', 'Chart: spend in USD per hour'],
    ] as const) {
      await page.getByRole('button', { name, exact: true }).focus();
      await page.keyboard.press('Enter');
      expect(await page.getByRole('button', { name, exact: true }).getAttribute('aria-pressed')).toBe('true');
      expect(await page.locator('#usage-chart-caption').textContent()).toContain(caption);
    }
    expect(await page.getByRole('button', { name: 'Requests', exact: true }).getAttribute('aria-pressed')).toBe('false');
    // The busiest key by spend heads the table and the chart's legend.
    expect((await usageCells(page))[0]![0]).toContain(`(${metered.prefix}…)`);
    expect(await page.locator('#usage-chart .u-legend').textContent()).toContain(`(${metered.prefix}…)`);
    // Hovering the current hour, the legend shows that hour's spend as money, exactly.
    // The chart is drawn again when its data refreshes, which drops the cursor: hover again until the legend follows it.
    const hourSpend = page.locator('#usage-chart .u-legend').filter({ hasText: '$0.004203' });
    for (let attempt = 1; ; attempt += 1) {
      const plot = (await page.locator('#usage-chart .u-over').boundingBox())!;
      await page.mouse.move(plot.x + plot.width - 1 - (attempt % 2), plot.y + plot.height / 2);
      const shown = await hourSpend.waitFor({ timeout: 3_000 }).then(
        () => true,
        (error: unknown) => (attempt < 10 ? false : Promise.reject(error)),
      );
      if (shown) break;
    }
    await page.screenshot({ path: join(ARTIFACTS, 'customer-usage-spend-375.png'), fullPage: true });
    await page.mouse.move(0, 0);
    expect(await page.getByTestId('create-card').isHidden()).toBe(true);
    expect(await page.getByTestId('create-key').isVisible()).toBe(false);
    expect(await page.getByTestId('key-row').count()).toBeGreaterThan(0);
    expect(await page.getByTestId('key-row').getByRole('button').count()).toBe(0);
    expect(await page.getByTestId('members-section').isHidden()).toBe(true);
    const keyId = (await page.getByTestId('key-row').first().getAttribute('data-key-id'))!;
    const refused = [
      await callFromPage(page, 'POST', `/api/accounts/${ACME}/keys`, { name: 'sneaky' }),
      await callFromPage(page, 'POST', `/api/accounts/${ACME}/keys/${keyId}/regenerate`, {}),
      await callFromPage(page, 'POST', `/api/accounts/${ACME}/keys/${keyId}/revoke`),
      await callFromPage(page, 'PATCH', `/api/accounts/${ACME}/keys/${keyId}`, { name: 'renamed' }),
    ];
    expect(refused).toEqual(Array.from({ length: 4 }, () => ({ status: 403, code: 'forbidden' })));
    // Another account's ids are as unknown as ids that do not exist.
    expect(await callFromPage(page, 'GET', `/api/accounts/${INITECH}/keys`)).toEqual({ status: 404, code: 'account_not_found' });
    expect(await callFromPage(page, 'GET', `/api/accounts/${ACME}/usage`)).toEqual({ status: 200, code: null });
    const widths = await pageWidths(page);
    expect(widths.scroll).toBeLessThanOrEqual(widths.client);
  });

  it('a person with no membership sees "no access", also when opening the keys page directly; signed out, the keys page asks to sign in', async () => {
    const { page } = await newPage(375);
    await page.goto(`${app.customerUrl}/keys`);
    await page.getByRole('link', { name: 'Sign in with your identity provider' }).waitFor();
    await signIn(page, 'nobody');
    await page.getByRole('heading', { name: 'No access' }).waitFor();
    await page.goto(`${app.customerUrl}/keys`);
    await page.getByRole('heading', { name: 'No access' }).waitFor();
    expect(await page.getByTestId('no-access').textContent()).toBe(
      'You are not a member of any account here, so there is nothing to show.',
    );
  });
});
