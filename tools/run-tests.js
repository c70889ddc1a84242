#!/usr/bin/env node
// `npm test`: the stages in order, each one's time printed as it ends and all of them at the end. A stage that fails
// stops the run with its exit code. Arguments go to jest (`npm test -- test/unit` runs only those suites).
//
//   build      src/ → dist/ (tsc -b: what changed only) and the dashboards' files to dist/web/
//   typecheck  test/ and src/web/ (tsc -b; src/ was checked by the build, through the project reference)
//   eslint     with --cache: only files changed since the last run are linted again (a fresh clone lints all)
//   prettier   with --cache, likewise
//   luacheck   the Redis scripts (tools/lint-lua.js): any warning fails, and so does a missing luacheck
//   jest       the suites, two workers (jest.config.js)
'use strict';

const { spawnSync } = require('node:child_process');
const path = require('node:path');

const ROOT = path.join(__dirname, '..');

const STAGES = [
  ['build', 'npm', ['run', 'build', '--silent']],
  ['typecheck', 'npm', ['run', 'typecheck', '--silent']],
  ['eslint', 'npm', ['run', 'lint:eslint', '--silent']],
  ['prettier', 'npm', ['run', 'lint:prettier', '--silent']],
  ['luacheck', 'npm', ['run', 'lint:lua', '--silent']],
  ['jest', process.execPath, [require.resolve('jest/bin/jest'), '--ci', ...process.argv.slice(2)]],
];

const seconds = (ms) => `${(ms / 1000).toFixed(1)} s`;
const times = [];

function summary() {
  const width = Math.max(...times.map(([name]) => name.length));
  const lines = times.map(([name, ms]) => `  ${name.padEnd(width)}  ${seconds(ms).padStart(8)}`);
  const total = times.reduce((sum, [, ms]) => sum + ms, 0);
  return ['npm test stage times:', ...lines, `  ${'total'.padEnd(width)}  ${seconds(total).padStart(8)}`].join('\n');
}

for (const [name, command, args] of STAGES) {
  process.stdout.write(`\n▶ ${name}\n`);
  const started = performance.now();
  const run = spawnSync(command, args, { cwd: ROOT, stdio: 'inherit' });
  const ms = performance.now() - started;
  times.push([name, ms]);
  const failed = run.status !== 0;
  process.stdout.write(`■ ${name}: ${failed ? 'FAILED after' : 'done in'} ${seconds(ms)}\n`);
  if (failed) {
    process.stdout.write(`\n${summary()}\n`);
    process.exit(run.status ?? 1);
  }
}
process.stdout.write(`\n${summary()}\n`);
