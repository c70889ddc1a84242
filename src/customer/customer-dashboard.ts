import { dirname, join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { registerWebAssets, SHARED_PAGE_FILES, type WebAssets } from '../http/web-assets';

/**
 * The customer's "API Keys" page (/keys): one page plus its stylesheets and script modules from src/web/, and the
 * charting library's two files, served from its own package (never from a CDN: the page's CSP allows only this
 * server). The files hold no data; the page itself is only for a signed-in person (`config.signedInPage`: the customer
 * server sends anyone else to the start page), and every data call it makes goes to the customer API.
 *
 * Files are served below /keys/assets/ with the same layout as in src/web/, so the modules' relative imports
 * (`../shared/dom.js`) resolve alike in the type checker and in the browser.
 */
export const CUSTOMER_PAGE_PATH = '/keys';
const ASSET_PREFIX = `${CUSTOMER_PAGE_PATH}/assets/`;

/** Every file of src/web/ the page loads, directly or through an import; test/dashboard checks the list against the files. */
export const CUSTOMER_ASSET_FILES: readonly string[] = [
  ...SHARED_PAGE_FILES,
  'customer/audit-words.js',
  'customer/customer.css',
  'customer/customer.js',
  'customer/money.js',
  'customer/usage-chart.js',
  'customer/webhooks-panel.js',
];

/** uPlot (package `uplot`, pinned in package.json): its browser build that defines the global `uPlot`, and its stylesheet. */
export const CHART_LIBRARY_ROOT = join(dirname(require.resolve('uplot/package.json')), 'dist');
export const CHART_LIBRARY_FILES: WebAssets = {
  [`${ASSET_PREFIX}vendor/uPlot.iife.min.js`]: 'uPlot.iife.min.js',
  [`${ASSET_PREFIX}vendor/uPlot.min.css`]: 'uPlot.min.css',
};

/** The stylesheet every customer page shares, the server-rendered ones too (customer-pages.ts). */
export const CUSTOMER_STYLESHEET = `${ASSET_PREFIX}shared/base.css`;

export const CUSTOMER_ASSETS: WebAssets = Object.fromEntries(CUSTOMER_ASSET_FILES.map((file) => [`${ASSET_PREFIX}${file}`, file]));

export function registerCustomerDashboard(app: FastifyInstance): void {
  registerWebAssets(app, { [CUSTOMER_PAGE_PATH]: 'customer/index.html' }, { signedInPage: true });
  registerWebAssets(app, CUSTOMER_ASSETS, {});
  registerWebAssets(app, CHART_LIBRARY_FILES, {}, CHART_LIBRARY_ROOT);
}
