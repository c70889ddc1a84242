/**
 * What the OTEL_* variables say about tracing, apart from the SDK
 * (tracing.ts), so that reading the settings does not load it.
 */
export const TRACES_SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;
export type TracesSampler = (typeof TRACES_SAMPLERS)[number];

/** The propagators a Check's trace can be read from (OTEL_PROPAGATORS); `baggage` is accepted and not read. */
export const TRACE_PROPAGATORS = ['tracecontext', 'b3', 'b3multi'] as const;
export type TracePropagator = (typeof TRACE_PROPAGATORS)[number];

/** Present only when spans are exported (OTEL_TRACES_EXPORTER=otlp and OTEL_SDK_DISABLED is not true). */
export interface TracingSettings {
  /** Where spans are POSTed: OTLP over HTTP, protobuf-encoded. */
  readonly tracesUrl: string;
  readonly serviceName: string;
  readonly sampler: TracesSampler;
  /** The ratio of the traceidratio samplers, from 0 to 1. */
  readonly samplerRatio: number;
  readonly propagators: readonly TracePropagator[];
}

/** The header names each propagator reads, lower case (what a carrier must keep for extract()). */
const PROPAGATOR_FIELDS: Readonly<Record<TracePropagator, readonly string[]>> = {
  tracecontext: ['traceparent', 'tracestate'],
  b3: ['b3'],
  b3multi: ['x-b3-traceid', 'x-b3-spanid', 'x-b3-parentspanid', 'x-b3-sampled', 'x-b3-flags'],
};

/** The lower-case header names the given propagators read. */
export function propagatorFields(propagators: readonly TracePropagator[]): string[] {
  return [...new Set(propagators.flatMap((name) => PROPAGATOR_FIELDS[name]))];
}
