#!/usr/bin/env node
// `npm run lint:lua`: luacheck (.luacheckrc) over every Redis script in src/store/redis/lua/, each checked as Redis
// runs it (src/store/redis/lua-source.ts puts its includes in place), so a helper's locals are seen where they are
// used. Warnings are reported at the line of the file they come from, and any warning fails the run, as does a
// helper no script includes (it would be checked nowhere) and a missing luacheck: `apt-get install lua-check`
// (.ci/run installs it). Reads lua-source.js from dist/: the build runs first (`npm test` does so).
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
  process.stderr.write(`lint-lua: cannot load dist/store/redis/lua-source.js (run \`npm run build\` first): ${error.message}\n`);
  process.exit(1);
}

const scripts = fs
  .readdirSync(LUA_DIR)
  .filter((name) => name.endsWith('.lua'))
  .sort();
const helpers = fs
  .readdirSync(path.join(LUA_DIR, 'lib'))
  .filter((name) => name.endsWith('.lua'))
  .map((name) => `lib/${name}`);
const included = new Set();
let failed = false;

for (const script of scripts) {
  const { text, origins } = luaSource.composeLua(script, LUA_DIR);
  for (const origin of origins) included.add(origin.file);
  const run = spawnSync('luacheck', ['--formatter', 'plain', '--codes', '--no-color', '--filename', script, '-'], {
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
      const origin = at ? origins[Number(at[1]) - 1] : undefined;
      process.stdout.write(
        origin ? `${SHOWN_DIR}/${origin.file}:${origin.line}:${at[2]}: ${at[3]} (in ${script})\n` : `${script}: ${line}\n`,
      );
    }
    if (lines.length === 0) process.stdout.write(`${script}: luacheck exited ${run.status}\n`);
  }
}
for (const helper of helpers) {
  if (!included.has(helper)) {
    failed = true;
    process.stdout.write(`${SHOWN_DIR}/${helper}: included by no script, so checked nowhere\n`);
  }
}
if (failed) process.exit(1);
process.stdout.write(`luacheck: ${scripts.length} scripts (${helpers.length} helpers included) without a warning\n`);
