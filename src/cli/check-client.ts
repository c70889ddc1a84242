import { randomBytes, randomUUID } from 'node:crypto';
// Types only at the top: grpc-js and proto-loader are loaded by sendCheck, so that every other command and `--help`
// (which load this file for the constants above the options) do not wait for them.
import type * as grpc from '@grpc/grpc-js';
import type * as protoLoader from '@grpc/proto-loader';
import type { HeaderLine } from './option-parsers';

/**
 * `gateway-authz check`'s side of the wire: builds the CheckRequest Envoy's
 * ext_authz filter would send for one HTTP request, and sends it over gRPC
 * with the project's own protos.
 */

/** Envoy's listener in envoy.yaml: what a client on the same machine sends as Host. */
export const DEFAULT_AUTHORITY = 'localhost:8080';

/**
 * How long `check` waits for a connection and an answer together, unless `--deadline` says otherwise. Generous because
 * `check` is a diagnostic run by hand or in scripts, often against a service that has just started on a busy machine;
 * Envoy's own deadline (envoy.yaml) is what production Checks meet.
 */
export const CHECK_DEADLINE_MS = 10_000;

export interface HttpRequestInput {
  method: string;
  /** The request target with its query string, as the client sent it. */
  path: string;
  headers: readonly HeaderLine[];
  /** x-request-id when no `x-request-id` header is given; Envoy generates one otherwise. */
  requestId?: string;
  /** The caller's address Envoy reports (attributes.source); absent: 127.0.0.1, a client on the same host. */
  sourceAddress?: string;
}

/** What Envoy would see of the request: the values `check` echoes and sends. */
export interface EnvoyView {
  method: string;
  path: string;
  authority: string;
  requestId: string;
  /** Lower-case names; repeated headers comma-joined, as Envoy joins them. */
  headers: Record<string, string>;
  sourceAddress: string;
}

/**
 * The request as Envoy's HTTP connection manager hands it to ext_authz:
 * HTTP/1.1 `Host` becomes `:authority`; x-request-id is the client's or a
 * new UUID; x-forwarded-proto is added.
 */
export function envoyViewOf(input: HttpRequestInput): EnvoyView {
  const given: Record<string, string> = {};
  for (const { name, value } of input.headers) {
    const earlier = given[name];
    given[name] = earlier === undefined ? value : `${earlier},${value}`;
  }
  const { host, ...headers } = given;
  const requestId = headers['x-request-id'] ?? input.requestId ?? randomUUID();
  return {
    method: input.method,
    path: input.path,
    authority: host ?? DEFAULT_AUTHORITY,
    requestId,
    headers: { ...headers, 'x-forwarded-proto': headers['x-forwarded-proto'] ?? 'http', 'x-request-id': requestId },
    sourceAddress: input.sourceAddress ?? '127.0.0.1',
  };
}

/** The CheckRequest message (proto-loader field names) for a request as Envoy sees it. */
export function checkRequestFor(view: EnvoyView, now = Date.now()): object {
  return {
    attributes: {
      source: { address: { socket_address: { address: view.sourceAddress, port_value: 0 } } },
      request: {
        time: { seconds: String(Math.floor(now / 1000)), nanos: (now % 1000) * 1_000_000 },
        http: {
          // Envoy's stream id, not x-request-id.
          id: randomBytes(8).readBigUInt64BE().toString(),
          method: view.method,
          headers: { ':authority': view.authority, ':path': view.path, ':method': view.method, ':scheme': 'http', ...view.headers },
          path: view.path,
          host: view.authority,
          scheme: 'http',
          protocol: 'HTTP/1.1',
          size: '0',
        },
      },
    },
  };
}

interface WireHeader {
  header?: { key?: string; value?: string; raw_value?: Uint8Array } | null;
}

/** The CheckResponse fields `check` reads, as proto-loader decodes them (enums as numbers). */
export interface CheckResponseMessage {
  status?: { code?: number; message?: string } | null;
  denied_response?: { status?: { code?: number } | null; headers?: WireHeader[]; body?: string } | null;
  ok_response?: {
    headers?: WireHeader[];
    headers_to_remove?: string[];
    query_parameters_to_remove?: string[];
    response_headers_to_add?: WireHeader[];
  } | null;
}

