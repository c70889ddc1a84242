import type { Logger } from '../platform/logger';
import type { CheckResponse } from './responses/check-response';
import { createCheckHandler, type CheckHandler, type CheckHandlerDeps } from './check-handler';
import { checkRequestHeaderSelection } from './check-request';
import { decodeCheckRequest } from './check-request-decoding';
import type { HeaderSelection } from './header-selection';
import { encodeCheckResponseFrame } from './check-response-encoding';
import { processMethod, PROCESS_PATH, type ExtProcDeps } from '../metering/ext-proc-service';
import { HealthService } from '../platform/health-service';
import { AUTHORIZATION_SERVICE_NAME, loadAuthorizationService } from './proto-loading';
import { frameMessage, GrpcServer, type GrpcServerSettings, type MethodHandler } from '../transport/grpc-server';
import { GrpcStatus } from '../transport/status';

export { createCheckHandler, type CheckHandler } from './check-handler';

export interface AuthorizationServerDeps extends CheckHandlerDeps {
  /** Usage metering: ExternalProcessor/Process on the same port. Absent: Process is UNIMPLEMENTED. */
  extProc?: ExtProcDeps;
}

export const CHECK_PATH = `/${AUTHORIZATION_SERVICE_NAME}/Check`;

/**
 * Check as a gRPC method: the request read by check-request-decoding.ts
 * (only the fields the pipeline uses), the answer written by
 * check-response-encoding.ts (the bytes protobufjs writes, straight into the
 * length-prefixed frame). An answer the fast encoder does not know goes to
 * protobufjs; a request that does not parse is answered INTERNAL, as grpc-js
 * answers a message protobufjs cannot decode. With `headers`, only the
 * headers it selects are decoded.
 */
export function checkMethod(handler: CheckHandler, logger: Logger, headers?: HeaderSelection): MethodHandler {
  let generic: ((value: object) => Buffer) | undefined;
  const encode = (response: CheckResponse): Buffer => {
    const fast = encodeCheckResponseFrame(response);
    if (fast) return fast;
    generic ??= loadAuthorizationService().service.Check!.responseSerialize as (value: object) => Buffer;
    return frameMessage(generic(response));
  };
  return {
    kind: 'unary',
    handle(message, call) {
      const shed = handler.shedBeforeDecoding?.();
      if (shed !== undefined) {
        call.fail(shed);
        return;
      }
      let request;
      try {
        request = decodeCheckRequest(message, headers);
      } catch (error) {
        call.fail({ code: GrpcStatus.INTERNAL, details: `Error deserializing request: ${(error as Error).message}` });
        return;
      }
      handler(
        request,
        call.deadlineMs,
        (error, response) => {
          // Cancelled, or past its deadline and answered so: nobody reads this answer.
          if (call.finished) return false;
          if (error) {
            call.fail(error);
            return true;
          }
          let frame: Buffer;
          try {
            frame = encode(response!);
          } catch (encodeError) {
            logger.error({ err: encodeError }, 'CheckResponse could not be encoded');
            call.fail({ code: GrpcStatus.INTERNAL, details: 'internal error' });
            return false;
          }
          call.respond(frame);
          return true;
        },
        call.metadata,
      );
    },
  };
}

export interface RunningGrpcServer {
  port: number;
  /** grpc.health.v1 for Envoy's cluster health check and Kubernetes gRPC probes. */
  health: HealthService;
  /** Connections closed ENHANCE_YOUR_CALM, by the attack budget they overran. */
  budgetClosures: Readonly<Record<string, number>>;
  close(): Promise<void>;
}

export interface GrpcServerOptions extends Partial<Omit<GrpcServerSettings, 'host' | 'port'>> {
  host: string;
  port: number;
  maxConnectionAgeMs: number;
  /** How long in-flight Checks may take to finish on close before the server is forced down. */
  shutdownTimeoutMs: number;
}

export async function startAuthorizationServer(deps: AuthorizationServerDeps, options: GrpcServerOptions): Promise<RunningGrpcServer> {
  // Defaults: keepalive PINGs every 30 s (dead Envoy connections are found), connections recycled at
  // maxConnectionAgeMs with 30 s of grace (traffic rebalances across replicas after a scale-up or a restart).
  const traceFields = deps.tracing?.fields;
  const server = new GrpcServer(traceFields ? { keptMetadata: new Set(traceFields), ...options } : options, deps.logger);
  const headers = checkRequestHeaderSelection(deps.settings.headerNames, traceFields);
  server.addMethod(CHECK_PATH, checkMethod(createCheckHandler(deps), deps.logger, headers));
  if (deps.extProc) server.addMethod(PROCESS_PATH, processMethod(deps.extProc));
  // NOT_SERVING until the health monitor has seen the store answer.
  const health = new HealthService({ '': 'NOT_SERVING', [AUTHORIZATION_SERVICE_NAME]: 'NOT_SERVING' });
  for (const [path, method] of Object.entries(health.methods())) server.addMethod(path, method);
  const port = await server.listen();
  return {
    port,
    health,
    budgetClosures: server.budgetClosures,
    close: async () => {
      // Tell Envoy to stop sending traffic before the listener goes away.
      health.setStatus('', 'NOT_SERVING');
      health.setStatus(AUTHORIZATION_SERVICE_NAME, 'NOT_SERVING');
      await server.close();
    },
  };
}
