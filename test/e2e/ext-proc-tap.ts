/**
 * TEST CODE, not product: Envoy's `envoy.filters.http.ext_proc` HTTP filter
 * in observability mode, as envoy.yaml configures it (the settings are READ
 * FROM envoy.yaml), for the Envoy-faithful front (envoy-front.ts). The client
 * is built from Envoy's official protos (test/support/ext-proc-protocol.ts).
 *
 * What is mirrored, from Envoy's ext_proc.cc (Filter::sendHeadersInObservabilityMode,
 * sendDataInObservabilityMode, onTrailers, onDestroy, deferredCloseStream)
 * and client_impl.cc (ExternalProcessorStreamImpl::close):
 *  - One ExternalProcessor/Process bidi stream per HTTP request, opened when
 *    the first message is sent (openStream), on one shared channel (Envoy's
 *    connection pool for the cluster).
 *  - Messages, each with observability_mode=true and an (empty)
 *    metadata_context: request_headers (if SEND), request_body chunks (only
 *    in STREAMED body mode; observability mode sends no other body mode),
 *    request_trailers (if SEND and the request has trailers), response_headers
 *    (if SEND), response_body chunks (STREAMED), response_trailers (if SEND
 *    and the response has trailers). `end_of_stream` is set on the headers of
 *    a message without body and on the last body chunk; when trailers follow,
 *    no body chunk has it. Headers are a HeaderMap of lower-case keys with only
 *    `raw_value` set, pseudo-headers first, one entry per field line.
 *  - request_attributes / response_attributes are evaluated and sent in
 *    attributes["envoy.filters.http.ext_proc"] with the FIRST message of
 *    each direction only (addAttributes).
 *  - Send and go: nothing waits for the processor; its answers are read and
 *    ignored; no message timeout.
 *  - failure_mode_allow (fail open): if the stream cannot be opened or ends,
 *    with an error or OK, nothing more is sent on it and the HTTP exchange
 *    goes on untouched (processing_complete_).
 *  - When the HTTP stream is destroyed (the answer finished, or the client or
 *    upstream went away: Envoy's onDestroy), the gRPC stream stays open for
 *    deferred_close_timeout, then is closed as Envoy's close() does it:
 *    half-close, then reset (the processor sees its call end, then a
 *    cancellation). A processor that ends the stream first ends it. Nothing is
 *    sent when the client disconnects: the processor has what passed, without
 *    any end_of_stream, and learns of the end only from that close.
 * Body chunks are what the front received in one read from the upstream (as
 * Envoy's HTTP/1 codec dispatches a read), optionally re-split by
 * `splitBodyChunk` to test other boundaries.
 *
 * Not mirrored: Envoy's side-stream flow control (runtime guard
 * envoy.reloadable_features.grpc_side_stream_flow_control, on in current
 * Envoy), which pauses reading from the upstream while the gRPC stream to a
 * processor that stopped reading is above its buffer's high watermark. Here
 * such messages queue in memory and the answer is never slowed.
 */
import * as fs from 'node:fs';

import * as grpc from '@grpc/grpc-js';
import { parse } from 'yaml';

import { EXT_PROC_ATTRIBUTES_KEY, externalProcessorService } from '../support/ext-proc-protocol';
import { durationMs, ENVOY_YAML } from './authz-cluster';

export type HeaderSendMode = 'SEND' | 'SKIP';
/** What observability mode sends: STREAMED bodies, or nothing (NONE, and every other mode). */
export type ObservedBodyMode = 'STREAMED' | 'NONE';

export interface ExtProcSettings {
  clusterName: string;
  processingMode: {
    requestHeaderMode: HeaderSendMode;
    responseHeaderMode: HeaderSendMode;
    requestBodyMode: ObservedBodyMode;
    responseBodyMode: ObservedBodyMode;
    requestTrailerMode: HeaderSendMode;
    responseTrailerMode: HeaderSendMode;
  };
  requestAttributes: string[];
  responseAttributes: string[];
  deferredCloseTimeoutMs: number;
}

export const EXT_PROC_FILTER_NAME = 'envoy.filters.http.ext_proc';
/** Envoy's default deferred_close_timeout (DEFAULT_DEFERRED_CLOSE_TIMEOUT_MS). */
export const DEFAULT_DEFERRED_CLOSE_TIMEOUT_MS = 5000;

