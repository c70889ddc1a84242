import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix, relative } from 'node:path';
import { promisify } from 'node:util';
import Fastify from 'fastify';

import { DASHBOARD_ASSETS } from '../../src/admin/register-dashboard';
import { CHART_LIBRARY_FILES, CHART_LIBRARY_ROOT, CUSTOMER_ASSETS, CUSTOMER_PAGE_PATH } from '../../src/customer/customer-dashboard';
import { registerWebAssets, WEB_ROOT } from '../../src/http/web-assets';

/** Static checks of the dashboard's browser files; the browser suite (dashboard.test.ts) checks the behaviour. */

const REPO = join(__dirname, '..', '..');
const execFileAsync = promisify(execFile);

function filesBelow(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? filesBelow(join(dir, entry.name)) : [relative(WEB_ROOT, join(dir, entry.name))],
  );
}

const webFiles = filesBelow(WEB_ROOT);
const scripts = webFiles.filter((file) => file.endsWith('.js'));
const stylesheets = webFiles.filter((file) => file.endsWith('.css'));
const read = (file: string) => readFileSync(join(WEB_ROOT, file), 'utf8');
/** The file without its comments (which may well name what the code must not do). */
const code = (file: string) =>
  read(file)
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/^\s*\/\/.*$/gm, '');

/** Each dashboard page: where it is served, its HTML, and the files it may load (from src/web/, or a library's own). */
const PAGES = [
  { name: 'operator', path: '/dashboard', prefix: '/dashboard/assets/', assets: DASHBOARD_ASSETS, vendor: {} as Record<string, string> },
  {
    name: 'customer',
    path: CUSTOMER_PAGE_PATH,
    prefix: `${CUSTOMER_PAGE_PATH}/assets/`,
    assets: { [CUSTOMER_PAGE_PATH]: 'customer/index.html', ...CUSTOMER_ASSETS },
    vendor: CHART_LIBRARY_FILES,
  },
];