/** A `header_value_option` list as `[name, value]` pairs, in order. */
export function headerPairs(options: readonly WireHeader[] | undefined): [string, string][] {
  return (options ?? []).flatMap(({ header }): [string, string][] => {
    if (!header?.key) return [];
    const raw = header.raw_value && header.raw_value.length > 0 ? Buffer.from(header.raw_value).toString('utf8') : undefined;
    return [[header.key, header.value || raw || '']];
  });
}

/** The service could not be reached before the deadline: no decision was made. */
export class CheckUnreachableError extends Error {}

/** The service answered Check with a gRPC error instead of a CheckResponse, or not at all before the deadline. */
export class CheckRpcError extends Error {
  constructor(
    readonly code: grpc.status,
    readonly details: string,
    target: string,
    deadlineMs: number,
    statusNames: typeof grpc.status,
  ) {
    const status = `gRPC status ${code} ${statusNames[code] ?? 'UNKNOWN'}`;
    super(
      code === statusNames.DEADLINE_EXCEEDED
        ? `the Check service at ${target} accepted the connection but did not answer within ${deadlineMs / 1000} s (${status})`
        : `the Check service at ${target} answered ${status}: ${details || '(no details)'}`,
    );
  }
}

let checkMethod: protoLoader.MethodDefinition<object, object> | undefined;

/** Check's (de)serializers from proto/, decoding enums as numbers: the HTTP status is wanted as 401, not "Unauthorized". */
async function loadCheckMethod(): Promise<protoLoader.MethodDefinition<object, object>> {
  if (checkMethod) return checkMethod;
  const [protoLoader, { AUTHORIZATION_SERVICE_NAME, EXTERNAL_AUTH_PROTO, LOADER_OPTIONS }] = await Promise.all([
    import('@grpc/proto-loader'),
    import('../check/proto-loading'),
  ]);
  const definition = protoLoader.loadSync(EXTERNAL_AUTH_PROTO, { ...LOADER_OPTIONS, enums: Number });
  const service = definition[AUTHORIZATION_SERVICE_NAME];
  const method = service && 'Check' in service ? service.Check : undefined;
  if (!method) throw new Error(`${AUTHORIZATION_SERVICE_NAME}/Check is missing from ${EXTERNAL_AUTH_PROTO}`);
  checkMethod = method;
  return method;
}

/**
 * Sends one Check to `target` (host:port, plaintext) and answers the
 * CheckResponse. Connecting and answering share one deadline. Throws
 * CheckUnreachableError when no connection is made in time, CheckRpcError
 * when the service answers with a gRPC error.
 */
export async function sendCheck(target: string, request: object, deadlineMs = CHECK_DEADLINE_MS): Promise<CheckResponseMessage> {
  const [method, grpc] = await Promise.all([loadCheckMethod(), import('@grpc/grpc-js')]);
  const deadline = Date.now() + deadlineMs;
  const client = new grpc.Client(target, grpc.credentials.createInsecure());
  try {
    await new Promise<void>((resolve, reject) =>
      client.waitForReady(deadline, (error) =>
        error
          ? reject(
              new CheckUnreachableError(
                `cannot reach the Check service at ${target}: no connection within ${deadlineMs / 1000} s ` +
                  '(is gateway-authz serve running there? give --grpc-url host:port, or set GRPC_PORT)',
              ),
            )
          : resolve(),
      ),
    );
    return await new Promise<CheckResponseMessage>((resolve, reject) => {
      client.makeUnaryRequest(
        method.path,
        method.requestSerialize,
        method.responseDeserialize,
        request,
        new grpc.Metadata(),
        { deadline },
        (error, response) => {
          if (error) reject(new CheckRpcError(error.code, error.details, target, deadlineMs, grpc.status));
          else resolve(response ?? {});
        },
      );
    });
  } finally {
    client.close();
  }
}
