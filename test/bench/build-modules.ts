import * as path from 'node:path';

/** What every in-process bench builds the Check path from: the logger, the metrics, the key cache, the last-used recorder, the settings. */
export type CheckPathModules = typeof import('../../src/logging/logger') &
  typeof import('../../src/metrics/metrics') &
  typeof import('../../src/store/cached-key-index') &
  typeof import('../../src/store/last-used-recorder') &
  typeof import('../../src/settings/settings');

const CHECK_PATH_FILES = [
  'logging/logger.js',
  'metrics/metrics.js',
  'store/cached-key-index.js',
  'store/last-used-recorder.js',
  'settings/settings.js',
];

/**
 * The service's modules from a build directory chosen at run time (`--dist`, e.g. a copy of an earlier dist/), so one
 * change is measured before and after on the same traffic: the Check path's modules, and the bench's own `files`
 * (paths inside the build, `'grpc/proto-loading.js'`). M is CheckPathModules and the exports of `files`, as
 * `typeof import(...)` of their sources.
 */
export function loadBuildModules<M extends CheckPathModules>(dist: string, files: readonly string[]): M {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- the build directory is chosen at run time; import() would be a require() in this CommonJS build anyway, only asynchronous
  const modules = [...files, ...CHECK_PATH_FILES].map((file) => require(path.join(dist, file)) as object);
  return Object.assign({}, ...modules) as M;
}
