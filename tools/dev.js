#!/usr/bin/env node
// `npm run dev`: the service from dist/, rebuilt and restarted on every change to src/.
//
// `tsc -b --watch` compiles what changed in src/ into dist/ (the checks of `npm run build`, errors printed as they
// come); a change below src/web/ is copied to dist/web/ (`npm run build:web`); `node --watch-path=dist` restarts the
// server whenever dist/ changes. Settings come from the environment, as for `npm start`.
'use strict';

const { execFileSync, spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.join(__dirname, '..');
/** Editors write a file in several steps; one copy after the last of them. */
const WEB_COPY_DELAY_MS = 200;

execFileSync(process.execPath, [path.join(__dirname, 'build-if-stale.js')], { cwd: ROOT, stdio: 'inherit' });

const children = [
  spawn(process.execPath, [require.resolve('typescript/bin/tsc'), '-b', 'tsconfig.build.json', '--watch', '--preserveWatchOutput'], {
    cwd: ROOT,
    stdio: 'inherit',
  }),
  spawn(
    process.execPath,
    ['--watch-path=dist', '--heap-growing-percent=75', '--no-memory-reducer', '--max-semi-space-size=8', 'dist/cli/main.js', 'serve'],
    // The malloc arenas the Dockerfile sets (docs/operations/runtime.md); one already set wins.
    { cwd: ROOT, stdio: 'inherit', env: { MALLOC_ARENA_MAX: '2', ...process.env } },
  ),
];

let webCopy;
fs.watch(path.join(ROOT, 'src', 'web'), { recursive: true }, () => {
  clearTimeout(webCopy);
  webCopy = setTimeout(() => {
    try {
      execFileSync('npm', ['run', 'build:web', '--silent'], { cwd: ROOT, stdio: 'inherit' });
    } catch {
      // npm has printed why; the next change tries again.
    }
  }, WEB_COPY_DELAY_MS);
});

function stop(signal) {
  for (const child of children) child.kill(signal);
  process.exit(0);
}
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
for (const child of children) child.on('exit', (code) => code !== null && code !== 0 && stop('SIGTERM'));
