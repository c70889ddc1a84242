/**
 * A metered answer's span (docs/operations/tracing.md): one `meter` span per
 * identified Process stream, from its request headers to the answer's end,
 * linked to the request it meters.
 *
 * The link: the request's trace context as ext_proc sees it in the request's
 * headers (`traceparent`, or B3, by the configured propagators), with the
 * request's `x-request-id` as an attribute, the same one the request's
 * `check` span carries. The parent: the span Envoy's ext_proc client put in
 * the Process call's metadata, else that same request context, so the span
 * follows the request's sampling decision.
 */
import { ROOT_CONTEXT, SpanKind, TraceFlags, trace, type Context, type Link, type Span, type TextMapGetter } from '@opentelemetry/api';
import type { Tracing } from '../platform/tracing';
import type { HeaderEntry } from './ext-proc-request-decoding';
import type { MeteredResponse } from './metered-response';
import type { MeteredRequest } from './response-meter';

export const METER_SPAN_NAME = 'meter';

export const METER_SPAN_ATTRIBUTES = {
  routeFamily: 'gateway_authz.route_family',
  accountId: 'gateway_authz.account_id',
  keyPrefix: 'gateway_authz.key_prefix',
  requestId: 'gateway_authz.request_id',
  outcome: 'gateway_authz.usage.outcome',
  delivery: 'gateway_authz.usage.delivery',
  inputTokens: 'gen_ai.usage.input_tokens',
  outputTokens: 'gen_ai.usage.output_tokens',
} as const;

export interface MeterTracing {
  /** The metered answer's span, or undefined when it is not sampled. */
  start(metadata: readonly string[] | undefined, requestHeaders: readonly HeaderEntry[], request: MeteredRequest): Span | undefined;
  finish(span: Span, record: MeteredResponse): void;
}

const PAIRS_GETTER: TextMapGetter<readonly string[]> = {
  get(pairs, key) {
    for (let i = 0; i < pairs.length; i += 2) if (pairs[i] === key) return pairs[i + 1];
    return undefined;
  },
  keys: (pairs) => pairs.filter((_, index) => index % 2 === 0),
};

const HEADER_ENTRIES_GETTER: TextMapGetter<readonly HeaderEntry[]> = {
  get(headers, key) {
    for (const header of headers)
      if (header.key === key) return header.rawValue.length > 0 ? header.rawValue.toString('utf8') : header.value;
    return undefined;
  },
  keys: (headers) => headers.map((header) => header.key),
};

export function meterTracing(tracing: Tracing): MeterTracing {
  return {
    start(metadata, requestHeaders, request) {
      const requestContext = tracing.parentFrom(requestHeaders, HEADER_ENTRIES_GETTER);
      const parent: Context | undefined =
        (metadata === undefined ? undefined : tracing.parentFrom(metadata, PAIRS_GETTER)) ?? requestContext;
      if (
        parent !== undefined &&
        tracing.unsampledParentIsDropped &&
        (trace.getSpanContext(parent)!.traceFlags & TraceFlags.SAMPLED) === 0
      ) {
        return undefined;
      }
      if (parent === undefined && !tracing.sampleRoot()) return undefined;
      const linked = requestContext === undefined ? undefined : trace.getSpanContext(requestContext);
      const links: Link[] =
        linked === undefined ? [] : [{ context: linked, attributes: { [METER_SPAN_ATTRIBUTES.requestId]: request.requestId } }];
      const span = tracing.tracer.startSpan(
        METER_SPAN_NAME,
        {
          kind: SpanKind.SERVER,
          links,
          attributes: {
            [METER_SPAN_ATTRIBUTES.requestId]: request.requestId,
            [METER_SPAN_ATTRIBUTES.routeFamily]: request.family,
            [METER_SPAN_ATTRIBUTES.accountId]: request.accountId,
            [METER_SPAN_ATTRIBUTES.keyPrefix]: request.keyPrefix,
          },
        },
        parent ?? ROOT_CONTEXT,
      );
      return span.isRecording() ? span : undefined;
    },
    finish(span, record) {
      span.setAttribute(METER_SPAN_ATTRIBUTES.delivery, record.delivery);
      if (record.outcome.kind === 'metered') {
        const { usage } = record.outcome;
        span.setAttribute(METER_SPAN_ATTRIBUTES.outcome, usage.estimated ? 'estimated' : 'usage');
        span.setAttribute(METER_SPAN_ATTRIBUTES.inputTokens, usage.tokens.inputTokens);
        span.setAttribute(METER_SPAN_ATTRIBUTES.outputTokens, usage.tokens.outputTokens);
      } else {
        span.setAttribute(METER_SPAN_ATTRIBUTES.outcome, `free:${record.outcome.reason}`);
      }
      span.end();
    },
  };
}
