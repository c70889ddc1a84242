/**
 * envoy.service.ext_proc.v3.ExternalProcessor/Process for usage metering, as
 * Envoy's ext_proc filter calls it in observability mode (envoy.yaml): one
 * bidi stream per HTTP request, on which Envoy sends the request headers,
 * the response headers (with the `request.size` attribute) and each
 * response body chunk as it passes, and does not wait for answers.
 *
 * What a stream does:
 * - request_headers: whose request it is, from the identity headers ext_authz
 *   set on allow (Envoy strips client copies) and its x-request-id; its
 *   method and path. Without that identity the stream is ended at once (OK):
 *   nothing is metered against anyone, and Envoy sends nothing more.
 * - response_headers: `:status`, `content-type`, `content-encoding` decide
 *   whether the body is read; when they decide alone (an error answer, not a
 *   generation) the answer is recorded and the stream ended.
 * - response_body: each chunk goes to the usage extractor, never kept. The
 *   chunk with end_of_stream, or the response trailers, end the answer
 *   (`complete`): one MeteredResponse goes to the sink and the stream is
 *   ended OK, so Envoy closes its side without waiting.
 * - The client's half-close or a reset before that (Envoy closes the stream
 *   when the HTTP stream ends early, after deferred_close_timeout), or the
 *   server's shutdown: the answer is `disconnected`, and what passed is
 *   counted.
 * - A message that is not valid protobuf: INTERNAL, and nothing is metered.
 *
 * Replies: none in observability mode, where Envoy ignores them
 * (Filter::onReceiveMessage returns at once). A message without
 * observability_mode (a filter configured otherwise, which would wait for
 * each reply) gets the matching empty response (CONTINUE) so that the
 * answer is never held up; it is counted in a metric.
 *
 * Bounds: at most maxStreams streams at once (over it, RST_STREAM
 * REFUSED_STREAM); per stream, one message at a time (the transport's
 * message size limit) and the extractor's bounded state.
 */
import type { Clock } from '../platform/clock';
import type { MeteredResponse, MeteredResponseSink } from './metered-response';
import type { RouteFamily } from '../check/routes/route';
import type { Logger } from '../platform/logger';
import { ResponseMeter, type MeteredRequest } from './response-meter';
import type { ExtProcMetrics, MeteringOutcome, NotMeteredReason } from './ext-proc-metrics';
import { IDENTITY_HEADERS } from '../check/responses/identity-headers';
import { HOLD_HEADER, parsePlacedHold } from '../accounts/credit-holds';
import { decodeProcessingRequest, type AttributeValue, type DecodedProcessingRequest, type HeaderEntry } from './ext-proc-request-decoding';
import type { BidiStreamingCall, CallAbort, MethodHandler, RequestStream } from '../transport/grpc-server';
import { GrpcStatus, type RpcError } from '../transport/status';
import type { Span } from '@opentelemetry/api';
import type { MeterTracing } from './meter-tracing';

export const EXT_PROC_SERVICE_NAME = 'envoy.service.ext_proc.v3.ExternalProcessor';
export const PROCESS_PATH = `/${EXT_PROC_SERVICE_NAME}/Process`;

/** The key of ProcessingRequest.attributes under which Envoy puts the attributes it evaluated. */
const ATTRIBUTES_KEY = 'envoy.filters.http.ext_proc';
const REQUEST_SIZE_ATTRIBUTE = 'request.size';

export interface ExtProcDeps {
  sink: MeteredResponseSink;
  clock: Clock;
  logger: Logger;
  /** EXT_PROC_MAX_STREAMS: Process streams open at once, per process. */
  maxStreams: number;
  metrics?: Pick<ExtProcMetrics, 'streamEnded' | 'malformedUsage' | 'streamRefused' | 'blockingMessage' | 'watchOpenStreams'>;
  /** A span per sampled metered answer (OTEL_* settings); absent: tracing is off. */
  tracing?: MeterTracing;
}

const OK: RpcError = Object.freeze({ code: GrpcStatus.OK, details: '' });

/** Identity values are ids and a display prefix: printable ASCII words, never long. */
const MAX_ID_LENGTH = 128;
const PRINTABLE_WORD = /^[\x21-\x7e]+$/;
const METERABLE_FAMILIES: ReadonlySet<string> = new Set<RouteFamily>([
  'chat-completions',
  'messages',
  'generative-content',
  'models',
  'other',
  'public',
]);

/**
 * The reply to a message Envoy waits for: the ProcessingResponse member
 * matching the request's (request_headers=2 → 1 … response_trailers=7 → 6),
 * empty (CONTINUE, nothing changed), framed.
 */
const PASS_THROUGH_REPLIES: Readonly<Record<string, Buffer>> = Object.freeze(
  Object.fromEntries(
    (['request_headers', 'response_headers', 'request_body', 'response_body', 'request_trailers', 'response_trailers'] as const).map(
      (kind, index) => [kind, Buffer.from([0, 0, 0, 0, 2, ((index + 1) << 3) | 2, 0])],
    ),
  ),
);

