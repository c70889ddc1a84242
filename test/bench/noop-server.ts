/**
 * The benchmark's baseline: the ceiling of the stack. The same grpc-js
 * server with the same options, the same proto loading (our proto/ copy via
 * src/grpc/proto-loading.ts, so requests are decoded into the same objects),
 * and a Check that answers allow without looking at the request. Run as a
 * child process: `node noop-server.js [--transport NAME]`; prints
 * `{"port":N}` when listening. A transport this build does not have is
 * refused with exit code 2 (UNKNOWN_TRANSPORT_EXIT), so the bench knows to
 * run without that no-op; each transport the service can ship adds its name.
 */
import * as grpc from '@grpc/grpc-js';
import { loadAuthorizationService } from '../../src/grpc/proto-loading';

const ALLOW = Object.freeze({ status: { code: 0, message: '' }, ok_response: {} });

const TRANSPORTS = ['grpc-js'] as const;
const UNKNOWN_TRANSPORT_EXIT = 2;

function main(): void {
  const at = process.argv.indexOf('--transport');
  const transport = at >= 0 ? process.argv[at + 1] : 'grpc-js';
  if (!(TRANSPORTS as readonly (string | undefined)[]).includes(transport)) {
    process.stderr.write(`noop server: unknown transport '${transport}' (this build has: ${TRANSPORTS.join(', ')})\n`);
    process.exit(UNKNOWN_TRANSPORT_EXIT);
  }
  const server = new grpc.Server({
    // Same options as src/grpc/authorization-server.ts.
    'grpc.keepalive_time_ms': 30_000,
    'grpc.keepalive_timeout_ms': 10_000,
    'grpc.keepalive_permit_without_calls': 1,
    'grpc.max_connection_age_ms': 300_000,
    'grpc.max_connection_age_grace_ms': 30_000,
    'grpc.enable_channelz': 0,
  });
  const { service } = loadAuthorizationService();
  server.addService(service, {
    Check: (_call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => callback(null, ALLOW),
  });
  server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, port) => {
    if (error) {
      process.stderr.write(`noop server: ${error.message}\n`);
      process.exit(1);
    }
    process.stdout.write(`${JSON.stringify({ port })}\n`);
  });
  const stop = () => server.tryShutdown(() => process.exit(0));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main();