/** The attributes evaluated here, as Envoy's CEL context defines them (filters/common/expr/context.cc). */
const SUPPORTED_ATTRIBUTES = new Set(['request.size', 'request.id', 'request.path', 'request.url_path', 'request.method']);

interface ExtProcYaml {
  observability_mode?: boolean;
  failure_mode_allow?: boolean;
  grpc_service?: { envoy_grpc?: { cluster_name?: string } };
  processing_mode?: Record<string, string | undefined>;
  request_attributes?: string[];
  response_attributes?: string[];
  deferred_close_timeout?: string;
}

function findFilter(node: unknown, name: string): ExtProcYaml | undefined {
  if (Array.isArray(node)) {
    for (const item of node) {
      const found = findFilter(item, name);
      if (found) return found;
    }
  } else if (node && typeof node === 'object') {
    const record = node as { name?: unknown; typed_config?: unknown };
    if (record.name === name && record.typed_config && typeof record.typed_config === 'object') return record.typed_config;
    for (const value of Object.values(record)) {
      const found = findFilter(value, name);
      if (found) return found;
    }
  }
  return undefined;
}

/**
 * The ext_proc filter as envoy.yaml configures it, with Envoy's defaults for what it leaves out. The front
 * mirrors observability mode and fail-open only: a file that says otherwise is refused, not approximated.
 */
export function extProcSettingsFromEnvoyYaml(file = ENVOY_YAML): ExtProcSettings {
  const bootstrap = parse(fs.readFileSync(file, 'utf8')) as { static_resources?: { listeners?: unknown } };
  const filter = findFilter(bootstrap.static_resources?.listeners, EXT_PROC_FILTER_NAME);
  if (!filter) throw new Error(`${file}: no ${EXT_PROC_FILTER_NAME} filter`);
  if (filter.observability_mode !== true) throw new Error(`${file}: the front mirrors ext_proc in observability_mode only`);
  if (filter.failure_mode_allow !== true) throw new Error(`${file}: the front mirrors ext_proc with failure_mode_allow: true only`);
  const clusterName = filter.grpc_service?.envoy_grpc?.cluster_name;
  if (!clusterName) throw new Error(`${file}: the ext_proc filter has no envoy_grpc cluster`);
  const mode = filter.processing_mode ?? {};
  const headerMode = (key: string, unset: HeaderSendMode): HeaderSendMode => {
    const value = mode[key] ?? 'DEFAULT';
    if (value === 'DEFAULT') return unset;
    if (value === 'SEND' || value === 'SKIP') return value;
    throw new Error(`${file}: processing_mode.${key} ${value} is not a HeaderSendMode`);
  };
  const bodyMode = (key: string): ObservedBodyMode => (mode[key] === 'STREAMED' ? 'STREAMED' : 'NONE');
  const attributes = (list: string[] | undefined, what: string): string[] => {
    for (const name of list ?? [])
      if (!SUPPORTED_ATTRIBUTES.has(name)) throw new Error(`${file}: ${what} ${name} is not evaluated by the front`);
    return [...(list ?? [])];
  };
  return {
    clusterName,
    processingMode: {
      requestHeaderMode: headerMode('request_header_mode', 'SEND'),
      responseHeaderMode: headerMode('response_header_mode', 'SEND'),
      requestBodyMode: bodyMode('request_body_mode'),
      responseBodyMode: bodyMode('response_body_mode'),
      requestTrailerMode: headerMode('request_trailer_mode', 'SKIP'),
      responseTrailerMode: headerMode('response_trailer_mode', 'SKIP'),
    },
    requestAttributes: attributes(filter.request_attributes, 'request_attributes'),
    responseAttributes: attributes(filter.response_attributes, 'response_attributes'),
    deferredCloseTimeoutMs:
      filter.deferred_close_timeout === undefined
        ? DEFAULT_DEFERRED_CLOSE_TIMEOUT_MS
        : durationMs(filter.deferred_close_timeout, 'deferred_close_timeout'),
  };
}

/** Header entries in Envoy's order: lower-case keys, pseudo-headers first, one entry per field line. */
export type HeaderEntries = readonly (readonly [string, string])[];

/** What the attributes are evaluated from, read when a direction's first message is sent. */
export interface AttributeSource {
  /** The request headers as Envoy holds them then (after ext_authz's mutations), pseudo-headers included. */
  requestHeaders: HeaderEntries;
  /** Request body bytes received from the client so far (Envoy's StreamInfo::bytesReceived). */
  requestBodyBytes: number;
}