export function processMethod(deps: ExtProcDeps): MethodHandler & { readonly openStreams: () => number } {
  let open = 0;
  deps.metrics?.watchOpenStreams(() => open);
  const release = () => {
    open -= 1;
  };
  return {
    kind: 'bidi-streaming',
    openStreams: () => open,
    start(call) {
      if (open >= deps.maxStreams) {
        deps.metrics?.streamRefused();
        call.refuse();
        return undefined;
      }
      open += 1;
      call.onFinished(release);
      return new MeteringStream(call, deps);
    },
  };
}

class MeteringStream implements RequestStream {
  private meter: ResponseMeter | undefined;
  private ended = false;
  private messages = 0;
  private bodyBytes = 0;
  /** request.size, when it came before the request's identity was known. */
  private requestSize: number | undefined;
  private span: Span | undefined;

  constructor(
    private readonly call: BidiStreamingCall,
    private readonly deps: ExtProcDeps,
  ) {}

  message(bytes: Buffer): void {
    this.messages += 1;
    let message: DecodedProcessingRequest;
    try {
      message = decodeProcessingRequest(bytes);
    } catch (error) {
      this.notMetered('malformed_message');
      this.call.fail({ code: GrpcStatus.INTERNAL, details: `Error deserializing request: ${(error as Error).message}` });
      return;
    }
    if (!message.observabilityMode && message.kind !== undefined) {
      this.deps.metrics?.blockingMessage();
      this.call.write(PASS_THROUGH_REPLIES[message.kind]!);
    }
    if (message.attributes) this.readAttributes(message.attributes);
    switch (message.kind) {
      case 'request_headers':
        this.requestHeaders(message.headers ?? []);
        return;
      case 'request_body':
        this.meter?.requestBody(message.body!.length);
        return;
      case 'response_headers':
        this.responseHeaders(message.headers ?? [], message.endOfStream);
        return;
      case 'response_body':
        this.responseBody(message.body!, message.endOfStream);
        return;
      case 'response_trailers':
        // Sent only when the upstream sends trailers, which then end the answer (no chunk has end_of_stream).
        if (this.meter) this.finish('complete');
        return;
      default:
        // Request trailers, and members of a newer Envoy's oneof: nothing to read.
        return;
    }
  }

  halfClosed(): void {
    // Envoy closes the stream when the HTTP stream ended before the answer did (client gone, upstream reset).
    if (!this.ended) this.finish('disconnected');
    this.call.end(OK);
  }

  aborted(reason: CallAbort): void {
    if (this.ended) return;
    if (reason === 'failed') this.notMetered('stream_failed');
    else this.finish('disconnected');
  }

  private requestHeaders(headers: HeaderEntry[]): void {
    if (this.meter || this.ended) return;
    const read = readRequestHeaders(headers);
    if (typeof read === 'string') {
      if (read !== 'no_identity') this.deps.logger.warn({ event: 'ext_proc_unmetered', reason: read }, 'usage: answer not metered');
      this.notMetered(read);
      this.call.end(OK);
      return;
    }
    this.meter = new ResponseMeter(read, this.deps.clock);
    if (this.requestSize !== undefined) this.meter.requestSize(this.requestSize);
    if (this.deps.tracing) this.span = this.deps.tracing.start(this.call.metadata, headers, read);
  }

  private responseHeaders(headers: HeaderEntry[], endOfStream: boolean): void {
    const meter = this.meter;
    if (!meter) {
      // The first message is the answer: ext_authz refused the request (its local reply passes this filter too).
      this.notMetered('no_identity');
      this.call.end(OK);
      return;
    }
    if (this.ended) return;
    let status = 0;
    let contentType: string | undefined;
    let contentEncoding: string | undefined;
    for (const header of headers) {
      if (header.key === ':status') status = parseStatus(headerText(header));
      else if (header.key === 'content-type') contentType = headerText(header);
      else if (header.key === 'content-encoding') contentEncoding = headerText(header);
    }
    const readsBody = meter.responseHeaders({ status, contentType, contentEncoding });
    if (!readsBody || endOfStream) this.finish('complete');
  }

  private responseBody(body: Buffer, endOfStream: boolean): void {
    if (!this.meter || this.ended) return;
    this.bodyBytes += body.length;
    this.meter.responseBody(body);
    if (endOfStream) this.finish('complete');
  }

  private readAttributes(attributes: Map<string, Map<string, AttributeValue>>): void {
    const size = attributes.get(ATTRIBUTES_KEY)?.get(REQUEST_SIZE_ATTRIBUTE);
    if (typeof size !== 'number') return;
    if (this.meter) this.meter.requestSize(size);
    else this.requestSize = size;
  }

