import { existsSync, statSync } from 'node:fs';
import { extname, join } from 'node:path';
import fastifyStatic, { type SendOptions } from '@fastify/static';
import type { FastifyContextConfig, FastifyInstance } from 'fastify';
import { UNDESCRIBED } from './openapi';

/**
 * The dashboard pages' browser files (HTML, CSS, JavaScript modules) are in src/web/; `npm run build` copies them to
 * dist/web/. This module is one level below src/ (ts-jest) and dist/ (compiled), so the same path finds either.
 */
export const WEB_ROOT = join(__dirname, '..', 'web');

/** The files of src/web/shared/ both pages load, directly or through an import. */
export const SHARED_PAGE_FILES: readonly string[] = [
  'shared/base.css',
  'shared/api.js',
  'shared/dom.js',
  'shared/key-format.js',
  'shared/key-dialogs.js',
  'shared/key-panel.js',
  'shared/key-table.js',
  'shared/one-at-a-time.js',
  'shared/restriction-fields.js',
];

/**
 * No inline script or style anywhere (scripts and stylesheets are same-origin files), no external resource, no
 * framing, no form posts, no base override.
 */
export const PAGE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

export const PAGE_SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': PAGE_CSP,
  'x-content-type-options': 'nosniff',
  'cache-control': 'no-store',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
};

/** The only kinds of file a page is made of; with nosniff the browser needs the exact type (a module script above all). */
const CONTENT_TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
};

/**
 * What @fastify/static adds on its own is off: the type comes from CONTENT_TYPES, and with `no-store` there is no
 * caching, so no validators and no ranges either.
 */
const SEND_OPTIONS: SendOptions = {
  contentType: false,
  cacheControl: false,
  etag: false,
  lastModified: false,
  acceptRanges: false,
  index: false,
};

/** URL path → file below the web root, e.g. `'/dashboard': 'operator/index.html'`. */
export type WebAssets = Readonly<Record<string, string>>;

/** The apps @fastify/static is registered on (once per app: it decorates the reply). */
const withStaticPlugin = new WeakSet<FastifyInstance>();

/**
 * Serves exactly these files, each on `GET` of exactly its path (a query string aside) and nothing else: no directory,
 * no other file of the web root, no HEAD. `config` is the route config the caller's auth hook reads (e.g.
 * `{ public: true }` on the admin server: the files hold no data). Every answer has PAGE_SECURITY_HEADERS.
 * Throws, naming the file, when one is missing or of a kind CONTENT_TYPES does not know: a build that lost the
 * pages fails at start-up rather than with 404s in the browser.
 */
export function registerWebAssets(app: FastifyInstance, assets: WebAssets, config: FastifyContextConfig, root = WEB_ROOT): void {
  for (const [path, file] of Object.entries(assets)) {
    const contentType = CONTENT_TYPES[extname(file)];
    if (!contentType) throw new Error(`Web asset ${file} (for ${path}) is not HTML, CSS or JavaScript.`);
    const absolute = join(root, file);
    if (!existsSync(absolute) || !statSync(absolute).isFile()) {
      throw new Error(
        `Web asset ${file} (for ${path}) is missing from ${root}. Run \`npm run build\`, which copies src/web/ to dist/web/.`,
      );
    }
  }
  if (!withStaticPlugin.has(app)) {
    withStaticPlugin.add(app);
    void app.register(fastifyStatic, { serve: false, root });
  }
  for (const [path, file] of Object.entries(assets)) {
    const contentType = CONTENT_TYPES[extname(file)]!;
    app.get(path, { exposeHeadRoute: false, config, schema: UNDESCRIBED }, async (_request, reply) =>
      reply.headers(PAGE_SECURITY_HEADERS).type(contentType).sendFile(file, root, SEND_OPTIONS),
    );
  }
}
