import * as http from 'node:http';
import * as path from 'node:path';
import { gunzipSync } from 'node:zlib';
import * as protobuf from 'protobufjs';

/**
 * An OTLP/HTTP trace receiver for tests: POST /v1/traces with a
 * protobuf-encoded ExportTraceServiceRequest, decoded with the official
 * opentelemetry-proto files (test/support/otlp-proto/, vendored verbatim),
 * answered with an empty ExportTraceServiceResponse as a collector does.
 */
const PROTO_ROOT = path.join(__dirname, 'otlp-proto');
const TRACES_PATH = '/v1/traces';

export type AttributeValue = string | number | boolean;

export interface ReceivedSpan {
  serviceName: string;
  name: string;
  /** Lower-case hex, as traceparent spells them. */
  traceId: string;
  spanId: string;
  /** '' for a root span. */
  parentSpanId: string;
  /** OTLP's SpanKind number: 2 SERVER, 3 CLIENT. */
  kind: number;
  attributes: Record<string, AttributeValue>;
  links: { traceId: string; spanId: string; attributes: Record<string, AttributeValue> }[];
  /** Status code: 0 unset, 1 ok, 2 error. */
  statusCode: number;
}

export interface OtlpReceiver {
  /** Base endpoint, for OTEL_EXPORTER_OTLP_ENDPOINT (the exporter adds /v1/traces). */
  endpoint: string;
  spans: ReceivedSpan[];
  /** Resolves with the spans once `predicate` holds of all received so far; rejects after `timeoutMs`. */
  waitFor(predicate: (spans: ReceivedSpan[]) => boolean, timeoutMs?: number): Promise<ReceivedSpan[]>;
  close(): Promise<void>;
}

let root: protobuf.Root | undefined;
function otlpRoot(): protobuf.Root {
  if (!root) {
    root = new protobuf.Root();
    root.resolvePath = (_origin, target) => path.join(PROTO_ROOT, target);
    root.loadSync('opentelemetry/proto/collector/trace/v1/trace_service.proto', { keepCase: true });
  }
  return root;
}

interface KeyValue {
  key: string;
  value?: { string_value?: string; int_value?: string | number; bool_value?: boolean; double_value?: number };
}

function attributesOf(list: KeyValue[] | undefined): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {};
  for (const { key, value } of list ?? []) {
    if (!value) continue;
    if (value.string_value !== undefined) out[key] = value.string_value;
    else if (value.int_value !== undefined) out[key] = Number(value.int_value);
    else if (value.bool_value !== undefined) out[key] = value.bool_value;
    else if (value.double_value !== undefined) out[key] = value.double_value;
  }
  return out;
}

const hex = (bytes: Buffer | undefined) => (bytes ? Buffer.from(bytes).toString('hex') : '');

export function decodeExportTraceServiceRequest(body: Buffer): ReceivedSpan[] {
  const type = otlpRoot().lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest');
  const message = type.toObject(type.decode(body), { longs: String, defaults: false }) as {
    resource_spans?: {
      resource?: { attributes?: KeyValue[] };
      scope_spans?: {
        spans?: {
          name: string;
          trace_id: Buffer;
          span_id: Buffer;
          parent_span_id?: Buffer;
          kind?: number;
          attributes?: KeyValue[];
          links?: { trace_id: Buffer; span_id: Buffer; attributes?: KeyValue[] }[];
          status?: { code?: number };
        }[];
      }[];
    }[];
  };
  const spans: ReceivedSpan[] = [];
  for (const resourceSpans of message.resource_spans ?? []) {
    const serviceName = String(attributesOf(resourceSpans.resource?.attributes)['service.name'] ?? '');
    for (const scope of resourceSpans.scope_spans ?? []) {
      for (const span of scope.spans ?? []) {
        spans.push({
          serviceName,
          name: span.name,
          traceId: hex(span.trace_id),
          spanId: hex(span.span_id),
          parentSpanId: hex(span.parent_span_id),
          kind: span.kind ?? 0,
          attributes: attributesOf(span.attributes),
          links: (span.links ?? []).map((link) => ({
            traceId: hex(link.trace_id),
            spanId: hex(link.span_id),
            attributes: attributesOf(link.attributes),
          })),
          statusCode: span.status?.code ?? 0,
        });
      }
    }
  }
  return spans;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const waiters = new Set<() => void>();
  const responseType = otlpRoot().lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse');
  const emptyResponse = Buffer.from(responseType.encode(responseType.create({})).finish());
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      if (request.method !== 'POST' || request.url !== TRACES_PATH || request.headers['content-type'] !== 'application/x-protobuf') {
        response.writeHead(415).end();
        return;
      }
      let body = Buffer.concat(chunks);
      if (request.headers['content-encoding'] === 'gzip') body = gunzipSync(body);
      try {
        spans.push(...decodeExportTraceServiceRequest(body));
      } catch {
        response.writeHead(400).end();
        return;
      }
      response.writeHead(200, { 'content-type': 'application/x-protobuf' }).end(emptyResponse);
      for (const wake of waiters) wake();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address() as { port: number };
  return {
    endpoint: `http://127.0.0.1:${address.port}`,
    spans,
    waitFor(predicate, timeoutMs = 15_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (!predicate(spans)) return;
          cleanup();
          resolve(spans);
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(new Error(`the spans awaited did not arrive; received: ${JSON.stringify(spans.map((s) => [s.name, s.traceId]))}`));
        }, timeoutMs);
        const cleanup = () => {
          clearTimeout(timer);
          waiters.delete(check);
        };
        waiters.add(check);
        check();
      });
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