  /** The answer is over: its one record goes to the sink; a complete one also ends the stream. */
  private finish(delivery: MeteredResponse['delivery']): void {
    const meter = this.meter;
    if (!meter) {
      // Ended before its request headers: nobody to meter against.
      this.notMetered('no_identity');
      return;
    }
    if (this.ended) return;
    this.ended = true;
    const record = meter.finish(delivery);
    if (this.span) this.deps.tracing!.finish(this.span, record);
    const outcome: MeteringOutcome = record.outcome.kind === 'free' ? 'no_usage' : record.outcome.usage.estimated ? 'estimated' : 'usage';
    this.deps.metrics?.streamEnded(
      record.family,
      outcome,
      delivery,
      record.outcome.kind === 'free' ? record.outcome.reason : undefined,
      this.messages,
      this.bodyBytes,
    );
    if (record.outcome.kind === 'metered' && record.outcome.usage.malformed !== undefined) {
      const reason = record.outcome.usage.malformed;
      this.deps.metrics?.malformedUsage(record.family, reason);
      // Ids and the broken relation only: never the body, whose text is the customer's.
      this.deps.logger.warn(
        { event: 'ext_proc_malformed_usage', reason, requestId: record.requestId, accountId: record.accountId, family: record.family },
        'usage: the upstream reported usage that contradicts itself; the estimate is charged',
      );
    }
    try {
      this.deps.sink.record(record);
    } catch (error) {
      this.deps.logger.error({ err: error, requestId: record.requestId }, 'usage: the metered answer could not be handed over');
    }
    if (delivery === 'complete') this.call.end(OK);
  }

  private notMetered(reason: NotMeteredReason): void {
    if (this.ended) return;
    this.ended = true;
    this.span?.end();
    const request = this.meter?.request;
    if (reason === 'malformed_message' || reason === 'stream_failed') {
      this.deps.logger.warn(
        { event: 'ext_proc_unmetered', reason, ...(request ? { requestId: request.requestId, accountId: request.accountId } : {}) },
        'usage: ext_proc stream failed, answer not metered',
      );
    }
    this.deps.metrics?.streamEnded(request?.family ?? 'unknown', 'not_metered', 'disconnected', reason, this.messages, this.bodyBytes);
  }
}

/** The header's value: raw_value as current Envoy sends it, else value. */
function headerText(header: HeaderEntry): string {
  return header.rawValue.length > 0 ? header.rawValue.toString('utf8') : header.value;
}

function parseStatus(text: string): number {
  return /^[1-9]\d\d$/.test(text) ? Number(text) : 0;
}

const IDENTITY_KEYS: ReadonlySet<string> = new Set([
  IDENTITY_HEADERS.accountId,
  IDENTITY_HEADERS.keyId,
  IDENTITY_HEADERS.keyPrefix,
  IDENTITY_HEADERS.routeFamily,
  HOLD_HEADER,
  'x-request-id',
  ':method',
  ':path',
]);

/** The identified request, or why there is none. */
function readRequestHeaders(headers: HeaderEntry[]): MeteredRequest | NotMeteredReason {
  const values = new Map<string, string>();
  let repeated = false;
  for (const header of headers) {
    if (!IDENTITY_KEYS.has(header.key)) continue;
    if (values.has(header.key)) repeated = true;
    values.set(header.key, headerText(header));
  }
  const accountId = values.get(IDENTITY_HEADERS.accountId);
  const keyId = values.get(IDENTITY_HEADERS.keyId);
  const keyPrefix = values.get(IDENTITY_HEADERS.keyPrefix);
  const family = values.get(IDENTITY_HEADERS.routeFamily);
  if (accountId === undefined && keyId === undefined && keyPrefix === undefined && family === undefined) return 'no_identity';
  if (repeated || !isId(accountId) || !isId(keyId) || !isId(keyPrefix) || family === undefined || !METERABLE_FAMILIES.has(family)) {
    return 'invalid_identity';
  }
  const requestId = values.get('x-request-id');
  if (!isId(requestId)) return 'no_request_id';
  // Set by ext_authz alone (removed wherever it placed none). One it could not have written is no hold: the answer is
  // metered all the same, and the hold it names, if any, lapses.
  const holdText = values.get(HOLD_HEADER);
  const hold = holdText === undefined ? undefined : parsePlacedHold(holdText);
  const rawPath = values.get(':path') ?? '';
  const query = rawPath.indexOf('?');
  return {
    requestId,
    accountId,
    keyId,
    keyPrefix,
    family: family as RouteFamily,
    ...(hold ? { hold } : {}),
    method: values.get(':method') ?? '',
    path: query === -1 ? rawPath : rawPath.slice(0, query),
  };
}

function isId(value: string | undefined): value is string {
  return value !== undefined && value.length <= MAX_ID_LENGTH && PRINTABLE_WORD.test(value);
}
