import type { FastifyInstance } from 'fastify';
import { registerWebAssets, SHARED_PAGE_FILES, type WebAssets } from '../http/web-assets';

/**
 * The operator dashboard ("API Keys"): one page plus its stylesheets and script modules, from src/web/. They hold no
 * data, so they are the only admin routes served without the admin token; every data call the page makes goes to the
 * admin API with `Authorization: Bearer <token>`.
 *
 * Files are served below /dashboard/assets/ with the same layout as in src/web/, so the modules' relative imports
 * (`../shared/dom.js`) resolve alike in the type checker and in the browser.
 */
const ASSET_PREFIX = '/dashboard/assets/';

/** Every file the page loads, directly or through an import; test/dashboard checks the list against the files. */
export const DASHBOARD_ASSET_FILES: readonly string[] = [
  ...SHARED_PAGE_FILES,
  'operator/operator.css',
  'operator/operator.js',
  'operator/operator-audit.js',
];

export const DASHBOARD_ASSETS: WebAssets = {
  '/dashboard': 'operator/index.html',
  ...Object.fromEntries(DASHBOARD_ASSET_FILES.map((file) => [`${ASSET_PREFIX}${file}`, file])),
};

/** Public (`config.public`, read by the admin token hook) only for GET of exactly these paths. */
export function registerDashboard(app: FastifyInstance): void {
  registerWebAssets(app, DASHBOARD_ASSETS, { public: true });
}
