/**
 * A Check's span (docs/operations/tracing.md): one `check` span per sampled
 * decision, a child span for the store's authorize round trip, and attributes
 * that carry no secret — never the key, a header value or the path (whose
 * query may hold a key).
 *
 * Its parent: the span Envoy's ext_authz gRPC client injects into the Check
 * call's own metadata (the call's HTTP/2 headers), which is the step of
 * Envoy's trace that waits for this decision; when the call carries none
 * (Envoy not tracing, or a caller other than Envoy), the trace of the
 * request itself, from the headers the CheckRequest carries.
 */
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, TraceFlags, trace, type Context, type Span, type TextMapGetter } from '@opentelemetry/api';
import type { Tracing } from '../platform/tracing';
import type { Decision } from './decision';
import type { Authorizer } from './ports';
import type { PipelineDeps } from './pipeline/decide';
import { AUTHORIZATION_SERVICE_NAME } from './proto-loading';

/** Span attribute names of our own, under one namespace so that they never collide with semantic conventions. */
export const CHECK_SPAN_ATTRIBUTES = {
  routeFamily: 'gateway_authz.route_family',
  decision: 'gateway_authz.decision',
  reason: 'gateway_authz.reason',
  accountId: 'gateway_authz.account_id',
  keyPrefix: 'gateway_authz.key_prefix',
  requestId: 'gateway_authz.request_id',
} as const;

export const CHECK_SPAN_NAME = 'check';

export interface CheckTracing {
  /** The trace headers: kept from the call's metadata by the transport, and decoded from the CheckRequest's headers. */
  readonly fields: readonly string[];
  /** The Check's span, or undefined when it is not sampled (then nothing else of tracing runs for it). */
  start(metadata: readonly string[] | undefined, headers: Readonly<Record<string, string>>, requestId: string): Span | undefined;
  /** The pipeline's dependencies with the store's round trip traced under `span`. */
  tracedDeps<Deps extends PipelineDeps>(span: Span, deps: Deps): Deps;
  finish(span: Span, decision: Decision): void;
  /** A bug answered INTERNAL: the span says so, without the error's text. */
  fail(span: Span): void;
}

/** name/value pairs, as the transport keeps metadata. */
export const METADATA_PAIRS_GETTER: TextMapGetter<readonly string[]> = {
  get(pairs, key) {
    for (let i = 0; i < pairs.length; i += 2) if (pairs[i] === key) return pairs[i + 1];
    return undefined;
  },
  keys(pairs) {
    return pairs.filter((_, index) => index % 2 === 0);
  },
};

const HEADER_RECORD_GETTER: TextMapGetter<Readonly<Record<string, string>>> = {
  get: (headers, key) => headers[key],
  keys: (headers) => Object.keys(headers),
};

/**
 * `storeSystem`: the store's `db.system.name` (redis), named in the child
 * span; undefined for the in-memory store, whose authorize is no round trip.
 */
export function checkTracing(tracing: Tracing, storeSystem: string | undefined): CheckTracing {
  const { tracer } = tracing;
  const storeSpanName = `${storeSystem ?? 'store'} authorize`;
  const storeAttributes = storeSystem ? { 'db.system.name': storeSystem, 'db.operation.name': 'authorize' } : {};
  return {
    fields: tracing.fields,
    start(metadata, headers, requestId) {
      const parent: Context | undefined =
        (metadata === undefined ? undefined : tracing.parentFrom(metadata, METADATA_PAIRS_GETTER)) ??
        tracing.parentFrom(headers, HEADER_RECORD_GETTER);
      // A parent that is not sampled has no sampled child under parent-based sampling: no span, not even a no-op one.
      if (
        parent !== undefined &&
        tracing.unsampledParentIsDropped &&
        (trace.getSpanContext(parent)!.traceFlags & TraceFlags.SAMPLED) === 0
      ) {
        return undefined;
      }
      if (parent === undefined && !tracing.sampleRoot()) return undefined;
      // Attributes only once sampled: an unsampled root (the ratio sampler said no) costs the SDK's ids and no more.
      const span = tracer.startSpan(CHECK_SPAN_NAME, { kind: SpanKind.SERVER }, parent ?? ROOT_CONTEXT);
      if (!span.isRecording()) return undefined;
      span.setAttributes({
        'rpc.system': 'grpc',
        'rpc.service': AUTHORIZATION_SERVICE_NAME,
        'rpc.method': 'Check',
        [CHECK_SPAN_ATTRIBUTES.requestId]: requestId,
      });
      return span;
    },
    tracedDeps(span, deps) {
      const parent = trace.setSpan(ROOT_CONTEXT, span);
      const inner = deps.authorizer;
      const authorizer: Authorizer = {
        authorize(request) {
          const child = tracer.startSpan(storeSpanName, { kind: SpanKind.CLIENT, attributes: storeAttributes }, parent);
          return inner.authorize(request).then(
            (outcome) => {
              child.end();
              return outcome;
            },
            (error: unknown) => {
              child.setStatus({ code: SpanStatusCode.ERROR, message: 'the store did not answer' });
              child.end();
              throw error;
            },
          );
        },
      };
      // Object.assign, not a spread with a member after it: one hidden class for every traced Check (eslint.config.mjs).
      return Object.assign({}, deps, { authorizer });
    },
    finish(span, decision) {
      span.setAttribute(CHECK_SPAN_ATTRIBUTES.routeFamily, decision.route.family);
      span.setAttribute(CHECK_SPAN_ATTRIBUTES.decision, decision.kind);
      if (decision.kind === 'allow') {
        if (decision.identity) {
          span.setAttribute(CHECK_SPAN_ATTRIBUTES.accountId, decision.identity.accountId);
          span.setAttribute(CHECK_SPAN_ATTRIBUTES.keyPrefix, decision.identity.keyPrefix);
        }
      } else {
        span.setAttribute(CHECK_SPAN_ATTRIBUTES.reason, decision.reason);
        if (decision.accountId !== undefined) span.setAttribute(CHECK_SPAN_ATTRIBUTES.accountId, decision.accountId);
        if (decision.keyPrefix !== undefined) span.setAttribute(CHECK_SPAN_ATTRIBUTES.keyPrefix, decision.keyPrefix);
      }
      span.end();
    },
    fail(span) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: 'internal error' });
      span.end();
    },
  };
}
