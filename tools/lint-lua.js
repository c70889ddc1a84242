#!/usr/bin/env node
// `npm run lint:lua`: luacheck (.luacheckrc) over every Redis script in src/store/redis/lua/, each checked as Redis
// runs it (src/store/redis/lua-source.ts puts its includes in place), so a helper's locals are seen where they are
// used. Warnings are reported at the line of the file they come from, and any warning fails the run, as does a helper no script includes (it would be checked nowhere) and a
// missing luacheck: `apt-get install lua-check` (.ci/run installs it). Reads the store's modules from dist/: the
// build runs first (`npm test` does so).
'use strict';

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.join(__dirname, '..');
const LUA_DIR = path.join(ROOT, 'src', 'store', 'redis', 'lua');
const SHOWN_DIR = path.relative(ROOT, LUA_DIR);

let luaSource;
try {
  luaSource = require(path.join(ROOT, 'dist', 'store', 'redis', 'lua-source.js'));
} catch (error) {
  process.stderr.write(`lint-lua: cannot load the store's modules from dist/ (run \`npm run build\` first): ${error.message}\n`);
  process.exit(1);
}

const scripts = fs
  .readdirSync(LUA_DIR)
  .filter((name) => name.endsWith('.lua'))
  .sort();
// Helpers shared by scripts (lib/) and the parts of the authorize script (authorize/): each must be checked where it is included.
const helpers = ['lib', 'authorize'].flatMap((dir) =>
  fs
    .readdirSync(path.join(LUA_DIR, dir))
    .filter((name) => name.endsWith('.lua'))
    .map((name) => `${dir}/${name}`),
);
const included = new Set();
let failed = false;

/** luacheck over one script's text; `where(line)` names the file and line a reported line comes from. */
function check(name, text, where) {
  const run = spawnSync('luacheck', ['--formatter', 'plain', '--codes', '--no-color', '--filename', name, '-'], {
    cwd: ROOT,
    input: text,
    encoding: 'utf8',
  });
  if (run.error) {
    process.stderr.write(
      `lint-lua: cannot run luacheck (${run.error.message}): install it with \`apt-get install -y lua-check\` (Debian's package)\n`,
    );
    process.exit(1);
  }
  // luacheck: 0 clean, 1 warnings, 2 syntax errors, more for its own failures.
  if (run.status !== 0) {
    failed = true;
    const lines = `${run.stdout}${run.stderr}`.split('\n').filter((line) => line !== '');
    for (const line of lines) {
      const at = /^[^:]+:(\d+):(\d+): (.*)$/.exec(line);
      process.stdout.write(at ? `${where(Number(at[1]))}:${at[2]}: ${at[3]} (in ${name})\n` : `${name}: ${line}\n`);
    }
    if (lines.length === 0) process.stdout.write(`${name}: luacheck exited ${run.status}\n`);
  }
}

for (const script of scripts) {
  const { text, origins } = luaSource.composeLua(script, LUA_DIR);
  for (const origin of origins) included.add(origin.file);
  check(script, text, (line) => `${SHOWN_DIR}/${origins[line - 1].file}:${origins[line - 1].line}`);
}
for (const helper of helpers) {
  if (!included.has(helper)) {
    failed = true;
    process.stdout.write(`${SHOWN_DIR}/${helper}: included by no script, so checked nowhere\n`);
  }
}
if (failed) process.exit(1);
process.stdout.write(`luacheck: ${scripts.length} scripts (${helpers.length} helpers included), without a warning\n`);
