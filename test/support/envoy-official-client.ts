/**
 * A gRPC ext_authz client built ONLY from Envoy's official protos (the copy
 * bundled in @grpc/grpc-js-xds/deps), never from our trimmed proto/ copy, so
 * integration tests talk to our server the way Envoy does.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import * as path from 'node:path';

import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

import { recordCapture } from './secret-scan';

/** <node_modules>/@grpc/grpc-js-xds/deps */
export const ENVOY_OFFICIAL_DEPS_DIR = path.join(path.dirname(require.resolve('@grpc/grpc-js-xds/package.json')), 'deps');

/** Include dirs needed to load Envoy's official protos (PGV/udpa/xds imports). */
export const OFFICIAL_INCLUDE_DIRS: string[] = ['envoy-api', 'googleapis', 'xds', 'protoc-gen-validate'].map((d) =>
  path.join(ENVOY_OFFICIAL_DEPS_DIR, d),
);

export const OFFICIAL_EXTERNAL_AUTH_PROTO = 'envoy/service/auth/v3/external_auth.proto';

export const OFFICIAL_LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: OFFICIAL_INCLUDE_DIRS,
};

/** Check as Envoy's official protos define it: requests serialized as Envoy sends them, answers read as Envoy reads them. */
export function officialCheckMethod(): grpc.MethodDefinition<object, object> {
  const service = protoLoader.loadSync(OFFICIAL_EXTERNAL_AUTH_PROTO, OFFICIAL_LOADER_OPTIONS)[
    'envoy.service.auth.v3.Authorization'
  ] as grpc.ServiceDefinition;
  return service.Check! as grpc.MethodDefinition<object, object>;
}

/** A HeaderValueOption as the official protos decode it (keepCase, enums as strings, defaults). */
export interface OfficialHeaderOption {
  header: { key: string; value: string; raw_value: string };
  append: { value: boolean } | null;
  append_action: string;
  keep_empty_value: boolean;
}

/** A google.protobuf.Struct as decoded with oneofs: each value names its kind. */
export interface OfficialStruct {
  fields: Record<string, { kind: string; stringValue?: string; boolValue?: boolean; numberValue?: number }>;
}

/**
 * A CheckResponse as the official protos decode it. `http_response` names the oneof member that is set; the
 * other member is absent at run time (a test reads the one it expects after asserting `http_response`).
 */
export interface OfficialCheckResponse {
  status: { code: number; message: string; details: { type_url: string; value: string }[] };
  http_response: 'ok_response' | 'denied_response' | 'error_response';
  ok_response: {
    headers: OfficialHeaderOption[];
    headers_to_remove: string[];
    response_headers_to_add: OfficialHeaderOption[];
    query_parameters_to_set: { key: string; value: string }[];
    query_parameters_to_remove: string[];
    dynamic_metadata: OfficialStruct;
  };
  denied_response: OfficialDeniedResponse;
  error_response: OfficialDeniedResponse;
  dynamic_metadata: OfficialStruct;
}

export interface OfficialDeniedResponse {
  status: { code: string };
  headers: OfficialHeaderOption[];
  body: string;
}

export interface OfficialCheckClient {
  /**
   * Calls Check; rejects with the grpc.ServiceError (has .code/.details) on RPC failure.
   * Every response (deny bodies and headers, allow headers) and error joins the suite-wide secret scan.
   */
  /** `metadata`: the call's own headers, as Envoy's gRPC client adds its trace context to them. */
  check(req: object, deadlineMs?: number, metadata?: Readonly<Record<string, string>>): Promise<OfficialCheckResponse>;
  close(): void;
}

type CheckCallback = (err: grpc.ServiceError | null, res?: unknown) => void;
interface AuthorizationClient extends grpc.Client {
  Check(req: object, metadata: grpc.Metadata, options: grpc.CallOptions, cb: CheckCallback): grpc.ClientUnaryCall;
}

let cachedCtor: grpc.ServiceClientConstructor | undefined;

function authorizationClientCtor(): grpc.ServiceClientConstructor {
  if (cachedCtor === undefined) {
    const def = protoLoader.loadSync(OFFICIAL_EXTERNAL_AUTH_PROTO, OFFICIAL_LOADER_OPTIONS);
    const pkg = grpc.loadPackageDefinition(def) as { envoy?: { service?: { auth?: { v3?: { Authorization?: unknown } } } } };
    const ctor = pkg.envoy?.service?.auth?.v3?.Authorization as grpc.ServiceClientConstructor | undefined;
    if (typeof ctor !== 'function') {
      throw new Error('envoy.service.auth.v3.Authorization not found in official protos');
    }
    cachedCtor = ctor;
  }
  return cachedCtor;
}

/** Default per-call deadline; Envoy's own default is 200 ms, tests get more slack. */
export const DEFAULT_CHECK_DEADLINE_MS = 5000;

/** `options`: grpc-js channel options, e.g. `grpc.use_local_subchannel_pool` for a connection no other client shares. */
export function createOfficialCheckClient(address: string /* host:port */, options?: grpc.ChannelOptions): OfficialCheckClient {
  const Ctor = authorizationClientCtor();
  const client = new Ctor(address, grpc.credentials.createInsecure(), options) as unknown as AuthorizationClient;
  return {
    check(
      req: object,
      deadlineMs: number = DEFAULT_CHECK_DEADLINE_MS,
      metadata: Readonly<Record<string, string>> = {},
    ): Promise<OfficialCheckResponse> {
      const callMetadata = new grpc.Metadata();
      for (const [name, value] of Object.entries(metadata)) callMetadata.set(name, value);
      return new Promise((resolve, reject) => {
        client.Check(req, callMetadata, { deadline: Date.now() + deadlineMs }, (err, res) => {
          try {
            // Only the answer is recorded: the request may hold the test's own secrets.
            if (err) recordCapture('bodies', 'Check error', JSON.stringify({ code: err.code, details: err.details }));
            else recordCapture('bodies', 'CheckResponse', JSON.stringify(res));
          } catch {
            // Recording is best effort.
          }
          if (err) reject(err);
          else resolve(res as OfficialCheckResponse);
        });
      });
    },
    close(): void {
      client.close();
    },
  };
}

