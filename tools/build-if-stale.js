#!/usr/bin/env node
// `npm run build` only if a source is newer than the last build: what `npm start` and the tests' built CLI run first.
//
// It decides from file times alone, without loading TypeScript (a second or more by itself; `tsc -b` on a tree with
// nothing to do costs that much), which is what makes `npm start` on a built tree quick. Stale means: no
// dist/.tsbuildinfo (tsc -b's record of the last build, tsconfig.build.json), no dist/web/ (`npm run build:web`) or no
// dist/store/redis/lua/ (`npm run build:lua`), or a file below src/ or a build config newer than the oldest of the
// three. When stale, `npm run build` runs, and tsc -b then compiles only what changed; one caller at a time.
'use strict';

const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.join(__dirname, '..');
const BUILD_RECORD = path.join(ROOT, 'dist', '.tsbuildinfo');
const WEB_OUTPUT = path.join(ROOT, 'dist', 'web');
const LUA_OUTPUT = path.join(ROOT, 'dist', 'store', 'redis', 'lua');
const BUILD_CONFIGS = ['tsconfig.json', 'tsconfig.build.json', 'package.json'].map((file) => path.join(ROOT, file));
const BUILD_LOCK = path.join(ROOT, '.cache', 'build.lock');
/** Far longer than a whole build from nothing takes on a loaded 2-core machine (about a minute). */
const ABANDONED_LOCK_MS = 10 * 60_000;

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

/** Blocks this process for `ms` (it has nothing else to do while another one builds). */
function sleep(ms) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/**
 * Runs `build` holding the build lock (a directory: mkdir either makes it or fails, atomically), so that callers at
 * the same time (jest's workers each start the built service) build once, one after another, instead of racing in
 * dist/ (one build emptying dist/store/redis/lua while another copies into it). A caller that finds the lock held
 * waits for it, then decides again: the tree the other one built is usually fresh. A lock older than any build
 * takes was left by a build that was killed, and is taken over.
 */
function withBuildLock(build) {
  fs.mkdirSync(path.dirname(BUILD_LOCK), { recursive: true });
  for (;;) {
    try {
      fs.mkdirSync(BUILD_LOCK);
      break;
    } catch (error) {
      if (error.code !== 'EEXIST') throw error;
      const heldSince = mtimeOrZero(BUILD_LOCK);
      if (heldSince !== 0 && Date.now() - heldSince > ABANDONED_LOCK_MS) fs.rmSync(BUILD_LOCK, { recursive: true, force: true });
      else sleep(100);
    }
  }
  try {
    build();
  } finally {
    fs.rmSync(BUILD_LOCK, { recursive: true, force: true });
  }
}

if (isStale()) {
  withBuildLock(() => {
    if (!isStale()) return;
    try {
      execFileSync('npm', ['run', 'build', '--silent'], { cwd: ROOT, stdio: 'inherit' });
    } catch {
      // The build has printed its errors.
      process.exitCode = 1;
    }
  });
}
