#!/usr/bin/env node
// `npm run build` only if a source is newer than the last build: what `npm start` and the tests' built CLI run first.
//
// It decides from file times alone, without loading TypeScript (a second or more by itself; `tsc -b` on a tree with
// nothing to do costs that much), which is what makes `npm start` on a built tree quick. Stale means: no
// dist/.tsbuildinfo (tsc -b's record of the last build, tsconfig.build.json), no dist/web/ (`npm run build:web`) or no
// dist/store/redis/lua/ (`npm run build:lua`), or a file below src/ or a build config newer than the oldest of the
// three. When stale, `npm run build` runs, and tsc -b then compiles only what changed.
'use strict';

const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.join(__dirname, '..');
const BUILD_RECORD = path.join(ROOT, 'dist', '.tsbuildinfo');
const WEB_OUTPUT = path.join(ROOT, 'dist', 'web');
const LUA_OUTPUT = path.join(ROOT, 'dist', 'store', 'redis', 'lua');
const BUILD_CONFIGS = ['tsconfig.json', 'tsconfig.build.json', 'package.json'].map((file) => path.join(ROOT, file));

function mtimeOrZero(file) {
  try {
    return fs.statSync(file).mtimeMs;
  } catch {
    return 0;
  }
}

function newestBelow(dir) {
  let newest = mtimeOrZero(dir);
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const file = path.join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestBelow(file) : mtimeOrZero(file));
  }
  return newest;
}

function isStale() {
  const built = Math.min(mtimeOrZero(BUILD_RECORD), mtimeOrZero(WEB_OUTPUT), mtimeOrZero(LUA_OUTPUT));
  if (built === 0) return true;
  return Math.max(newestBelow(path.join(ROOT, 'src')), ...BUILD_CONFIGS.map(mtimeOrZero)) > built;
}

if (isStale()) {
  try {
    execFileSync('npm', ['run', 'build', '--silent'], { cwd: ROOT, stdio: 'inherit' });
  } catch {
    // The build has printed its errors.
    process.exit(1);
  }
}
