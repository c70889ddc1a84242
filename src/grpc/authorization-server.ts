import * as grpc from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import { performance } from 'node:perf_hooks';
import type { Clock } from '../domain/clock';
import { logDecision } from '../logging/decision-log';
import type { Logger } from '../logging/logger';
import { decide, type PipelineDeps } from '../pipeline/decide';
import { toCheckAnswer, type StoreFailureMode } from '../responses/check-response';
import { toAuthRequest, type CheckRequestMessage } from './check-request';
import { AUTHORIZATION_SERVICE_NAME, loadAuthorizationService } from './proto-loading';

export interface AuthorizationServerDeps extends PipelineDeps {
  /** For time-stamped response headers (rate-limit resets); decisions use the store's clock. */
  clock: Clock;
  logger: Logger;
  storeFailureMode: StoreFailureMode;
  /** Notes each allowed key's use; written later, off the hot path. */
  lastUsed?: { note(ids: { keyId: string; accountId: string }): void };
}

/** The Check handler: CheckRequest → pipeline → CheckResponse. It never throws a denial as a gRPC error. */
export function createCheckHandler(deps: AuthorizationServerDeps): grpc.handleUnaryCall<CheckRequestMessage, unknown> {
  return (call, callback) => {
    const started = performance.now();
    const request = toAuthRequest(call.request ?? {});
    decide(request, deps).then(
      (decision) => {
        if (decision.kind === 'allow' && decision.identity) deps.lastUsed?.note(decision.identity);
        const answer = toCheckAnswer(decision, {
          requestId: request.requestId,
          storeFailureMode: deps.storeFailureMode,
          now: deps.clock.now(),
          versionHeaders: deps.settings.headerNames.versionHeaders,
        });
        logDecision(deps.logger, decision, {
          requestId: request.requestId,
          method: request.method,
          httpStatus: answer.kind === 'response' ? answer.httpStatus : 0,
          durationMs: performance.now() - started,
        });
        if (answer.kind === 'response') callback(null, answer.response);
        else callback({ code: answer.grpcCode, details: answer.details });
      },
      (error: unknown) => {
        // The pipeline handles every expected failure; this is a bug. Fail closed.
        deps.logger.error({ err: error, requestId: request.requestId }, 'check failed unexpectedly');
        callback({ code: grpc.status.INTERNAL, details: 'internal error' });
      },
    );
  };
}

export interface RunningGrpcServer {
  port: number;
  /** grpc.health.v1 for Envoy's cluster health check and Kubernetes gRPC probes. */
  health: HealthImplementation;
  close(): Promise<void>;
}

export async function startAuthorizationServer(
  deps: AuthorizationServerDeps,
  address: { host: string; port: number },
): Promise<RunningGrpcServer> {
  const server = new grpc.Server();
  const { service } = loadAuthorizationService();
  server.addService(service, { Check: createCheckHandler(deps) });
  const health = new HealthImplementation({ '': 'SERVING', [AUTHORIZATION_SERVICE_NAME]: 'SERVING' });
  health.addToServer(server);
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(`${address.host}:${address.port}`, grpc.ServerCredentials.createInsecure(), (error, bound) =>
      error ? reject(error) : resolve(bound),
    );
  });
  return {
    port,
    health,
    close: () =>
      new Promise<void>((resolve) => {
        // Tell Envoy to stop sending traffic before the listener goes away.
        health.setStatus('', 'NOT_SERVING');
        health.setStatus(AUTHORIZATION_SERVICE_NAME, 'NOT_SERVING');
        const force = setTimeout(() => server.forceShutdown(), 5000);
        server.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
      }),
  };
}
