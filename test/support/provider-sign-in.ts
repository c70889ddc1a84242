import type { Browser, BrowserContext, Page, Response } from 'playwright-core';
import { registerSecrets } from './secret-scan';

/** Everything but loopback is refused: the test OpenID provider's development login page imports a web font. */
const NOT_LOOPBACK = /^https?:\/\/(?!127\.0\.0\.1[:/]|localhost[:/])/;

/**
 * A page in a browser context of its own, added to `contexts` (the test file
 * closes them after each test), that reaches loopback only, and whose
 * authorization codes (any response URL's `code`) join the suite-wide
 * secret scan.
 */
export async function loopbackPage(
  browser: Browser,
  contexts: BrowserContext[],
  options: { width?: number; clipboardOrigin?: string } = {},
): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ viewport: { width: options.width ?? 1280, height: 900 } });
  contexts.push(context);
  if (options.clipboardOrigin) await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: options.clipboardOrigin });
  await context.route(NOT_LOOPBACK, (route) => route.abort());
  const page = await context.newPage();
  page.on('response', (response) => {
    const code = new URL(response.url()).searchParams.get('code');
    if (code) registerSecrets(code);
  });
  return { context, page };
}

/**
 * Signs in as a person would: opens `startUrl`, follows the `link` to the
 * test provider (test/support/customer-stack.ts, startOidcProvider), fills
 * its login form for `login` (any password), and waits for the callback
 * (a URL holding `callbackPath`) and the page it leads to. Answers the
 * callback's response.
 */
export async function signInThroughProvider(
  page: Page,
  options: { startUrl: string; link: string; login: string; callbackPath: string },
): Promise<Response> {
  await page.goto(options.startUrl);
  await page.getByRole('link', { name: options.link }).click();
  await page.locator('input[name="login"]').fill(options.login);
  await page.locator('input[name="password"]').fill('any password will do');
  const [callback] = await Promise.all([
    page.waitForResponse((response) => response.url().includes(options.callbackPath), { timeout: 20_000 }),
    page.getByRole('button', { name: 'Sign-in' }).click(),
  ]);
  await page.waitForLoadState();
  return callback;
}