export interface ExtProcTapOptions {
  /** host:port of the external processor: gateway-authz's gRPC port, or a stub. */
  address: string;
  /** Default: as envoy.yaml configures the filter. */
  settings?: ExtProcSettings;
  /** Re-splits each body chunk before it is sent (boundary tests); default: each read as it passed. */
  splitBodyChunk?: (chunk: Buffer) => Buffer[];
}

interface ProcessClient extends grpc.Client {
  Process(metadata?: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<object, object>;
}

export interface ExtProcTapStats {
  /** Side streams opened (one per HTTP request that sent anything). */
  opened: number;
  /** Side streams that failed (could not open, or ended with an error): their requests went on unmetered. */
  failed: number;
  /** Side streams closed by the deferred close (the processor had not ended them). */
  deferredCloses: number;
}

/** The filter for a front: one shared channel, one side stream per HTTP request. */
export class ExtProcTap {
  readonly settings: ExtProcSettings;
  readonly stats: ExtProcTapStats = { opened: 0, failed: 0, deferredCloses: 0 };
  private readonly client: ProcessClient;
  private readonly open = new Set<ExtProcSideStream>();
  private closed = false;

  constructor(private readonly options: ExtProcTapOptions) {
    this.settings = options.settings ?? extProcSettingsFromEnvoyYaml();
    const Client = externalProcessorService().client;
    this.client = new Client(options.address, grpc.credentials.createInsecure()) as unknown as ProcessClient;
  }

  /** The filter instance of one HTTP request; its gRPC stream opens with its first message. */
  exchange(attributes: () => AttributeSource): ExtProcSideStream {
    return new ExtProcSideStream(this, attributes, this.options.splitBodyChunk ?? ((chunk) => [chunk]));
  }

  /** @internal */
  startCall(stream: ExtProcSideStream): grpc.ClientDuplexStream<object, object> | undefined {
    if (this.closed) return undefined;
    this.stats.opened += 1;
    this.open.add(stream);
    return this.client.Process(new grpc.Metadata());
  }

  /** @internal */
  forget(stream: ExtProcSideStream): void {
    this.open.delete(stream);
  }

  /** Envoy going away: every side stream still open is reset at once. */
  close(): void {
    this.closed = true;
    for (const stream of [...this.open]) stream.reset();
    this.client.close();
  }
}

/** One HTTP request's ext_proc filter instance. */
export class ExtProcSideStream {
  private call: grpc.ClientDuplexStream<object, object> | undefined;
  /** Envoy's processing_complete_: the stream ended or failed, nothing more is sent. */
  private complete = false;
  private requestAttributesSent = false;
  private responseAttributesSent = false;
  private deferredClose: NodeJS.Timeout | undefined;

  constructor(
    private readonly tap: ExtProcTap,
    private readonly attributeSource: () => AttributeSource,
    private readonly splitBodyChunk: (chunk: Buffer) => Buffer[],
  ) {}

  private get mode(): ExtProcSettings['processingMode'] {
    return this.tap.settings.processingMode;
  }

  requestHeaders(headers: HeaderEntries, endOfStream: boolean): void {
    if (this.mode.requestHeaderMode !== 'SEND') return;
    this.send({ request_headers: { headers: headerMap(headers), end_of_stream: endOfStream }, ...this.attributes('request') });
  }

  requestBody(chunk: Buffer, endOfStream: boolean): void {
    if (this.mode.requestBodyMode !== 'STREAMED') return;
    this.sendBody('request_body', chunk, endOfStream);
  }

  requestTrailers(trailers: HeaderEntries): void {
    if (this.mode.requestTrailerMode !== 'SEND') return;
    this.send({ request_trailers: { trailers: headerMap(trailers) }, ...this.attributes('request') });
  }

  responseHeaders(headers: HeaderEntries, endOfStream: boolean): void {
    if (this.mode.responseHeaderMode !== 'SEND') return;
    this.send({ response_headers: { headers: headerMap(headers), end_of_stream: endOfStream }, ...this.attributes('response') });
  }

  responseBody(chunk: Buffer, endOfStream: boolean): void {
    if (this.mode.responseBodyMode !== 'STREAMED') return;
    this.sendBody('response_body', chunk, endOfStream);
  }

  responseTrailers(trailers: HeaderEntries): void {
    if (this.mode.responseTrailerMode !== 'SEND') return;
    this.send({ response_trailers: { trailers: headerMap(trailers) }, ...this.attributes('response') });
  }

