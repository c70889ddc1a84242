import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { ensureBuiltCli } from '../support/built-cli';

/**
 * The Check path's objects keep one hidden class each once V8 optimizes the code that builds them. On Node 20
 * (V8 11.3), an object literal that starts with a spread and then has more members gets a new map every time in
 * optimized code; with the authorize request built that way, each Check promoted ~190 bytes to old space, which is
 * what filled it between mark-compacts (docs/design/performance-studies.md, "The mark-compacts' source"). The probe runs the built code under
 * --allow-natives-syntax and compares the maps of the last two objects built by each path.
 */
describe('Check path objects keep one hidden class in optimized code', () => {
  it('the authorize request, every decision kind and every parsed authorize reply', () => {
    const dist = dirname(dirname(ensureBuiltCli()));
    const output = execFileSync(
      process.execPath,
      ['--allow-natives-syntax', join(__dirname, '..', 'support', 'hidden-class-probe.js'), dist],
      {
        encoding: 'utf8',
        timeout: 60_000,
      },
    );
    const report = JSON.parse(output) as Record<string, boolean>;
    expect(Object.keys(report)).toEqual(
      expect.arrayContaining(['decide → authorize request (allow)', 'decision (allow)', 'authorize reply (rate_limited).hit']),
    );
    const newMapEachTime = Object.entries(report)
      .filter(([, same]) => !same)
      .map(([label]) => label);
    expect(newMapEachTime).toEqual([]);
  });
});
