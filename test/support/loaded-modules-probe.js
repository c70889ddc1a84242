// Preloaded by test/integration/cli-entry.test.ts as `node --require loaded-modules-probe.js dist/cli/main.js …`.
// When the process exits, writes one line to stderr: `loaded-modules: ` and a JSON array of every file that
// require() loaded (require.cache), so a test can say which modules a command needed.
'use strict';

process.on('exit', () => {
  process.stderr.write(`loaded-modules: ${JSON.stringify(Object.keys(require.cache))}\n`);
});
