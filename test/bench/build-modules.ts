import * as path from 'node:path';

/** What every in-process bench builds the Check path from: the logger, the metrics, the key cache, the last-used recorder, the settings. */
export type CheckPathModules = typeof import('../../src/platform/logger') &
  typeof import('../../src/platform/metrics') &
  typeof import('../../src/check/cached-key-index') &
  typeof import('../../src/keys/last-used-recorder') &
  typeof import('../../src/platform/settings');

const CHECK_PATH_FILES = [
  'platform/logger.js',
  'platform/metrics.js',
  'check/cached-key-index.js',
  'keys/last-used-recorder.js',
  'platform/settings.js',
];

/**
 * The service's modules from a build directory chosen at run time (`--dist`, e.g. a copy of an earlier dist/), so one
 * change is measured before and after on the same traffic: the Check path's modules, and the bench's own `files`
 * (paths inside the build, `'check/proto-loading.js'`). M is CheckPathModules and the exports of `files`, as
 * `typeof import(...)` of their sources.
 */
export function loadBuildModules<M extends CheckPathModules>(dist: string, files: readonly string[]): M {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- the build directory is chosen at run time; import() would be a require() in this CommonJS build anyway, only asynchronous
  const modules = [...files, ...CHECK_PATH_FILES].map((file) => require(path.join(dist, file)) as object);
  return Object.assign({}, ...modules) as M;
}
