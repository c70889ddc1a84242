/**
 * OpenTelemetry tracing, built from the settings (the standard OTEL_*
 * variables, read and validated in settings.ts; docs/operations/tracing.md).
 * Nothing here reads the environment: the exporter and the batch processor
 * are given their values. The exporter still merges what the SDK reads for
 * itself and the settings do not cover (OTEL_EXPORTER_OTLP_HEADERS, the TLS
 * certificate files): a collector's credentials stay out of the settings.
 *
 * The service only joins traces (a remote parent from a carrier) and
 * exports its own spans; it never injects a context anywhere, so no global
 * propagator, context manager or tracer provider is registered.
 */
import { randomFillSync } from 'node:crypto';
import {
  diag,
  DiagLogLevel,
  ROOT_CONTEXT,
  SpanKind,
  trace,
  type Context,
  type SpanContext,
  type TextMapGetter,
  type TextMapPropagator,
  type Tracer,
} from '@opentelemetry/api';
import { CompositePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { B3Propagator, B3InjectEncoding } from '@opentelemetry/propagator-b3';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  SamplingDecision,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type IdGenerator,
  type Sampler,
  type SpanExporter,
} from '@opentelemetry/sdk-trace';
import type { Logger } from './logger';
import { propagatorFields, type TracePropagator, type TracingSettings } from './tracing-settings';
import { packageVersion } from './package-version';

/**
 * Bounds of the batch span processor. The queue is what a collector that
 * does not answer may cost: 2,048 ended spans (a few MB), past which new
 * ones are dropped, never a decision held up. A batch every second of at
 * most 512 spans, each export given 10 s: the SDK's own defaults, stated
 * here so that no OTEL_BSP_* variable changes them behind the settings.
 */
const MAX_QUEUED_SPANS = 2_048;
const MAX_SPANS_PER_EXPORT = 512;
const EXPORT_EVERY_MS = 1_000;
const EXPORT_TIMEOUT_MS = 10_000;

export interface Tracing {
  readonly tracer: Tracer;
  /** The lower-case header names the configured propagators read. */
  readonly fields: readonly string[];
  /**
   * True when a remote parent that is not sampled gives no span (the
   * parentbased_* samplers, and always_off): the caller may then skip the
   * span without asking the SDK.
   */
  readonly unsampledParentIsDropped: boolean;
  /**
   * Whether a root span (one without a parent) started next is sampled: the
   * configured sampler decides on a fresh trace id, which the next root span
   * then takes. A caller asks before starting a root span, so that one the
   * sampler drops costs a few random bytes and no span (the SDK's own way, a
   * non-recording span, costs about 3 µs).
   */
  sampleRoot(): boolean;
  /** The remote parent a carrier names (by the configured propagators), as a context to start a span in; undefined: none. */
  parentFrom<Carrier>(carrier: Carrier, getter: TextMapGetter<Carrier>): Context | undefined;
  /** Exports what is queued, then stops: the last spans of a drain are not lost. */
  shutdown(): Promise<void>;
}

/** The span context of a parent found by parentFrom. */
export function spanContextOf(parent: Context): SpanContext | undefined {
  return trace.getSpanContext(parent);
}