export interface EnvoyCheckRequestOptions {
  method?: string;
  /** Request target incl. query string, e.g. '/v1/chat?x=1'. */
  path: string;
  /** Extra request headers; keys are lower-cased. A `host` header becomes `:authority` (as in Envoy). */
  headers?: Record<string, string>;
  authority?: string;
  requestId?: string;
  scheme?: string;
  protocol?: string;
  /** Not part of Envoy's request headers: ExtAuthzPerRoute check_settings.context_extensions. */
  contextExtensions?: Record<string, string>;
  /**
   * The request body, as ext_authz's `with_request_body` sends it: a string
   * fills `body`, bytes fill `raw_body` (`pack_as_bytes: true`). Absent: no
   * body buffering (Envoy's default, and envoy.yaml's).
   */
  body?: string | Buffer;
  /** Downstream client IP (attributes.source.address). */
  sourceAddress?: string;
}

export const DEFAULT_AUTHORITY = 'gateway.example.test';

/** Shape of the plain-object CheckRequest built by envoyCheckRequest (keepCase field names). */
export interface EnvoyCheckRequest {
  attributes: {
    source: EnvoyPeer;
    destination: EnvoyPeer;
    request: {
      time: { seconds: string; nanos: number };
      http: {
        id: string;
        method: string;
        headers: Record<string, string>;
        path: string;
        host: string;
        scheme: string;
        query: string;
        fragment: string;
        size: string;
        protocol: string;
        body: string;
        raw_body?: Buffer;
      };
    };
    context_extensions: Record<string, string>;
  };
}

export interface EnvoyPeer {
  address: { socket_address: { protocol: 'TCP'; address: string; port_value: number } };
  principal: string;
}

/**
 * Builds a CheckRequest shaped like the one Envoy's HTTP ext_authz filter
 * sends: lower-case `headers` that include the pseudo-headers (:authority,
 * :method, :path with query, :scheme) plus x-forwarded-proto and x-request-id
 * added by the connection manager; `http.id` is Envoy's numeric stream id
 * (not x-request-id); `query`/`fragment` are empty (the query is in `path`);
 * `size` is '0' without a body (no body buffering), else the body's byte length.
 */
export function envoyCheckRequest(opts: EnvoyCheckRequestOptions): EnvoyCheckRequest {
  const method = (opts.method ?? 'GET').toUpperCase();
  const scheme = opts.scheme ?? 'http';
  const protocol = opts.protocol ?? 'HTTP/1.1';

  const extra: Record<string, string> = {};
  for (const [k, v] of Object.entries(opts.headers ?? {})) {
    const key = k.toLowerCase();
    // Envoy joins repeated headers with ','.
    extra[key] = key in extra ? `${extra[key]},${v}` : v;
  }
  const hostHeader = extra['host'];
  delete extra['host']; // HTTP/1.1 Host is carried as :authority
  const authority = opts.authority ?? extra[':authority'] ?? hostHeader ?? DEFAULT_AUTHORITY;
  const requestId = opts.requestId ?? extra['x-request-id'] ?? randomUUID();

  const headers: Record<string, string> = {
    ':authority': authority,
    ':path': opts.path,
    ':method': method,
    ':scheme': scheme,
  };
  for (const [k, v] of Object.entries(extra)) {
    if (!k.startsWith(':')) headers[k] = v;
  }
  headers['x-forwarded-proto'] ??= scheme;
  headers['x-request-id'] = requestId;

  const nowMs = Date.now();
  return {
    attributes: {
      source: {
        address: {
          socket_address: {
            protocol: 'TCP',
            address: opts.sourceAddress ?? '127.0.0.1',
            port_value: 32768 + Math.floor(Math.random() * 28000),
          },
        },
        principal: '',
      },
      destination: {
        address: { socket_address: { protocol: 'TCP', address: '127.0.0.1', port_value: 10000 } },
        principal: '',
      },
      request: {
        time: { seconds: String(Math.floor(nowMs / 1000)), nanos: (nowMs % 1000) * 1_000_000 },
        http: {
          id: randomBytes(8).readBigUInt64BE().toString(),
          method,
          headers,
          path: opts.path,
          host: authority,
          scheme,
          query: '',
          fragment: '',
          size: String(opts.body === undefined ? 0 : Buffer.byteLength(opts.body)),
          protocol,
          body: typeof opts.body === 'string' ? opts.body : '',
          ...(Buffer.isBuffer(opts.body) ? { raw_body: opts.body } : {}),
        },
      },
      context_extensions: { ...(opts.contextExtensions ?? {}) },
    },
  };
}

/** A chat-completions Check carrying `credential` as a Bearer token: the request most tests send. */
export function chatCheckRequest(credential: string): EnvoyCheckRequest {
  return envoyCheckRequest({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${credential}` } });
}

/** 'allow', or the deny reason code, for one real Check of a chat request carrying this key. */
export async function decisionFor(check: OfficialCheckClient, key: string): Promise<string> {
  const response = await check.check(envoyCheckRequest({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${key}` } }));
  return response.status.code === 0 ? 'allow' : (JSON.parse(response.denied_response.body) as { error: { code: string } }).error.code;
}
