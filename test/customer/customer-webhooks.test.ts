/**
 * The owners' Webhooks section of the customer dashboard (issue 39 §2), in
 * Debian's Chromium through playwright-core: the built service (its own
 * process, its own members and customer API, on a real Redis) behind a real
 * OpenID provider, sending to a real receiver that verifies each event with
 * the `standardwebhooks` library. Chromium is required: without
 * /usr/bin/chromium the suite fails (never skips).
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { addMember } from '../../src/accounts/member-actions';
import { CREDIT_LIMIT_MINOR_UNITS } from '../../src/accounts/credit';
import { decimalText } from '../../src/accounts/money';
import { OPERATOR, type MemberRole } from '../../src/accounts/customer-identity';
import { RedisStore } from '../../src/store/redis/redis-store';
import { launchChromium } from '../support/chromium';
import {
  loopbackDashboardEnv,
  startCustomerApp,
  startOidcProvider,
  type CustomerAppProcess,
  type OidcTestProvider,
} from '../support/customer-stack';
import { LogCapture } from '../support/log-capture';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { registerSecrets } from '../support/secret-scan';
import { freePort } from '../support/free-port';
import { loopbackPage, signInThroughProvider } from '../support/provider-sign-in';
import { WebhookReceiver } from '../support/webhook-receiver';
import { until } from '../support/waiting';

const SESSION_SECRET = 'webhooks-customer-session-secret-0123456789abcdef';
const ACCOUNT = `hooked-${process.pid}`;

jest.setTimeout(120_000);

let redis: TestRedis;
let store: RedisStore;
let provider: OidcTestProvider;
let app: CustomerAppProcess;
let browser: Browser;
let receiver: WebhookReceiver;

beforeAll(async () => {
  registerSecrets(SESSION_SECRET);
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  redis = await startTestRedis();
  receiver = await WebhookReceiver.start();
  store = await RedisStore.connect({ url: redis.url, commandTimeoutMs: 1000 });
  provider = await startOidcProvider({
    clients: [{ client_id: 'dashboard', token_endpoint_auth_method: 'none', redirect_uris: [`${origin}/auth/callback`] }],
    users: {
      olivia: { email: 'olivia@example.com', email_verified: true, name: 'Olivia' },
      dev: { email: 'dev@example.com', email_verified: true, name: 'Dev' },
    },
  });
  const deps = { store, clock: { now: () => Date.now() }, logger: new LogCapture().logger };
  await store.createAccount({ id: ACCOUNT, name: 'Hooked Inc', status: 'active', createdAt: new Date().toISOString() });
  for (const [subject, role] of [
    ['olivia', 'owner'],
    ['dev', 'developer'],
  ] as [string, MemberRole][]) {
    const added = await addMember(deps, OPERATOR, {
      accountId: ACCOUNT,
      role,
      principal: { kind: 'identity', issuer: provider.issuer, subject },
    });
    expect(added.kind).toBe('added');
  }
  [app, browser] = await Promise.all([
    startCustomerApp(
      {
        ...loopbackDashboardEnv({ redisUrl: redis.url, issuer: provider.issuer, port, sessionSecret: SESSION_SECRET }),
        WEBHOOK_LOOPBACK_HTTP: 'true',
        WEBHOOK_POLL_INTERVAL_MS: '50',
      },
      'store',
    ),
    launchChromium('The customer webhooks tests'),
  ]);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await app?.stop();
  await provider?.stop();
  await store?.close();
  await receiver?.stop();
  await redis?.stop();
});

const openContexts: BrowserContext[] = [];
afterEach(async () => {
  for (const context of openContexts.splice(0)) await context.close();
});

async function signedIn(login: string): Promise<Page> {
  const { page } = await loopbackPage(browser, openContexts);
  await signInThroughProvider(page, {
    startUrl: `${app.customerUrl}/`,
    link: 'Sign in with your identity provider',
    login,
    callbackPath: '/auth/callback',
  });
  const problems: string[] = [];
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('requestfailed', (request) => problems.push(`${request.url()}: ${request.failure()?.errorText ?? 'failed'}`));
  page.on('response', (response) => {
    if (response.status() >= 400) problems.push(`${response.url()}: HTTP ${response.status()}`);
  });
  await page.getByTestId('open-keys').click();
  try {
    await page.locator('#keys-caption', { hasText: 'Keys of Hooked Inc' }).waitFor();
  } catch (error) {
    // Say what the page was doing, not only that the keys never showed.
    const shown = await page.getByTestId('error').allTextContents();
    throw new Error(`the keys never showed at ${page.url()}; the page says: ${shown.join(' | ')}; ${problems.join('; ')}`, {
      cause: error,
    });
  }
  return page;
}

async function shownSecret(page: Page, previous?: string): Promise<string> {
  await page.getByTestId('webhook-secret-panel').waitFor();
  await until(async () => ((await page.getByTestId('webhook-secret').textContent()) ?? '') !== (previous ?? ''), 'a new secret shown');
  const secret = (await page.getByTestId('webhook-secret').textContent()) ?? '';
  expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
  registerSecrets(secret);
  return secret;
}

describe('the Webhooks section in Chromium', () => {
  it('an owner adds an endpoint (secret once), test-sends, reads the delivery log, disables and enables it, and rotates its secret', async () => {
    const page = await signedIn('olivia');
    await page.getByTestId('webhooks-section').waitFor();

    await page.locator('#webhook-url').fill(receiver.url('/dashboard'));
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    const secret = await shownSecret(page);
    const row = page.getByTestId('webhook-row').filter({ hasText: receiver.url('/dashboard') });
    await row.waitFor();
    expect(await row.getByTestId('webhook-state').textContent()).toBe('enabled');
    // Subscribed to the key events by default: a key made on the page is sent, signed with the secret shown.
    await page.locator('#key-name').fill('watched');
    await page.getByTestId('create-key').click();
    await page.getByTestId('new-key-panel').waitFor();
    registerSecrets((await page.getByTestId('new-key-value').textContent()) ?? '');
    await until(() => receiver.on('/dashboard').length >= 1, 'the key.created event');
    expect(WebhookReceiver.verified(receiver.on('/dashboard')[0]!, secret)).toMatchObject({
      type: 'key.created',
      data: { account_id: ACCOUNT },
    });
    await page.getByRole('button', { name: 'Done' }).click();

    await row.getByRole('button', { name: 'Send a test event' }).click();
    await page.getByTestId('notice').filter({ hasText: 'A test event is on its way' }).waitFor();
    await until(() => receiver.on('/dashboard').length >= 2, 'the test event');
    expect(WebhookReceiver.verified(receiver.on('/dashboard')[1]!, secret).type).toBe('webhook.test');

    await until(
      async () => {
        await row.getByRole('button', { name: 'Deliveries' }).click();
        return (await page.getByTestId('webhook-attempt').count()) >= 2;
      },
      'two attempts in the delivery log',
      10_000,
      200,
    );
    const attempts = await page.getByTestId('webhook-attempt').allTextContents();
    expect(attempts.some((text) => text.includes('webhook.test (attempt 1): delivered, HTTP 200'))).toBe(true);

    // The last Deliveries click may still be loading; a click while the page is busy is ignored, as every action's is.
    await page.locator('main:not([aria-busy])').waitFor();
    await row.getByRole('button', { name: 'Disable' }).click();
    await row.getByTestId('webhook-state').filter({ hasText: 'disabled: disabled by an owner' }).waitFor();
    await row.getByRole('button', { name: 'Enable' }).click();
    await row
      .getByTestId('webhook-state')
      .filter({ hasText: /^enabled$/ })
      .waitFor();

    await row.getByRole('button', { name: 'Rotate the signing secret' }).click();
    const rotated = await shownSecret(page, secret);
    expect(rotated).not.toBe(secret);
    await row.getByRole('button', { name: 'Send a test event' }).click();
    await until(() => receiver.on('/dashboard').length >= 3, 'the second test event');
    expect(WebhookReceiver.verified(receiver.on('/dashboard')[2]!, rotated).type).toBe('webhook.test');
    // Shown once: gone after a reload.
    await page.reload();
    await row.waitFor();
    expect(await page.content()).not.toContain(rotated);
    // The audit trail says each change in words, not as action codes.
    const audit = page.getByTestId('audit-section');
    await audit.filter({ hasText: "Replaced a webhook endpoint's signing secret, by olivia" }).waitFor();
    const said = await audit.textContent();
    for (const words of [
      'Turned on a webhook endpoint, by olivia',
      'Turned off a webhook endpoint, by olivia',
      'Added a webhook endpoint for key.created',
    ]) {
      expect(said).toContain(words);
    }
    expect(said).not.toContain('webhook.');
  });

  it('an owner sets the credit.low threshold on the page, an out-of-range one refused beside it; the API reads it back', async () => {
    const page = await signedIn('olivia');
    await page.getByTestId('webhooks-section').waitFor();
    const threshold = page.getByLabel('Send credit.low when the prepaid balance falls below');
    const save = page.getByRole('button', { name: 'Save threshold' });
    const settings = async () => {
      const answer = await page.request.get(`${app.customerUrl}/api/accounts/${ACCOUNT}/webhooks/settings`);
      expect(answer.status()).toBe(200);
      return (await answer.json()) as { creditLowThreshold: number | null; creditLowThresholdFormatted: string | null };
    };
    const currency = { code: 'USD', exponent: 6 };
    expect(await settings()).toEqual({ creditLowThreshold: null, creditLowThresholdFormatted: null, currency });
    expect(await page.locator('#credit-low-hint').textContent()).toContain('In USD');

    // Refused beside the control and announced: what is not an amount, or zero, by the page; above the credit limit
    // by the API.
    const refusal = page.getByTestId('credit-low-error');
    for (const [typed, words] of [
      ['0', 'Enter an amount above zero.'],
      ['twenty', 'Enter an amount in USD, such as 25 or 0.50.'],
      ['0.0000001', 'USD amounts here have at most 6 digits after the point.'],
    ]) {
      await threshold.fill(typed!);
      await save.click();
      await refusal.filter({ hasText: words! }).waitFor();
    }
    expect(await refusal.getAttribute('role')).toBe('alert');
    await threshold.fill(decimalText(CREDIT_LIMIT_MINOR_UNITS + 1, currency.exponent));
    await save.click();
    await refusal.filter({ hasText: 'field: creditLowThreshold' }).waitFor();
    expect((await settings()).creditLowThreshold).toBeNull();

    // Typed in dollars, kept in the currency's units, said as money.
    await threshold.fill('25');
    await save.click();
    await page.getByTestId('notice').filter({ hasText: 'falls below $25.00.' }).waitFor();
    expect(await refusal.textContent()).toBe('');
    expect(await settings()).toEqual({ creditLowThreshold: 25_000_000, creditLowThresholdFormatted: '$25.00', currency });
    // Shown again after a reload, as the API has it.
    await page.reload();
    await page.getByTestId('webhooks-section').waitFor();
    await until(async () => (await threshold.inputValue()) === '25', 'the saved threshold in the field');
    await threshold.fill('1,000.0025');
    await save.click();
    await page.getByTestId('notice').filter({ hasText: 'falls below $1,000.0025.' }).waitFor();
    expect((await settings()).creditLowThreshold).toBe(1_000_002_500);
    expect(await threshold.inputValue()).toBe('1000.0025');

    // Emptied: no credit.low at all.
    await threshold.fill('');
    await save.click();
    await page.getByTestId('notice').filter({ hasText: 'No credit.low events' }).waitFor();
    expect((await settings()).creditLowThreshold).toBeNull();
    // The audit trail says the changes in words, the amounts as money.
    await page.reload();
    const audit = page.getByTestId('audit-section');
    await audit.filter({ hasText: 'Turned off credit.low events, by olivia' }).waitFor();
    expect(await audit.textContent()).toContain('Set credit.low to be sent below $25.00, by olivia');
    expect(await audit.textContent()).toContain('Set credit.low to be sent below $1,000.0025, by olivia');
  });

  it("the page's first list of endpoints, answering after a newer one, does not hide an endpoint added meanwhile", async () => {
    const { page } = await loopbackPage(browser, openContexts);
    await signInThroughProvider(page, {
      startUrl: `${app.customerUrl}/`,
      link: 'Sign in with your identity provider',
      login: 'olivia',
      callbackPath: '/auth/callback',
    });
    // The first load's list is read from the server at once but handed to the page only at the end: by then it is
    // older than what the page shows.
    let releaseFirst!: () => void;
    const firstHeld = new Promise<void>((resolve) => (releaseFirst = resolve));
    let firstDelivered!: () => void;
    const delivered = new Promise<void>((resolve) => (firstDelivered = resolve));
    let lists = 0;
    await page.route(/\/webhooks$/, async (route) => {
      if (route.request().method() !== 'GET' || ++lists > 1) return route.continue();
      const response = await route.fetch();
      await firstHeld;
      await route.fulfill({ response });
      firstDelivered();
    });
    await page.getByTestId('open-keys').click();
    await page.locator('#keys-caption', { hasText: 'Keys of Hooked Inc' }).waitFor();
    await until(() => lists === 1, 'the first list of endpoints requested');
    // Shown only once its list and event choices are there: not while the first list is held.
    expect(await page.getByTestId('webhooks-section').isHidden()).toBe(true);
    // Refresh, clicked while the first load is in flight, is done (not ignored as a second change would be).
    await page.getByRole('button', { name: 'Refresh' }).click();
    await page.getByTestId('webhooks-section').waitFor();
    const url = receiver.url('/while-loading');
    await page.locator('#webhook-url').fill(url);
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    await shownSecret(page);
    const row = page.getByTestId('webhook-row').filter({ hasText: url });
    await row.waitFor();
    releaseFirst();
    await delivered;
    // Give the page's script its turn to handle the older answer.
    await page.evaluate(() => new Promise((resolve) => setTimeout(resolve, 200)));
    expect(await row.count()).toBe(1);
  });

  it('refuses a private address on the page, and a developer sees no Webhooks section', async () => {
    const owner = await signedIn('olivia');
    await owner.getByTestId('webhooks-section').waitFor();
    await owner.locator('#webhook-url').fill('https://10.0.0.8/hook');
    await owner.getByRole('button', { name: 'Add endpoint' }).click();
    await owner.getByTestId('error').filter({ hasText: 'private' }).waitFor();

    const developer = await signedIn('dev');
    await developer.getByTestId('members-section').waitFor({ state: 'hidden' });
    expect(await developer.getByTestId('webhooks-section').isHidden()).toBe(true);
  });
});
