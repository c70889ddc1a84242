import * as path from 'node:path';

/**
 * The service's modules from a build directory chosen at run time (`--dist`, e.g. a copy of an earlier dist/), so one
 * change is measured before and after on the same traffic. `files` are paths inside the build (`'metrics/metrics.js'`);
 * M is the caller's union of their exports, as `typeof import(...)` of the sources.
 */
export function loadBuildModules<M>(dist: string, files: readonly string[]): M {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- the build directory is chosen at run time; import() would be a require() in this CommonJS build anyway, only asynchronous
  const modules = files.map((file) => require(path.join(dist, file)) as Partial<M>);
  return Object.assign({}, ...modules) as M;
}
