// The built service (dist/, as `gateway-authz serve` runs it) in a process of
// its own, for the customer sign-in tests: openid-client is an ES module,
// which jest's CommonJS module registry cannot load, so the service cannot run
// inside a jest worker. Settings come from the environment, as in production;
// what a test controls comes through the IPC channel and two variables:
// - TEST_MEMBERSHIPS: JSON, subject → memberships (an identity not listed has
//   none), with a probe API instead of the customer API; when unset, the
//   service's own members (in the store) and customer API, as in production;
// - the clock: the service runs on Date.now() plus an offset that the test
//   moves with the message {advanceClockMs}, answered {clockAdvancedMs}.
// It also mounts a probe customer API (GET and POST /api/probe), so the tests
// can show what reaches an API route behind the server's checks.
import { startApp } from '../../dist/app.js';
import { createLogger } from '../../dist/platform/logger.js';
import { loadSettings } from '../../dist/platform/settings.js';

const result = loadSettings(process.env);
if (!result.ok) {
  process.stderr.write(`invalid configuration:\n${result.problems.join('\n')}\n`);
  process.exit(2);
}
const { settings } = result;

let offsetMs = 0;
const clock = { now: () => Date.now() + offsetMs };
const memberships = process.env.TEST_MEMBERSHIPS === undefined ? undefined : JSON.parse(process.env.TEST_MEMBERSHIPS);

const app = await startApp(settings, {
  logger: createLogger(settings.logLevel),
  clock,
  ...(memberships
    ? {
        customer: {
          memberships: { membershipsOf: async (identity) => memberships[identity.subject] ?? [] },
          registerApi: (server) => {
            server.get('/api/probe', async (request) => ({ subject: request.customerIdentity?.subject ?? null }));
            server.post('/api/probe', async (request) => ({ changed: true, subject: request.customerIdentity?.subject ?? null }));
          },
        },
      }
    : {}),
});

process.on('message', (message) => {
  if (typeof message?.advanceClockMs === 'number') {
    offsetMs += message.advanceClockMs;
    process.send?.({ clockAdvancedMs: offsetMs });
  }
});
process.once('SIGTERM', () => {
  app.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
});