export function startTracing(settings: TracingSettings, logger: Logger, exporter?: SpanExporter): Tracing {
  // Export failures are the SDK's to retry or drop; they are logged as warnings, never thrown into a Check.
  diag.setLogger(
    {
      error: (message: string) => logger.warn({ event: 'tracing_export' }, `tracing: ${message}`),
      warn: (message: string) => logger.warn({ event: 'tracing_export' }, `tracing: ${message}`),
      info: () => {},
      debug: () => {},
      verbose: () => {},
    },
    { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true },
  );
  const spanExporter =
    exporter ??
    new OTLPTraceExporter({ url: settings.tracesUrl, headers: {}, timeoutMillis: EXPORT_TIMEOUT_MS, compression: 'none' as never });
  const sampler = samplerOf(settings);
  const ids = new PresetIdGenerator();
  const provider = new TracerProvider({
    idGenerator: ids,
    resource: resourceFromAttributes({ 'service.name': settings.serviceName, 'service.version': packageVersion() }),
    sampler,
    spanProcessors: [
      new BatchSpanProcessor({
        exporter: spanExporter,
        maxQueueSize: MAX_QUEUED_SPANS,
        maxExportBatchSize: MAX_SPANS_PER_EXPORT,
        scheduledDelayMillis: EXPORT_EVERY_MS,
        exportTimeoutMillis: EXPORT_TIMEOUT_MS,
      }),
    ],
  });
  const propagator = propagatorOf(settings.propagators);
  return {
    tracer: provider.getTracer('gateway-authz', packageVersion()),
    fields: propagatorFields(settings.propagators),
    unsampledParentIsDropped: settings.sampler.startsWith('parentbased_') || settings.sampler === 'always_off',
    sampleRoot() {
      const sampled =
        sampler.shouldSample(ROOT_CONTEXT, ids.presetTraceId(), '', SpanKind.INTERNAL, {}, []).decision !== SamplingDecision.NOT_RECORD;
      // A dropped root's id must not become the trace id of some later root span.
      if (!sampled) ids.discardPreset();
      return sampled;
    },
    parentFrom(carrier, getter) {
      const extracted = propagator.extract(ROOT_CONTEXT, carrier, getter);
      return extracted === ROOT_CONTEXT || trace.getSpanContext(extracted) === undefined ? undefined : extracted;
    },
    async shutdown() {
      await provider.shutdown();
      diag.disable();
    },
  };
}

/** Random bytes drawn this many at a time: one system call per 128 trace ids. */
const RANDOM_POOL_BYTES = 4_096;

/**
 * Trace and span ids from a pool of cryptographic random bytes (the SDK's
 * own generator calls Math.random per 4 bytes), and a trace id drawn ahead
 * by sampleRoot, which the next root span takes. Both run on the one thread,
 * and a root span is started right after the sampleRoot that drew its id.
 */
class PresetIdGenerator implements IdGenerator {
  private pool = Buffer.alloc(0);
  private offset = 0;
  private preset: string | undefined;

  presetTraceId(): string {
    this.preset = this.hex(16);
    return this.preset;
  }

  discardPreset(): void {
    this.preset = undefined;
  }

  generateTraceId(): string {
    const preset = this.preset;
    if (preset === undefined) return this.hex(16);
    this.preset = undefined;
    return preset;
  }

  generateSpanId(): string {
    return this.hex(8);
  }

  /** An all-zero id is invalid (W3C Trace Context); 2^-64 at worst, but then one more draw. */
  private hex(bytes: number): string {
    for (;;) {
      if (this.offset + bytes > this.pool.length) {
        this.pool = randomFillSync(Buffer.allocUnsafe(RANDOM_POOL_BYTES));
        this.offset = 0;
      }
      const start = this.offset;
      this.offset += bytes;
      for (let i = start; i < start + bytes; i += 1) if (this.pool[i] !== 0) return this.pool.toString('hex', start, start + bytes);
    }
  }
}

function samplerOf(settings: TracingSettings): Sampler {
  const ratio = () => new TraceIdRatioBasedSampler(settings.samplerRatio);
  switch (settings.sampler) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return ratio();
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: ratio() });
  }
}

/**
 * A composite extracts with each propagator in turn, a later one replacing
 * what an earlier one found: tracecontext goes last, so the W3C header wins
 * where a carrier has both.
 */
function propagatorOf(names: readonly TracePropagator[]): TextMapPropagator {
  const propagators: TextMapPropagator[] = [];
  // B3Propagator reads the single header, else the multi ones, whichever encoding it would inject.
  if (names.includes('b3')) propagators.push(new B3Propagator({ injectEncoding: B3InjectEncoding.SINGLE_HEADER }));
  else if (names.includes('b3multi')) propagators.push(new B3Propagator({ injectEncoding: B3InjectEncoding.MULTI_HEADER }));
  if (names.includes('tracecontext')) propagators.push(new W3CTraceContextPropagator());
  return propagators.length === 1 ? propagators[0]! : new CompositePropagator({ propagators });
}
