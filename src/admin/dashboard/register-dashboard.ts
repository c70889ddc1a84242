import type { FastifyInstance, FastifyReply } from 'fastify';
import { DASHBOARD_HTML } from './dashboard-page';
import { DASHBOARD_SCRIPT } from './dashboard-script';
import { DASHBOARD_CSS } from './dashboard-style';

/**
 * The admin dashboard ("API Keys"): one static page plus its script and
 * stylesheet. They hold no data, so they are the only admin routes served
 * without the admin token; every data call the page makes goes to the admin
 * API with `Authorization: Bearer <token>`.
 */

const ASSETS: Readonly<Record<string, { contentType: string; body: string }>> = {
  '/dashboard': { contentType: 'text/html; charset=utf-8', body: DASHBOARD_HTML },
  '/dashboard/app.js': { contentType: 'text/javascript; charset=utf-8', body: DASHBOARD_SCRIPT },
  '/dashboard/app.css': { contentType: 'text/css; charset=utf-8', body: DASHBOARD_CSS },
};

/**
 * No inline script or style anywhere (script and stylesheet are same-origin
 * files), no external resource, no framing, no form posts, no base override.
 */
export const DASHBOARD_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': DASHBOARD_CSP,
  'x-content-type-options': 'nosniff',
  'cache-control': 'no-store',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
};

/**
 * True only for `GET` of exactly the dashboard page and its two assets, as
 * matched by the router (so a query string does not matter, and any other
 * path, method or a 404 is not public). Used by the admin token hook.
 */
export function registerDashboard(app: FastifyInstance): void {
  for (const [path, asset] of Object.entries(ASSETS)) {
    app.get(path, { exposeHeadRoute: false, config: { public: true } }, async (_request, reply: FastifyReply) =>
      reply.headers(SECURITY_HEADERS).type(asset.contentType).send(asset.body),
    );
  }
}
