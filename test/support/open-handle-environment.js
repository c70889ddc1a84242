// The suites' test environment: Node's, plus a report of what a test file left open. A jest worker runs many files
// and must exit within half a second of the run's end, or jest kills it ("A worker process has failed to exit
// gracefully"); whatever keeps it alive (a timer, a socket, a server, a child process) was left by one of its files,
// and this names the file, after its own teardown, with the kinds of what it left.
'use strict';

const path = require('node:path');
const { TestEnvironment } = require('jest-environment-node');

/** Closing sockets and exiting children need a few turns of the loop to be gone: left after this, they stay. */
const SETTLE_MS = 200;

/** How many resources of each kind keep the event loop alive now (unref'd ones do not count). */
function activeResources() {
  const counts = new Map();
  for (const kind of process.getActiveResourcesInfo()) counts.set(kind, (counts.get(kind) ?? 0) + 1);
  return counts;
}

class OpenHandleReportingEnvironment extends TestEnvironment {
  constructor(config, context) {
    super(config, context);
    this.testFile = path.relative(config.globalConfig.rootDir, context.testPath);
    this.before = activeResources();
  }

  async teardown() {
    await super.teardown();
    await new Promise((resolve) => setTimeout(resolve, SETTLE_MS).unref());
    const left = [...activeResources()]
      .map(([kind, count]) => [kind, count - (this.before.get(kind) ?? 0)])
      // An Immediate runs on the loop's next turn and holds nothing open.
      .filter(([kind, count]) => count > 0 && kind !== 'Immediate')
      .map(([kind, count]) => `${count} ${kind}`);
    if (left.length > 0) process.stderr.write(`\nopen handles left by ${this.testFile}: ${left.join(', ')}\n`);
  }
}

module.exports = OpenHandleReportingEnvironment;
