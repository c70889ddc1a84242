import { performance } from 'node:perf_hooks';
import type { Clock } from '../platform/clock';
import type { CallerIdentity, Decision } from './decision';
import type { PlacedHold } from '../accounts/credit-holds';
import { logDecision, shouldLogDecision } from './decision-log';
import type { Logger } from '../platform/logger';
import type { CheckAdmission, ShedReason } from './check-admission';
import { decide, type PipelineDeps } from './pipeline/decide';
import { toCheckAnswer, type CheckResponse, type StoreFailureMode } from './responses/check-response';
import { toAuthRequest, type CheckRequestMessage } from './check-request';
import { GrpcStatus, type RpcError } from '../transport/status';
import type { CheckTracing } from './check-tracing';

export interface CheckHandlerDeps extends PipelineDeps {
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
  /** A span per sampled Check (OTEL_* settings); absent: tracing is off and none of it runs. */
  tracing?: CheckTracing;
  /**
   * Told of an allow that held credit but that nobody read (Envoy gave up on the Check, so the request was refused or
   * will be checked again): the hold is let go, as a refused Check leaves none.
   */
  onUndeliveredHold?: (identity: CallerIdentity, held: PlacedHold, requestId: string) => void;
}

/**
 * Exactly one call per Check: a CheckResponse (allow or deny), or a gRPC error status (never an allow). Returns false
 * when nobody will read the answer (the call was cancelled or its deadline passed), so a hold it carried is let go.
 */
export type CheckReply = (error: RpcError | null, response?: CheckResponse) => boolean | void;

/**
 * `deadlineMs`: when the caller gives up (epoch ms on the system clock, the
 * one the transport reads `grpc-timeout` on), Infinity without a deadline.
 * `metadata`: the call's trace headers as name/value pairs, when tracing keeps them.
 */
export interface CheckHandler {
  (request: CheckRequestMessage, deadlineMs: number, reply: CheckReply, metadata?: readonly string[]): void;
  /**
   * Asked before the request is decoded: the over-capacity answer (its shed counted) when every place is taken, else
   * undefined and the Check goes on to be decoded and admitted. Past saturation most Checks are shed, and a shed that
   * decodes its request first spends the CPU and the young generation that the admitted ones need.
   */
  shedBeforeDecoding?(): RpcError | undefined;
}

/**
 * The Check handler, independent of the transport: CheckRequest → pipeline →
 * CheckResponse. A denial is a CheckResponse, never a gRPC error; a bug
 * anywhere on the way is answered INTERNAL, never an allow.
 */
export function createCheckHandler(deps: CheckHandlerDeps): CheckHandler {
  const sample = deps.decisionLogSample ?? 1;
  const { admission, loopLag, tracing } = deps;
  const shedAnswers =
    admission === undefined
      ? undefined
      : {
          over_capacity: shedAnswer('over_capacity', admission.maxInFlight),
          past_deadline: shedAnswer('past_deadline', admission.maxInFlight),
        };
  const handle = (message: CheckRequestMessage, deadlineMs: number, reply: CheckReply, metadata?: readonly string[]): void => {
    const started = performance.now();
    const waitedMs = loopLag ? loopLag.currentMs(started) : 0;
    const request = toAuthRequest(message);
    // Admitted only once nothing synchronous is left that could throw and leave its place taken.
    if (admission) {
      const shed = admission.admit(deadlineMs);
      if (shed) {
        deps.metrics?.observeShed(shed);
        reply(shedAnswers![shed]);
        return;
      }
    }
    const span = tracing === undefined ? undefined : tracing.start(metadata, request.headers, request.requestId);
    // The place is released exactly once, when the decision settles, whether or not anyone still waits for it
    // (a client that cancelled does not stop the Redis call it started).
    decide(request, span === undefined ? deps : tracing!.tracedDeps(span, deps)).then(
      (decision) => {
        if (span !== undefined) tracing!.finish(span, decision);
        admission?.release();
        let answer: ReturnType<typeof toCheckAnswer>;
        try {
          if (decision.kind === 'allow' && decision.identity) deps.lastUsed?.note(decision.identity);
          answer = toCheckAnswer(decision, {
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
        } catch (error) {
          failClosed(deps.logger, request.requestId, error, reply);
          return;
        }
        if (answer.kind === 'response') {
          const delivered = reply(null, answer.response);
          if (delivered === false && decision.kind === 'allow' && decision.identity && decision.held) {
            deps.onUndeliveredHold?.(decision.identity, decision.held, request.requestId);
          }
        } else reply({ code: answer.grpcCode, details: answer.details });
      },
      (error: unknown) => {
        admission?.release();
        if (span !== undefined) tracing!.fail(span);
        failClosed(deps.logger, request.requestId, error, reply);
      },
    );
  };
  return Object.assign(handle, {
    shedBeforeDecoding(): RpcError | undefined {
      if (!admission?.full) return undefined;
      deps.metrics?.observeShed('over_capacity');
      return shedAnswers!.over_capacity;
    },
  });
}

/** The pipeline handles every expected failure, so this is a bug: answered INTERNAL, never an allow. */
function failClosed(logger: Logger, requestId: string, error: unknown, reply: CheckReply): void {
  logger.error({ err: error, requestId }, 'check failed unexpectedly');
  reply({ code: GrpcStatus.INTERNAL, details: 'internal error' });
}

/**
 * A shed Check's answer: a gRPC error, never a CheckResponse, so it can never
 * be an allow (envoy.yaml has failure_mode_allow: false). Envoy's retry_policy
 * retries UNAVAILABLE on another replica, or answers its status_on_error (503).
 */
function shedAnswer(reason: ShedReason, maxInFlight: number): RpcError {
  // Frozen: the transport then encodes the one answer every shed Check gets once.
  return Object.freeze(
    reason === 'over_capacity'
      ? { code: GrpcStatus.UNAVAILABLE, details: `overloaded: ${maxInFlight} Checks in flight (MAX_CHECKS_IN_FLIGHT); try another replica` }
      : { code: GrpcStatus.DEADLINE_EXCEEDED, details: 'the deadline passed before the Check started' },
  );
}
