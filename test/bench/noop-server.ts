/**
 * The benchmark's baselines: a Check server that answers allow without
 * looking at the request, on one of two transports. Run as a child process;
 * prints `{"port":N}` when listening.
 *
 *   node noop-server.js                   grpc-js (the default): the same server options the service had on
 *                                         grpc-js, proto loading from our proto/ copy (src/check/proto-loading.ts),
 *                                         requests decoded by protobufjs into the same objects.
 *   node noop-server.js --transport h2    the transport the service ships (src/transport/): its settings,
 *                                         the service's request decoder and response encoder, no decision.
 */
import * as grpc from '@grpc/grpc-js';
import { parseArgs } from 'node:util';
import { checkMethod } from '../../src/check/authorization-server';
import { loadAuthorizationService } from '../../src/check/proto-loading';
import { GrpcServer } from '../../src/transport/grpc-server';
import { createLogger } from '../../src/platform/logger';
import type { CheckResponse } from '../../src/check/responses/check-response';

const ALLOW = Object.freeze({ status: { code: 0, message: '' }, ok_response: {} });
/** The shape the service's encoder writes (all lists present), so the no-op takes the same fast path. */
const ALLOW_RESPONSE: CheckResponse = {
  status: { code: 0, message: '' },
  ok_response: { headers: [], headers_to_remove: [], response_headers_to_add: [], query_parameters_to_remove: [] },
};

function startGrpcJs(stop: (close: () => Promise<void>) => void): void {
  const server = new grpc.Server({
    // The options the service used on grpc-js.
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
  stop(() => new Promise((resolve) => server.tryShutdown(() => resolve())));
}

function startH2(stop: (close: () => Promise<void>) => void): void {
  const logger = createLogger('warn');
  const server = new GrpcServer({ host: '127.0.0.1', port: 0, maxConnectionAgeMs: 300_000 }, logger);
  server.addMethod(
    '/envoy.service.auth.v3.Authorization/Check',
    checkMethod((_request, _deadlineMs, reply) => reply(null, ALLOW_RESPONSE), logger),
  );
  server.listen().then(
    (port) => process.stdout.write(`${JSON.stringify({ port })}\n`),
    (error: Error) => {
      process.stderr.write(`noop server: ${error.message}\n`);
      process.exit(1);
    },
  );
  stop(() => server.close());
}

function main(): void {
  const { values } = parseArgs({ options: { transport: { type: 'string', default: 'grpc-js' } } });
  const onStop = (close: () => Promise<void>) => {
    const stop = () => void close().then(() => process.exit(0));
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
  };
  if (values.transport === 'h2') startH2(onStop);
  else if (values.transport === 'grpc-js') startGrpcJs(onStop);
  else {
    process.stderr.write(`noop server: --transport is grpc-js or h2, not ${values.transport}\n`);
    process.exit(2);
  }
}

main();