  /** Envoy's onDestroy: the HTTP stream is over (answered, or reset); close the gRPC stream after deferred_close_timeout. */
  httpStreamDestroyed(): void {
    this.complete = true;
    if (this.call === undefined || this.deferredClose !== undefined) return;
    this.deferredClose = setTimeout(() => {
      this.tap.stats.deferredCloses += 1;
      this.reset();
    }, this.tap.settings.deferredCloseTimeoutMs);
  }

  /** Envoy's ExternalProcessorStreamImpl::close(): half-close, then reset. */
  reset(): void {
    clearTimeout(this.deferredClose);
    this.complete = true;
    const call = this.call;
    if (call === undefined) return;
    this.tap.forget(this);
    call.end();
    // The half-close goes out first (Envoy defers its reset until the end of stream is sent).
    setImmediate(() => call.cancel());
  }

  private sendBody(kind: 'request_body' | 'response_body', chunk: Buffer, endOfStream: boolean): void {
    const pieces = chunk.length === 0 ? [chunk] : this.splitBodyChunk(chunk).filter((piece) => piece.length > 0);
    pieces.forEach((piece, i) => {
      const last = i === pieces.length - 1;
      this.send({
        [kind]: { body: piece, end_of_stream: endOfStream && last },
        ...this.attributes(kind.startsWith('request') ? 'request' : 'response'),
      });
    });
  }

  private attributes(direction: 'request' | 'response'): { attributes?: object } {
    const names = direction === 'request' ? this.tap.settings.requestAttributes : this.tap.settings.responseAttributes;
    const sent = direction === 'request' ? this.requestAttributesSent : this.responseAttributesSent;
    if (names.length === 0 || sent) return {};
    if (direction === 'request') this.requestAttributesSent = true;
    else this.responseAttributesSent = true;
    const source = this.attributeSource();
    const fields: Record<string, object> = {};
    for (const name of names) {
      const value = evaluateAttribute(name, source);
      if (value === undefined) continue;
      fields[name] = typeof value === 'number' ? { numberValue: value } : { stringValue: value };
    }
    return { attributes: { [EXT_PROC_ATTRIBUTES_KEY]: { fields } } };
  }

  private send(message: object): void {
    if (this.complete) return;
    if (this.call === undefined) {
      this.call = this.tap.startCall(this);
      if (this.call === undefined) {
        this.complete = true;
        return;
      }
      const call = this.call;
      // Observability mode ignores every answer, but reads them.
      call.on('data', () => undefined);
      call.on('error', () => {
        // Fail open: the HTTP exchange goes on; this stream is done.
        if (!this.complete) this.tap.stats.failed += 1;
        this.complete = true;
        clearTimeout(this.deferredClose);
        this.tap.forget(this);
      });
      call.on('status', (status: grpc.StatusObject) => {
        // The processor ended the stream (OK, or an error): nothing more is sent, no deferred close is needed.
        if (status.code !== grpc.status.OK && status.code !== grpc.status.CANCELLED && !this.complete) this.tap.stats.failed += 1;
        this.complete = true;
        clearTimeout(this.deferredClose);
        this.tap.forget(this);
      });
    }
    this.call.write({ ...message, metadata_context: {}, observability_mode: true });
  }
}

function headerMap(headers: HeaderEntries): object {
  return { headers: headers.map(([key, value]) => ({ key, raw_value: Buffer.from(value, 'utf8') })) };
}

function firstHeader(headers: HeaderEntries, name: string): string | undefined {
  return headers.find(([key]) => key === name)?.[1];
}

/** Envoy's CEL attribute values (filters/common/expr/context.cc, RequestLookupValues). */
function evaluateAttribute(name: string, source: AttributeSource): number | string | undefined {
  const headers = source.requestHeaders;
  switch (name) {
    case 'request.size': {
      // content-length when the request has one (an unparsable one gives no value), else the body bytes received.
      const length = firstHeader(headers, 'content-length');
      if (length === undefined) return source.requestBodyBytes;
      return /^\d+$/.test(length.trim()) ? Number(length.trim()) : undefined;
    }
    case 'request.id':
      return firstHeader(headers, 'x-request-id');
    case 'request.path':
      return firstHeader(headers, ':path');
    case 'request.url_path':
      return firstHeader(headers, ':path')?.split('?', 1)[0];
    case 'request.method':
      return firstHeader(headers, ':method');
    default:
      return undefined;
  }
}
