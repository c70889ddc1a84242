import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

import * as ts from 'typescript';

/**
 * The folder rules of docs/development/layout.md, read from the source itself: every import, export-from, require
 * and dynamic import of every .ts file under src/, resolved to the file it names. A failure lists each offending
 * import as `file → import`, with the rule it breaks.
 */

const SRC = resolve(__dirname, '..', '..', '..', 'src');

/** The HTTP/2 and gRPC server: written against Node and npm packages only, so it can be read, tested and replaced alone. */
const TRANSPORT = 'transport';
/** Settings, logging, metrics, clock, health: what every feature may use, so it may use no feature. */
const PLATFORM = 'platform';
/** The store adapters (Redis, in-memory): they implement the ports; only the composition root chooses and builds one. */
const ADAPTERS = 'store';

/**
 * The composition root: the one place that builds the adapters and hands them, as ports, to the features. app.ts
 * wires the service; the CLI's `serve` starts it (and the cluster's workers).
 */
const COMPOSITION_ROOT = new Set(['app.ts', 'cli/commands/serve.ts']);

/**
 * Platform files that import features, each with the folders it may reach and why. Settings and metrics are the
 * service's two registries: the one validated settings object and the one metrics registry name every feature's
 * part, so turning them around (each feature registering its own) would be a redesign, not a move.
 */
const PLATFORM_EXCEPTIONS: Record<string, { folders: readonly string[]; reason: string }> = {
  'platform/settings.ts': {
    folders: ['accounts', 'admin', 'check', 'keys'],
    reason: "validates each feature's settings into that feature's own types, with its defaults and parsers",
  },
  'platform/config-file.ts': {
    folders: ['accounts', 'check', 'metering'],
    reason: "the config file's schema checks routes, limits and prices with the features' own rules",
  },
  'platform/operator-sign-in-settings.ts': {
    folders: ['operators'],
    reason: "validates the operator sign-in's role mapping against the operators' own roles",
  },
  'platform/metrics.ts': {
    folders: ['admin', 'check', 'metering'],
    reason: "the one Prometheus registry: its labels and observers take the features' outcome types",
  },
};

/** The HTTP APIs and the CLI: callers of the features, never called by them. */
const HTTP_APIS = ['admin', 'customer', 'http', 'cli'];
/** Decisions made from values alone, so they are tested without a server, a store or a clock of their own. */
const PURE_CORES = ['check/pipeline', 'accounts/limits'];

interface SourceImport {
  /** Importing file, relative to src/. */
  file: string;
  /** The specifier as written. */
  specifier: string;
  /** The file it resolves to, relative to src/; undefined for node built-ins and npm packages. */
  target: string | undefined;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [path] : [];
  });
}

function resolveRelative(fromFile: string, specifier: string): string | undefined {
  const base = resolve(dirname(fromFile), specifier);
  const candidate = [`${base}.ts`, join(base, 'index.ts'), base].find((path) => existsSync(path) && statSync(path).isFile());
  return candidate === undefined ? undefined : relative(SRC, candidate);
}

function importsOf(path: string): SourceImport[] {
  // readImportFiles and detectJavaScriptImports: import, export-from, import type, require() and import().
  const { importedFiles } = ts.preProcessFile(readFileSync(path, 'utf8'), true, true);
  return importedFiles.map(({ fileName: specifier }) => ({
    file: relative(SRC, path),
    specifier,
    target: specifier.startsWith('.') ? (resolveRelative(path, specifier) ?? `unresolved:${specifier}`) : undefined,
  }));
}

const topFolder = (file: string): string => (file.includes('/') ? file.slice(0, file.indexOf('/')) : '');
const within = (file: string, folder: string): boolean => file.startsWith(`${folder}/`);
const shown = (imp: SourceImport): string => `src/${imp.file} → '${imp.specifier}' (src/${imp.target})`;

const ALL_IMPORTS = sourceFiles(SRC).flatMap(importsOf);
const APP_IMPORTS = ALL_IMPORTS.filter((imp): imp is SourceImport & { target: string } => imp.target !== undefined);

describe('import rules of src/ (docs/development/layout.md)', () => {
  it('reads the real tree: the named folders exist and every relative import resolves to a file', () => {
    for (const folder of [TRANSPORT, PLATFORM, ADAPTERS]) expect(statSync(join(SRC, folder)).isDirectory()).toBe(true);
    for (const file of [...COMPOSITION_ROOT, ...Object.keys(PLATFORM_EXCEPTIONS)]) expect(existsSync(join(SRC, file))).toBe(true);
    expect(APP_IMPORTS.filter((imp) => imp.target.startsWith('unresolved:')).map(shown)).toEqual([]);
    // Enough to be the whole tree, not an empty scan that passes every rule.
    expect(APP_IMPORTS.filter((imp) => within(imp.file, TRANSPORT)).length).toBeGreaterThan(10);
    expect(APP_IMPORTS.length).toBeGreaterThan(500);
  });

  it('transport imports nothing of the app (Node built-ins and npm packages only)', () => {
    const violations = APP_IMPORTS.filter((imp) => within(imp.file, TRANSPORT) && !within(imp.target, TRANSPORT));
    expect(violations.map(shown)).toEqual([]);
  });

  it('only the composition root imports the store adapters; features, ports and platform use the ports', () => {
    const violations = APP_IMPORTS.filter(
      (imp) => within(imp.target, ADAPTERS) && !within(imp.file, ADAPTERS) && !COMPOSITION_ROOT.has(imp.file),
    );
    expect(violations.map(shown)).toEqual([]);
  });

  it('platform imports no feature (only platform and transport), but for the listed exceptions', () => {
    const violations = APP_IMPORTS.filter((imp) => {
      if (!within(imp.file, PLATFORM) || within(imp.target, PLATFORM) || within(imp.target, TRANSPORT)) return false;
      return !PLATFORM_EXCEPTIONS[imp.file]?.folders.includes(topFolder(imp.target));
    });
    expect(violations.map(shown)).toEqual([]);
  });

  it('the admin API and the customer dashboard are separate: neither imports the other', () => {
    const violations = APP_IMPORTS.filter(
      (imp) =>
        (within(imp.file, 'admin') && within(imp.target, 'customer')) || (within(imp.file, 'customer') && within(imp.target, 'admin')),
    );
    expect(violations.map(shown)).toEqual([]);
  });

  it('keys/ and accounts/ (the actions both APIs call) import neither HTTP API nor the CLI', () => {
    const violations = APP_IMPORTS.filter(
      (imp) => (within(imp.file, 'keys') || within(imp.file, 'accounts')) && HTTP_APIS.some((folder) => within(imp.target, folder)),
    );
    expect(violations.map(shown)).toEqual([]);
  });

  it('the pure cores (the decision pipeline, the limits) import no platform, transport or HTTP API: settings reach them as values', () => {
    const violations = APP_IMPORTS.filter(
      (imp) =>
        PURE_CORES.some((folder) => within(imp.file, folder)) &&
        [PLATFORM, TRANSPORT, ...HTTP_APIS].some((folder) => within(imp.target, folder)),
    );
    expect(violations.map(shown)).toEqual([]);
  });

  it('lists no platform exception that the code no longer needs', () => {
    const unused = Object.entries(PLATFORM_EXCEPTIONS).flatMap(([file, { folders }]) =>
      folders
        .filter((folder) => !APP_IMPORTS.some((imp) => imp.file === file && topFolder(imp.target) === folder))
        .map((folder) => `${file} → ${folder}/`),
    );
    expect(unused).toEqual([]);
  });
});