/** The URL paths a module imports (static `import … from './x.js'`), resolved against its own URL path. */
function importedPaths(urlPath: string, source: string): string[] {
  return [...source.matchAll(/^\s*import\b[^'"]*?from\s+'([^']+)'/gm)].map((match) => posix.join(posix.dirname(urlPath), match[1]!));
}

describe.each(PAGES)('dashboard assets: the $name page', ({ path: pagePath, prefix, assets, vendor }) => {
  const pageHtml = read(assets[pagePath]!);

  it('serves exactly what the page loads: its stylesheets and scripts, and every module they import', () => {
    const loaded = new Set<string>();
    const pending = [...pageHtml.matchAll(/<(?:link|script)\b[^>]*\b(?:href|src)="(\/[^"]+)"/g)].map((match) => match[1]!);
    while (pending.length > 0) {
      const path = pending.pop()!;
      if (loaded.has(path)) continue;
      loaded.add(path);
      expect(path.startsWith(prefix)).toBe(true);
      if (path.endsWith('.js') && !(path in vendor)) pending.push(...importedPaths(path, read(path.slice(prefix.length))));
    }
    const served = [...Object.keys(assets).filter((path) => path !== pagePath), ...Object.keys(vendor)];
    expect([...loaded].sort()).toEqual(served.sort());
    // Served at the same layout as src/web/, so relative imports mean the same thing to tsc and to the browser.
    for (const path of Object.keys(assets).filter((path) => path !== pagePath)) expect(assets[path]).toBe(path.slice(prefix.length));
  });

  it('the page has no inline script, inline style, event-handler attribute or external resource', () => {
    expect(pageHtml).not.toMatch(new RegExp(`<script(?![^>]*\\bsrc="${prefix.replace(/\//g, '\\/')})`));
    expect(pageHtml).not.toMatch(/<style|\sstyle=|\son[a-z]+=/i);
    expect(pageHtml).not.toMatch(/(src|href)="(https?:)?\/\//);
  });

  it('every input, select and textarea of the page has a label', () => {
    const controls = [...pageHtml.matchAll(/<(input|select|textarea)\b[^>]*>/g)].map((match) => match[0]);
    expect(controls.length).toBeGreaterThanOrEqual(7);
    for (const control of controls) {
      const id = /\bid="([^"]+)"/.exec(control)?.[1];
      expect({ control, labelled: id !== undefined && pageHtml.includes(`<label for="${id}"`) }).toEqual({ control, labelled: true });
    }
  });
});

describe('dashboard assets', () => {
  it('the browser code never builds HTML from strings', () => {
    expect(scripts.length).toBeGreaterThanOrEqual(4);
    for (const file of scripts) {
      for (const sink of ['innerHTML', 'outerHTML', 'insertAdjacentHTML', 'document.write', 'eval(', 'new Function', "setTimeout('"]) {
        expect({ file, sink, found: code(file).includes(sink) }).toEqual({ file, sink, found: false });
      }
    }
  });

  it('the operator script keeps the token in sessionStorage only; the customer script holds no token but the CSRF one', () => {
    expect(read('operator/operator.js')).toContain('sessionStorage');
    for (const file of scripts) {
      expect(code(file)).not.toContain('localStorage');
      expect(code(file)).not.toMatch(/document\.cookie/);
    }
    expect(code('customer/customer.js')).not.toContain('sessionStorage');
  });

  it('no stylesheet loads anything (no url(), no @import)', () => {
    for (const file of stylesheets) expect(code(file)).not.toMatch(/url\(|@import/);
  });

  it('the chart library is served from its pinned package, never from a CDN', () => {
    const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    expect(pkg.dependencies.uplot).toMatch(/^\d+\.\d+\.\d+$/);
    const installed = JSON.parse(readFileSync(join(CHART_LIBRARY_ROOT, '..', 'package.json'), 'utf8')) as { name: string; version: string };
    expect(installed).toMatchObject({ name: 'uplot', version: pkg.dependencies.uplot });
  });
});

describe('the browser code is type-checked and linted with the rest', () => {
  it('every script is a // @ts-check module, in the browser tsconfig that npm test runs', () => {
    for (const file of scripts) expect({ file, firstLine: read(file).split('\n')[0] }).toEqual({ file, firstLine: '// @ts-check' });
    const tsconfig = readFileSync(join(WEB_ROOT, 'tsconfig.json'), 'utf8');
    for (const option of ['"checkJs": true', '"strict": true', '"noEmit": true', '"types": []', '"DOM"', '"include": ["**/*.js"']) {
      expect(tsconfig).toContain(option);
    }
    const scriptsOf = (JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
    expect(scriptsOf.typecheck).toMatch(/^tsc -b .*\bsrc\/web\/tsconfig\.json\b/);
    // npm test (tools/run-tests.js) runs the type-check, ESLint and Prettier, each over the whole tree, before jest.
    expect(scriptsOf.test).toBe('node tools/run-tests.js');
    const stages = readFileSync(join(REPO, 'tools', 'run-tests.js'), 'utf8');
    for (const script of ['typecheck', 'lint:eslint', 'lint:prettier']) expect(stages).toContain(`'run', '${script}'`);
    expect(scriptsOf['lint:eslint']).toMatch(/^eslint .* \.$/);
    expect(scriptsOf['lint:prettier']).toMatch(/^prettier --check .* \.$/);
  });

  it('ESLint lints it as browser modules, with type information, and refuses HTML sinks', async () => {
    // --print-config in a child process: ESLint loads eslint.config.mjs with a dynamic import, which jest's VM cannot do.
    const eslintBin = join(REPO, 'node_modules', 'eslint', 'bin', 'eslint.js');
    const configs = await Promise.all(
      ['shared/dom.js', 'operator/operator.js', 'customer/customer.js'].map(async (file) => {
        const { stdout } = await execFileAsync(process.execPath, [eslintBin, '--print-config', join('src', 'web', file)], { cwd: REPO });
        return JSON.parse(stdout) as {
          languageOptions: { sourceType: string; globals: Record<string, unknown>; parserOptions: { projectService?: boolean } };
          rules: Record<string, unknown>;
        };
      }),
    );
    for (const config of configs) {
      expect(config.languageOptions.sourceType).toBe('module');
      expect(config.languageOptions.globals).toHaveProperty('document');
      expect(config.languageOptions.globals).not.toHaveProperty('process');
      expect(config.languageOptions.parserOptions.projectService).toBe(true);
      expect(config.rules['@typescript-eslint/no-floating-promises']).toEqual([2]);
      expect(JSON.stringify(config.rules['no-restricted-properties'])).toContain('innerHTML');
    }
  });
});

describe('registerWebAssets', () => {
  let root: string;
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'web-assets-'));
    mkdirSync(join(root, 'page'));
    writeFileSync(join(root, 'page', 'index.html'), '<!doctype html><title>t</title>');
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('refuses to start when a file is missing, naming it and the build step', () => {
    const app = Fastify();
    expect(() => registerWebAssets(app, { '/page': 'page/index.html', '/page/app.js': 'page/app.js' }, {}, root)).toThrow(
      `Web asset page/app.js (for /page/app.js) is missing from ${root}. Run \`npm run build\`, which copies src/web/ to dist/web/.`,
    );
  });

  it('refuses a file that is not HTML, CSS or JavaScript', () => {
    writeFileSync(join(root, 'page', 'data.json'), '{}');
    expect(() => registerWebAssets(Fastify(), { '/page/data.json': 'page/data.json' }, {}, root)).toThrow(
      'Web asset page/data.json (for /page/data.json) is not HTML, CSS or JavaScript.',
    );
  });

  it('serves only the listed paths, by GET, with the security headers and the exact content type', async () => {
    mkdirSync(join(root, 'page', 'sub'));
    writeFileSync(join(root, 'page', 'sub', 'app.js'), 'export {};\n');
    writeFileSync(join(root, 'page', 'secret.js'), 'not listed');
    const app = Fastify();
    registerWebAssets(app, { '/page': 'page/index.html', '/page/assets/sub/app.js': 'page/sub/app.js' }, {}, root);
    const page = await app.inject({ method: 'GET', url: '/page?x=1' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.headers['cache-control']).toBe('no-store');
    expect(page.headers['content-security-policy']).toContain("default-src 'none'");
    expect(page.headers.etag).toBeUndefined();
    const script = await app.inject({ method: 'GET', url: '/page/assets/sub/app.js' });
    expect([script.statusCode, script.headers['content-type'], script.body]).toEqual([
      200,
      'text/javascript; charset=utf-8',
      'export {};\n',
    ]);
    for (const [method, url] of [
      ['HEAD', '/page'],
      ['POST', '/page'],
      ['GET', '/page/assets/secret.js'],
      ['GET', '/page/assets/sub/'],
      ['GET', '/page/assets/sub/../app.js'],
      ['GET', '/page/assets/sub/%2e%2e/../secret.js'],
    ] as const) {
      expect({ method, url, status: (await app.inject({ method, url })).statusCode }).toEqual({ method, url, status: 404 });
    }
    await app.close();
  });
});
