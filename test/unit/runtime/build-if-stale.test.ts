import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

/**
 * tools/build-if-stale.js, as `npm start` and the tests' built service run it, in a tree of its own whose `npm run
 * build` is a stand-in: it takes a while, empties and refills dist/ as the real build does, and records each run,
 * and any run that began while another was still going.
 */
const REPO = path.join(__dirname, '..', '..', '..');

const STAND_IN_BUILD = `
const fs = require('node:fs');
const runs = 'runs.log';
try {
  fs.mkdirSync('building');
} catch {
  fs.appendFileSync(runs, 'overlap\\n');
  process.exit(1);
}
fs.appendFileSync(runs, 'build\\n');
fs.rmSync('dist', { recursive: true, force: true });
Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 400);
fs.mkdirSync('dist/web', { recursive: true });
fs.mkdirSync('dist/store/redis/lua', { recursive: true });
fs.writeFileSync('dist/store/redis/lua/script.lua', 'return 1\\n');
fs.writeFileSync('dist/.tsbuildinfo', '{}');
fs.rmSync('building', { recursive: true });
`;

function standInTree(): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'build-if-stale-'));
  fs.mkdirSync(path.join(root, 'tools'));
  fs.copyFileSync(path.join(REPO, 'tools', 'build-if-stale.js'), path.join(root, 'tools', 'build-if-stale.js'));
  fs.writeFileSync(
    path.join(root, 'package.json'),
    JSON.stringify({ name: 'stand-in', private: true, scripts: { build: 'node build.js' } }),
  );
  fs.writeFileSync(path.join(root, 'build.js'), STAND_IN_BUILD);
  fs.mkdirSync(path.join(root, 'src'));
  fs.writeFileSync(path.join(root, 'src', 'main.ts'), 'export {};\n');
  return root;
}

function buildIfStale(root: string): Promise<number | null> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(root, 'tools', 'build-if-stale.js')], { cwd: root, stdio: 'ignore' });
    child.on('error', reject);
    child.on('close', resolve);
  });
}

const runsIn = (root: string) => fs.readFileSync(path.join(root, 'runs.log'), 'utf8').trim().split('\n');

describe('tools/build-if-stale.js', () => {
  let root: string;
  beforeEach(() => {
    root = standInTree();
  });
  afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

  it('builds once when three callers find the tree stale at the same time, and every caller then has a whole build', async () => {
    const codes = await Promise.all([buildIfStale(root), buildIfStale(root), buildIfStale(root)]);
    expect(codes).toEqual([0, 0, 0]);
    expect(runsIn(root)).toEqual(['build']);
    expect(fs.readFileSync(path.join(root, 'dist', 'store', 'redis', 'lua', 'script.lua'), 'utf8')).toBe('return 1\n');
    expect(fs.existsSync(path.join(root, '.cache', 'build.lock'))).toBe(false);
  });

  it('builds again once a source is newer than the build, and not when nothing changed', async () => {
    expect(await buildIfStale(root)).toBe(0);
    expect(await buildIfStale(root)).toBe(0);
    expect(runsIn(root)).toEqual(['build']);
    const later = new Date(Date.now() + 5_000);
    fs.utimesSync(path.join(root, 'src', 'main.ts'), later, later);
    expect(await buildIfStale(root)).toBe(0);
    expect(runsIn(root)).toEqual(['build', 'build']);
  });

  it('takes over a lock left by a build that was killed long ago', async () => {
    const lock = path.join(root, '.cache', 'build.lock');
    fs.mkdirSync(lock, { recursive: true });
    const longAgo = new Date(Date.now() - 60 * 60_000);
    fs.utimesSync(lock, longAgo, longAgo);
    expect(await buildIfStale(root)).toBe(0);
    expect(runsIn(root)).toEqual(['build']);
    expect(fs.existsSync(lock)).toBe(false);
  });
});
