#!/usr/bin/env node
// `npm test`: the stages, each one's time printed as it ends and all of them at the end. A phase in which a stage
// fails stops the run, once its other stages have ended, with that exit code. Arguments go to jest
// (`npm test -- test/unit` runs only those suites).
//
//   build      src/ → dist/ (tsc -b: what changed only) and the dashboards' files to dist/web/
//   then, side by side (each reads only what the build wrote; docs/development/workflow.md has what it saves):
//     eslint     with --cache: only files changed since the last run are linted again (a fresh clone lints all)
//     typecheck  test/ and src/web/ (tsc -b; src/ was checked by the build, through the project reference)
//     prettier   with --cache, likewise
//     luacheck   the Redis scripts (tools/lint-lua.js): any warning fails, and so does a missing luacheck
//   jest       the suites, three workers (jest.config.js); alone, so the browser and timing suites get what the
//              machine has
'use strict';

const { spawn } = require('node:child_process');
const path = require('node:path');

const ROOT = path.join(__dirname, '..');

/** Each phase runs after the one before it has passed; the stages of a phase run at the same time. */
const PHASES = [
  [['build', 'npm', ['run', 'build', '--silent']]],
  [
    ['eslint', 'npm', ['run', 'lint:eslint', '--silent']],
    ['typecheck', 'npm', ['run', 'typecheck', '--silent']],
    ['prettier', 'npm', ['run', 'lint:prettier', '--silent']],
    ['luacheck', 'npm', ['run', 'lint:lua', '--silent']],
  ],
  [['jest', process.execPath, [require.resolve('jest/bin/jest'), '--ci', ...process.argv.slice(2)]]],
];

const seconds = (ms) => `${(ms / 1000).toFixed(1)} s`;
const times = [];
const startedAt = performance.now();

function summary() {
  const width = Math.max('total (wall clock)'.length, ...times.map(([name]) => name.length));
  const lines = times.map(([name, ms]) => `  ${name.padEnd(width)}  ${seconds(ms).padStart(8)}`);
  const total = `  ${'total (wall clock)'.padEnd(width)}  ${seconds(performance.now() - startedAt).padStart(8)}`;
  return ['npm test stage times (build; then eslint, typecheck, prettier and luacheck side by side; then jest):', ...lines, total].join(
    '\n',
  );
}

/**
 * Runs one stage. Alone in its phase it writes straight to the terminal (jest's progress as it comes); beside others,
 * its output is held and written whole when it ends, so the stages' lines do not interleave.
 */
function runStage([name, command, args], alone) {
  return new Promise((resolve) => {
    const started = performance.now();
    if (alone) process.stdout.write(`\n▶ ${name}\n`);
    const child = spawn(command, args, { cwd: ROOT, stdio: alone ? 'inherit' : ['ignore', 'pipe', 'pipe'] });
    const output = [];
    child.stdout?.on('data', (chunk) => output.push(chunk));
    child.stderr?.on('data', (chunk) => output.push(chunk));
    let finished = false;
    const finish = (status) => {
      if (finished) return; // 'error' can come before 'close'
      finished = true;
      const ms = performance.now() - started;
      times.push([name, ms]);
      if (!alone) process.stdout.write(`\n▶ ${name}\n${Buffer.concat(output).toString()}`);
      process.stdout.write(`■ ${name}: ${status === 0 ? 'done in' : 'FAILED after'} ${seconds(ms)}\n`);
      resolve(status);
    };
    child.on('error', (error) => {
      output.push(Buffer.from(`${error.message}\n`));
      finish(1);
    });
    child.on('close', (code, signal) => finish(code ?? (signal ? 1 : 0)));
  });
}

async function main() {
  for (const phase of PHASES) {
    const statuses = await Promise.all(phase.map((stage) => runStage(stage, phase.length === 1)));
    const failed = statuses.find((status) => status !== 0);
    if (failed !== undefined) {
      process.stdout.write(`\n${summary()}\n`);
      process.exit(failed);
    }
  }
  process.stdout.write(`\n${summary()}\n`);
}

void main();
