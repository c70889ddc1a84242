import * as grpc from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import { performance } from 'node:perf_hooks';
import type { Clock } from '../domain/clock';
import type { Decision } from '../domain/decision';
import { logDecision, shouldLogDecision } from '../logging/decision-log';
import type { Logger } from '../logging/logger';
import type { CheckAdmission, ShedReason } from '../overload/check-admission';
import { decide, type PipelineDeps } from '../pipeline/decide';
import { toCheckAnswer, type CheckResponse, type StoreFailureMode } from '../responses/check-response';
import { decodeCheckRequest } from './check-request-decoding';
import { encodeCheckResponse } from './check-response-encoding';
import { toAuthRequest, type CheckRequestMessage } from './check-request';
import { AUTHORIZATION_SERVICE_NAME, loadAuthorizationService } from './proto-loading';

export interface AuthorizationServerDeps extends PipelineDeps {
  /** For time-stamped response headers (rate-limit resets); decisions use the store's clock. */
  clock: Clock;
  logger: Logger;
  storeFailureMode: StoreFailureMode;
  /** Decision counts and latency, and shed Checks. */
  metrics?: {
    observeDecision(decision: Decision, seconds: number): void;
    observeCheckLatency(seconds: number): void;
    observeShed(reason: ShedReason): void;
  };
  /** Bounds the Checks in flight and refuses ones already past their deadline. Absent: every Check is decided. */
  admission?: CheckAdmission;
  /** The event-loop delay just waited out, added to each Check's latency; absent: 0. */
  loopLag?: { currentMs(nowMs: number): number };
  /** Notes each allowed key's use; written later, off the hot path. */
  lastUsed?: { note(ids: { keyId: string; accountId: string }): void };
  /** DECISION_LOG_SAMPLE: fraction of allowed decisions logged (denials always are). Default 1. */
  decisionLogSample?: number;
}

/** The Check handler: CheckRequest → pipeline → CheckResponse. It never throws a denial as a gRPC error. */
export function createCheckHandler(deps: AuthorizationServerDeps): grpc.handleUnaryCall<CheckRequestMessage, unknown> {
  const sample = deps.decisionLogSample ?? 1;
  const { admission, loopLag } = deps;
  return (call, callback) => {
    const started = performance.now();
    const waitedMs = loopLag ? loopLag.currentMs(started) : 0;
    const request = toAuthRequest(call.request ?? {});
    // Admitted only once nothing synchronous is left that could throw and leave its place taken.
    if (admission) {
      const shed = admission.admit(deadlineMsOf(call.getDeadline()));
      if (shed) {
        deps.metrics?.observeShed(shed);
        callback(shedAnswer(shed, admission.maxInFlight));
        return;
      }
    }
    decide(request, deps).then(
      (decision) => {
        admission?.release();
        if (decision.kind === 'allow' && decision.identity) deps.lastUsed?.note(decision.identity);
        const answer = toCheckAnswer(decision, {
          requestId: request.requestId,
          storeFailureMode: deps.storeFailureMode,
          now: deps.clock.now(),
          versionHeaders: deps.settings.headerNames.versionHeaders,
        });
        const durationMs = performance.now() - started;
        deps.metrics?.observeDecision(decision, durationMs / 1000);
        deps.metrics?.observeCheckLatency((durationMs + waitedMs) / 1000);
        if (shouldLogDecision(decision, sample)) {
          logDecision(deps.logger, decision, {
            requestId: request.requestId,
            method: request.method,
            httpStatus: answer.kind === 'response' ? answer.httpStatus : 0,
            durationMs,
            ...(sample < 1 ? { sampleRate: sample } : {}),
          });
        }
        if (answer.kind === 'response') callback(null, answer.response);
        else callback({ code: answer.grpcCode, details: answer.details });
      },
      (error: unknown) => {
        admission?.release();
        // The pipeline handles every expected failure; this is a bug. Fail closed.
        deps.logger.error({ err: error, requestId: request.requestId }, 'check failed unexpectedly');
        callback({ code: grpc.status.INTERNAL, details: 'internal error' });
      },
    );
  };
}

/** grpc-js sets a server call's deadline from `grpc-timeout` on receipt (Date.now() + timeout), Infinity without one. */
function deadlineMsOf(deadline: grpc.Deadline): number {
  return typeof deadline === 'number' ? deadline : deadline.getTime();
}

/**
 * A shed Check's answer: a gRPC error, never a CheckResponse, so it can never
 * be an allow (envoy.yaml has failure_mode_allow: false). Envoy's retry_policy
 * retries UNAVAILABLE on another replica, or answers its status_on_error (503).
 */
function shedAnswer(reason: ShedReason, maxInFlight: number): Partial<grpc.StatusObject> {
  return reason === 'over_capacity'
    ? { code: grpc.status.UNAVAILABLE, details: `overloaded: ${maxInFlight} Checks in flight (MAX_CHECKS_IN_FLIGHT); try another replica` }
    : { code: grpc.status.DEADLINE_EXCEEDED, details: 'the deadline passed before the Check started' };
}

/**
 * The service definition with Check's request read by
 * check-request-decoding.ts (only the fields the pipeline uses) and its
 * answer written by check-response-encoding.ts (the same bytes protobufjs
 * writes) instead of protobufjs, which does the same work at several times
 * the cost. An answer the encoder does not recognise still goes to protobufjs.
 */
export function withFastCheckCodec(service: grpc.ServiceDefinition): grpc.ServiceDefinition {
  const check = service.Check;
  if (!check) return service;
  const generic = check.responseSerialize;
  return {
    ...service,
    Check: {
      ...check,
      requestDeserialize: (bytes: Buffer) => decodeCheckRequest(bytes),
      responseSerialize: (value: unknown) => encodeCheckResponse(value as CheckResponse) ?? generic(value),
    },
  };
}

export interface RunningGrpcServer {
  port: number;
  /** grpc.health.v1 for Envoy's cluster health check and Kubernetes gRPC probes. */
  health: HealthImplementation;
  close(): Promise<void>;
}

export interface GrpcServerOptions {
  host: string;
  port: number;
  maxConnectionAgeMs: number;
  /** How long in-flight Checks may take to finish on close before the server is forced down. */
  shutdownTimeoutMs: number;
}

export async function startAuthorizationServer(deps: AuthorizationServerDeps, address: GrpcServerOptions): Promise<RunningGrpcServer> {
  const server = new grpc.Server({
    // Detect dead Envoy connections, and recycle live ones now and then so
    // traffic rebalances across replicas after a scale-up or a restart.
    'grpc.keepalive_time_ms': 30_000,
    'grpc.keepalive_timeout_ms': 10_000,
    'grpc.keepalive_permit_without_calls': 1,
    'grpc.max_connection_age_ms': address.maxConnectionAgeMs,
    'grpc.max_connection_age_grace_ms': 30_000,
    // Channelz keeps per-call counters and timestamps for a debugging service
    // we do not register; off, a Check costs a few microseconds less.
    'grpc.enable_channelz': 0,
  });
  server.addService(withFastCheckCodec(loadAuthorizationService().service), { Check: createCheckHandler(deps) });
  // NOT_SERVING until the health monitor has seen the store answer.
  const health = new HealthImplementation({ '': 'NOT_SERVING', [AUTHORIZATION_SERVICE_NAME]: 'NOT_SERVING' });
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
        const force = setTimeout(() => server.forceShutdown(), address.shutdownTimeoutMs);
        server.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
      }),
  };
}
