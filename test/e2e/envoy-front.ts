/**
 * TEST CODE, not product: an HTTP/1.1 server that behaves like Envoy's HTTP
 * connection manager + ext_authz HTTP filter (gRPC service, V3) + router, as
 * deployed in front of gateway-authz. No Envoy binary runs on the development
 * machines, so end-to-end tests (official SDKs → "Envoy" → upstream) use this.
 *
 * The Check call goes through a client built from Envoy's OFFICIAL protos
 * (test/support/envoy-official-client.ts), never our trimmed proto/ copy.
 * The rules below are Envoy's (HTTP connection manager, ext_authz filter,
 * router); each one is pinned in envoy-front.test.ts against a stub authz
 * server.
 *
 * Request side (what Envoy puts into CheckRequest):
 *  - attributes.request.http.headers: lower-case keys, pseudo-headers first
 *    (`:authority` from Host, `:path` = target WITH query, `:method`,
 *    `:scheme` = 'http'), then every request header; repeated headers are
 *    joined with ',' (no space). `host` itself is not in the map (HTTP/1.1
 *    Host is Envoy's :authority). Hop-by-hop headers (connection, keep-alive,
 *    proxy-connection, transfer-encoding, upgrade, te) are stripped by the
 *    connection manager before any filter and never reach Check or upstream.
 *    A client-sent `x-envoy-auth-partial-body` is dropped from the Check.
 *  - `x-request-id` (uuid v4) is generated for every request, replacing a
 *    client-sent one, as the connection manager does for an edge request
 *    with envoy.yaml's `preserve_external_request_id: false` (every client
 *    of the front counts as external: production clients are outside
 *    `internal_address_config`). The id keys exactly-once metering, so a
 *    client must never choose it. `x-forwarded-proto` is added when absent.
 *    Both are forwarded upstream too.
 *  - http.id = a stream id (random uint64, not x-request-id); http.path =
 *    target with query; http.query/fragment = ''; http.host = :authority;
 *    http.scheme 'http'; http.protocol 'HTTP/1.1'; http.size '0' (no body
 *    buffering: the body is never read before the decision).
 *  - source/destination = the client / listener sockets.
 *
 * Response side:
 *  - the gRPC deadline is `timeoutMs` (grpc_service.timeout, 250 ms as in
 *    envoy.yaml). ANY RPC failure (transport error, deadline, a gRPC error
 *    status from the handler) → `statusOnError` (503 as envoy.yaml's
 *    status_on_error) with an EMPTY body. The (2026) `error_response` oneof
 *    member is treated the same way.
 *  - status.code === 0 → allowed, ok_response applied in this order:
 *      1. `headers` (upstream request), each by the append rules below;
 *      2. `headers_to_remove`, ignoring ':'-pseudo headers and `host`
 *         (Envoy applies removals after the additions);
 *      3. `query_parameters_to_remove` / `query_parameters_to_set` on the
 *         path (only when one of them is non-empty; untouched parameters keep
 *         their raw encoding and order — Envoy re-serialises the whole query,
 *         which no test here depends on);
 *      4. the request is forwarded (method, path, headers, streamed body) to
 *         `upstreamUrl`; the upstream response is streamed back (status,
 *         headers minus hop-by-hop, body; SSE flushes per chunk) with
 *         `response_headers_to_add` applied by the same append rules.
 *  - status.code !== 0 → denied: local reply with denied_response.status.code
 *    (403 when the status is unset or 0), denied_response.headers (each key
 *    named is set; repeated entries of one key are all kept, as Envoy's
 *    remove-then-addCopy does), body = denied_response.body; content-type
 *    text/plain only when the body is non-empty and none was given. A denied
 *    request never reaches the upstream.
 *
 * Append rules for a HeaderValueOption (decided here, documented):
 *  - `append` BoolValue SET: true → append, false → overwrite (Envoy ≤ 1.36
 *    reads only this field).
 *  - `append` UNSET → `append_action` (newer Envoy):
 *      APPEND_IF_EXISTS_OR_ADD (0, the enum default) → append;
 *      ADD_IF_ABSENT (1) → add only when the header is absent;
 *      OVERWRITE_IF_EXISTS_OR_ADD (2) → overwrite;
 *      OVERWRITE_IF_EXISTS (3) → overwrite only when the header exists.
 *  - "append" on an upstream REQUEST header comma-joins onto the existing
 *    value (Envoy's appendCopy), and adds the header when absent (Envoy
 *    ≤ 1.36 would skip an absent one; newer Envoy adds it — we keep the
 *    simpler, newer behaviour). On a RESPONSE header it adds another field
 *    line (Envoy's addCopy), so `set-cookie` stays correct.
 *  - Header keys are lower-cased; ':'-pseudo headers and `host` in
 *    `headers` are ignored (the real service never sets them).
 *
 * Usage metering, with the `extProc` option (off by default, so suites that
 * do not meter are unchanged): envoy.yaml's ext_proc filter, after ext_authz,
 * in observability mode (ext-proc-tap.ts says what is mirrored). Its request
 * headers are the ones ext_authz left (identity set, credentials removed,
 * the query mutated), before the router's route-level additions
 * (`accept-encoding: identity`, which the upstream does receive). Its
 * response headers are the upstream's, before ext_authz's
 * `response_headers_to_add` (encoders run in reverse order). Local replies
 * (a deny, status_on_error, an unreachable upstream) pass through it too, as
 * Envoy runs every encoder filter on them: a deny's side stream has response
 * messages only. A client that went away while its Check ran is not
 * forwarded upstream.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

import * as protoLoader from '@grpc/proto-loader';
import { parse as parseYaml } from 'yaml';

import { ENVOY_YAML } from './authz-cluster';

import { ExtProcTap, type ExtProcSideStream, type ExtProcTapOptions, type HeaderEntries } from './ext-proc-tap';
import {
  createOfficialCheckClient,
  OFFICIAL_EXTERNAL_AUTH_PROTO,
  OFFICIAL_LOADER_OPTIONS,
  type OfficialCheckClient,
  type OfficialCheckResponse,
} from '../support/envoy-official-client';

export interface EnvoyFrontOptions {
  /** host:port of gateway-authz gRPC (one host, no retries) … */
  authzAddress?: string;
  /** … or several replicas behind envoy.yaml's ext_authz cluster and retry policy (authz-cluster.ts). Closed by its owner. */
  authzCluster?: Pick<OfficialCheckClient, 'check'>;
  /** e.g. http://127.0.0.1:PORT */
  upstreamUrl: string;
  /** ext_authz grpc_service timeout, default 250 (as envoy.yaml). */
  timeoutMs?: number;
  /** Default 503 (as envoy.yaml's status_on_error). */
  statusOnError?: number;
  /** ExtAuthzPerRoute check_settings.context_extensions for every request (default none). */
  contextExtensions?: Record<string, string>;
  /** Runs envoy.yaml's ext_proc filter (usage metering, observability mode) against this processor. Default: off. */
  extProc?: ExtProcTapOptions;
  /** Keep a client-sent x-request-id; default: envoy.yaml's preserve_external_request_id (false: Envoy replaces it). */
  preserveExternalRequestId?: boolean;
  /** Request headers the router sets toward the upstream; default: envoy.yaml's virtual host request_headers_to_add. */
  upstreamRequestHeaders?: Record<string, string>;
}

export interface EnvoyFront {
  url: string;
  port: number;
  /** Every CheckRequest sent, for assertions. */
  checks: object[];
  /** The ext_proc filter, when the `extProc` option is given. */
  extProc?: ExtProcTap;
  close(): Promise<void>;
}

interface VirtualHostYaml {
  name?: string;
  request_headers_to_add?: { header?: { key?: string; value?: string }; append_action?: string }[];
}

/**
 * The request headers envoy.yaml's virtual host sets on every upstream request (the router applies them,
 * after every filter): `accept-encoding: identity`, so that metering can read the answer. Only overwriting
 * entries are mirrored; any other kind is refused rather than approximated.
 */
export function upstreamRequestHeadersFromEnvoyYaml(file = ENVOY_YAML): Record<string, string> {
  const bootstrap = parseYaml(fs.readFileSync(file, 'utf8')) as {
    static_resources?: {
      listeners?: { filter_chains?: { filters?: { typed_config?: { route_config?: { virtual_hosts?: VirtualHostYaml[] } } }[] }[] }[];
    };
  };
  const hosts = (bootstrap.static_resources?.listeners ?? []).flatMap((l) =>
    (l.filter_chains ?? []).flatMap((c) => (c.filters ?? []).flatMap((f) => f.typed_config?.route_config?.virtual_hosts ?? [])),
  );
  if (hosts.length !== 1) throw new Error(`${file}: expected one virtual host, found ${hosts.length}`);
  const headers: Record<string, string> = {};
  for (const option of hosts[0]!.request_headers_to_add ?? []) {
    if (option.append_action !== 'OVERWRITE_IF_EXISTS_OR_ADD')
      throw new Error(`${file}: request_headers_to_add ${option.append_action} is not mirrored`);
    headers[String(option.header?.key).toLowerCase()] = String(option.header?.value ?? '');
  }
  return headers;
}

interface ConnectionManagerYaml {
  generate_request_id?: boolean;
  preserve_external_request_id?: boolean;
}

/**
 * envoy.yaml's x-request-id settings, as the front mirrors them: Envoy
 * generates the id (generate_request_id, default true) and, unless
 * preserve_external_request_id (default false), replaces a client's own on
 * every edge request. A config that would not generate ids is refused: the
 * processor could then not count answers exactly once.
 */
export function requestIdSettingsFromEnvoyYaml(file = ENVOY_YAML): { preserveExternalRequestId: boolean } {
  const bootstrap = parseYaml(fs.readFileSync(file, 'utf8')) as {
    static_resources?: { listeners?: { filter_chains?: { filters?: { typed_config?: ConnectionManagerYaml }[] }[] }[] };
  };
  const managers = (bootstrap.static_resources?.listeners ?? []).flatMap((l) =>
    (l.filter_chains ?? []).flatMap((c) => (c.filters ?? []).flatMap((f) => (f.typed_config ? [f.typed_config] : []))),
  );
  if (managers.length !== 1) throw new Error(`${file}: expected one connection manager, found ${managers.length}`);
  const manager = managers[0]!;
  if (manager.generate_request_id === false) throw new Error(`${file}: generate_request_id is false; the front always generates one`);
  return { preserveExternalRequestId: manager.preserve_external_request_id === true };
}

export const DEFAULT_EXT_AUTHZ_TIMEOUT_MS = 250;
export const DEFAULT_STATUS_ON_ERROR = 503;
/** Envoy's default when denied_response carries no (or a 0) status. */
export const DEFAULT_DENIED_STATUS = 403;

/** Removed by Envoy's connection manager before any filter; never forwarded. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te']);

/** Ordered, lower-case header list; each key holds one or more field values. */
export type HeaderList = Map<string, string[]>;

export interface HeaderValueOptionLike {
  header?: { key?: string; value?: string } | null;
  append?: { value?: boolean } | null;
  append_action?: string | number | null;
}

type AppendMode = 'append' | 'overwrite' | 'add-if-absent' | 'overwrite-if-exists';

const APPEND_ACTIONS: Readonly<Record<string, AppendMode>> = {
  APPEND_IF_EXISTS_OR_ADD: 'append',
  '0': 'append',
  ADD_IF_ABSENT: 'add-if-absent',
  '1': 'add-if-absent',
  OVERWRITE_IF_EXISTS_OR_ADD: 'overwrite',
  '2': 'overwrite',
  OVERWRITE_IF_EXISTS: 'overwrite-if-exists',
  '3': 'overwrite-if-exists',
};

/** How Envoy treats one HeaderValueOption: `append` (BoolValue) when set, else `append_action`. */
export function appendModeOf(option: HeaderValueOptionLike): AppendMode {
  if (option.append !== undefined && option.append !== null) return option.append.value ? 'append' : 'overwrite';
  const action = option.append_action ?? 'APPEND_IF_EXISTS_OR_ADD';
  const mode = APPEND_ACTIONS[String(action)];
  if (mode === undefined) throw new Error(`unknown append_action ${String(action)}`);
  return mode;
}

function isProtectedHeader(key: string): boolean {
  return key.startsWith(':') || key === 'host';
}

/**
 * Applies one HeaderValueOption. `appendStyle` says what "append" means:
 * 'comma-join' (upstream request, Envoy's appendCopy) or 'add-line' (client
 * response, Envoy's addCopy).
 */
export function applyHeaderOption(headers: HeaderList, option: HeaderValueOptionLike, appendStyle: 'comma-join' | 'add-line'): void {
  const key = (option.header?.key ?? '').toLowerCase();
  const value = option.header?.value ?? '';
  if (key === '' || isProtectedHeader(key)) return;
  const existing = headers.get(key);
  switch (appendModeOf(option)) {
    case 'append':
      if (existing === undefined || existing.length === 0) headers.set(key, [value]);
      else if (appendStyle === 'add-line') existing.push(value);
      else existing[existing.length - 1] = `${existing[existing.length - 1]},${value}`;
      return;
    case 'overwrite':
      headers.delete(key);
      headers.set(key, [value]);
      return;
    case 'add-if-absent':
      if (existing === undefined) headers.set(key, [value]);
      return;
    case 'overwrite-if-exists':
      if (existing !== undefined) headers.set(key, [value]);
      return;
  }
}

/** `headers_to_remove`: pseudo-headers and Host are never removed. */
export function removeHeaders(headers: HeaderList, names: readonly string[]): void {
  for (const name of names) {
    const key = name.toLowerCase();
    if (!isProtectedHeader(key)) headers.delete(key);
  }
}

/**
 * `query_parameters_to_remove` / `query_parameters_to_set` on a request
 * target. Untouched parameters keep their raw text and order; a set
 * parameter replaces the first occurrence (others of that key are dropped)
 * or is appended; an empty query loses its '?'. Names are compared raw,
 * undecoded, as Envoy's ext_authz filter does: `k%65y` is not `key`.
 */
export function mutateQuery(target: string, toRemove: readonly string[], toSet: readonly { key: string; value: string }[]): string {
  if (toRemove.length === 0 && toSet.length === 0) return target;
  const mark = target.indexOf('?');
  const path = mark === -1 ? target : target.slice(0, mark);
  const query = mark === -1 ? '' : target.slice(mark + 1);
  let params = query === '' ? [] : query.split('&').filter((p) => p !== '');
  const keyOf = (param: string): string => param.split('=', 1)[0]!;
  const removed = new Set(toRemove);
  params = params.filter((param) => !removed.has(keyOf(param)));
  for (const { key, value } of toSet) {
    const encoded = `${encodeURIComponent(key)}=${encodeURIComponent(value)}`;
    const first = params.findIndex((param) => keyOf(param) === key);
    if (first === -1) {
      params.push(encoded);
    } else {
      params = params.filter((param, i) => i === first || keyOf(param) !== key);
      params[first] = encoded;
    }
  }
  return params.length === 0 ? path : `${path}?${params.join('&')}`;
}

let statusCodeNumbers: Map<string, number> | undefined;

/** envoy.type.v3.StatusCode name (enums: String) or number → HTTP status number. */
export function httpStatusNumber(code: unknown): number {
  if (typeof code === 'number') return code;
  if (typeof code !== 'string' || code === '') return 0;
  if (/^\d+$/.test(code)) return Number(code);
  if (statusCodeNumbers === undefined) {
    const def = protoLoader.loadSync(OFFICIAL_EXTERNAL_AUTH_PROTO, OFFICIAL_LOADER_OPTIONS) as Record<
      string,
      { type?: { value?: { name: string; number: number }[] } } | undefined
    >;
    const values = def['envoy.type.v3.StatusCode']?.type?.value ?? [];
    statusCodeNumbers = new Map(values.map((v) => [v.name, v.number]));
  }
  const number = statusCodeNumbers.get(code);
  if (number === undefined) throw new Error(`unknown envoy.type.v3.StatusCode ${code}`);
  return number;
}

function toNodeHeaders(headers: HeaderList): http.OutgoingHttpHeaders {
  const out: http.OutgoingHttpHeaders = {};
  for (const [key, values] of headers) out[key] = values.length === 1 ? values[0]! : values;
  return out;
}

function peer(address: string | undefined, port: number | undefined): object {
  return {
    address: { socket_address: { protocol: 'TCP', address: address ?? '', port_value: port ?? 0 } },
    principal: '',
  };
}

/** One entry per field line, in order. */
function entriesOf(headers: HeaderList): [string, string][] {
  return [...headers].flatMap(([key, values]) => values.map((value): [string, string] => [key, value]));
}

function sendLocalReply(res: http.ServerResponse, status: number, headers: HeaderList, body: string, exchange?: ExtProcSideStream): void {
  if (res.headersSent || res.destroyed) {
    res.destroy();
    return;
  }
  const bytes = Buffer.from(body, 'utf8');
  headers.set('content-length', [String(bytes.length)]);
  // Envoy's local reply: text/plain only when there is a body and no content-type.
  if (bytes.length > 0 && !headers.has('content-type')) headers.set('content-type', ['text/plain']);
  if (exchange) {
    // Envoy runs the local reply through every encoder filter, ext_proc included: headers, then the body in one chunk.
    exchange.responseHeaders([[':status', String(status)], ...entriesOf(headers)], bytes.length === 0);
    if (bytes.length > 0) exchange.responseBody(bytes, true);
  }
  res.writeHead(status, toNodeHeaders(headers));
  res.end(bytes);
}

/** Whether an HTTP/1 message has a body (Envoy's codec ends the stream with the headers otherwise). */
function requestHasBody(req: http.IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length.trim() !== '0');
}

function responseHasBody(method: string, res: http.IncomingMessage): boolean {
  const status = res.statusCode ?? 0;
  if (method === 'HEAD' || status === 204 || status === 304 || (status >= 100 && status < 200)) return false;
  return res.headers['content-length']?.trim() !== '0';
}

export async function startEnvoyFront(options: EnvoyFrontOptions): Promise<EnvoyFront> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_EXT_AUTHZ_TIMEOUT_MS;
  const statusOnError = options.statusOnError ?? DEFAULT_STATUS_ON_ERROR;
  const upstream = new URL(options.upstreamUrl);
  const upstreamAgent = new http.Agent({ keepAlive: true });
  if (!options.authzCluster === !options.authzAddress) throw new Error('startEnvoyFront: give authzAddress or authzCluster, not both');
  const ownClient = options.authzAddress ? createOfficialCheckClient(options.authzAddress) : undefined;
  const client = options.authzCluster ?? ownClient!;
  const checks: object[] = [];
  const tap = options.extProc ? new ExtProcTap(options.extProc) : undefined;
  const preserveExternalRequestId = options.preserveExternalRequestId ?? requestIdSettingsFromEnvoyYaml().preserveExternalRequestId;
  const routeHeaders = Object.entries(options.upstreamRequestHeaders ?? upstreamRequestHeadersFromEnvoyYaml()).map(
    ([key, value]): [string, string] => [key.toLowerCase(), value],
  );

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    // The HTTP stream's end (answered, or the client went away) is Envoy's onDestroy for every filter.
    let clientGone = false;
    let requestBodyBytes = 0;
    let envoyRequestHeaders: HeaderEntries = [];
    const exchange = tap?.exchange(() => ({ requestHeaders: envoyRequestHeaders, requestBodyBytes }));
    res.on('close', () => {
      if (!res.writableFinished) clientGone = true;
      exchange?.httpStreamDestroyed();
    });

    // --- connection manager: the request header map
    const target = req.url ?? '/';
    const method = (req.method ?? 'GET').toUpperCase();
    const requestHeaders: HeaderList = new Map();
    let authority = '';
    for (const [key, values] of Object.entries(req.headersDistinct)) {
      if (values === undefined || HOP_BY_HOP.has(key)) continue;
      if (key === 'host') {
        authority = values.join(',');
        continue;
      }
      requestHeaders.set(key, [...values]);
    }
    if (!requestHeaders.has('x-forwarded-proto')) requestHeaders.set('x-forwarded-proto', ['http']);
    if (!preserveExternalRequestId || !requestHeaders.has('x-request-id')) requestHeaders.set('x-request-id', [randomUUID()]);

    // --- ext_authz: CheckRequest
    const pseudoHeaders = (path: string): [string, string][] => [
      [':authority', authority],
      [':path', path],
      [':method', method],
      [':scheme', 'http'],
    ];
    envoyRequestHeaders = [...pseudoHeaders(target), ...entriesOf(requestHeaders)];
    const checkHeaders: Record<string, string> = Object.fromEntries(pseudoHeaders(target));
    for (const [key, values] of requestHeaders) {
      if (key !== 'x-envoy-auth-partial-body') checkHeaders[key] = values.join(',');
    }
    const nowMs = Date.now();
    const checkRequest = {
      attributes: {
        source: peer(req.socket.remoteAddress, req.socket.remotePort),
        destination: peer(req.socket.localAddress, req.socket.localPort),
        request: {
          time: { seconds: String(Math.floor(nowMs / 1000)), nanos: (nowMs % 1000) * 1_000_000 },
          http: {
            id: randomBytes(8).readBigUInt64BE().toString(),
            method,
            headers: checkHeaders,
            path: target,
            host: authority,
            scheme: 'http',
            query: '',
            fragment: '',
            size: '0',
            protocol: `HTTP/${req.httpVersion}`,
            body: '',
          },
        },
        context_extensions: { ...(options.contextExtensions ?? {}) },
      },
    };
    checks.push(checkRequest);

    let response: OfficialCheckResponse;
    try {
      response = await client.check(checkRequest, timeoutMs);
    } catch {
      sendLocalReply(res, statusOnError, new Map(), '', exchange);
      return;
    }
    // Envoy cancels the Check of a client that went away; nothing goes upstream.
    if (clientGone) return;
    if (response?.http_response === 'error_response') {
      sendLocalReply(res, statusOnError, new Map(), '', exchange);
      return;
    }

    const grpcCode = Number(response?.status?.code ?? 0);
    if (grpcCode !== 0) {
      const denied = response?.http_response === 'denied_response' ? response.denied_response : undefined;
      const status = httpStatusNumber(denied?.status?.code) || DEFAULT_DENIED_STATUS;
      const headers: HeaderList = new Map();
      for (const option of (denied?.headers ?? []) as HeaderValueOptionLike[]) {
        const key = (option.header?.key ?? '').toLowerCase();
        if (key === '' || key.startsWith(':')) continue;
        const list = headers.get(key);
        if (list) list.push(option.header?.value ?? '');
        else headers.set(key, [option.header?.value ?? '']);
      }
      sendLocalReply(res, status, headers, String(denied?.body ?? ''), exchange);
      return;
    }

    // --- allowed: mutate and route
    const ok = response?.http_response === 'ok_response' ? response.ok_response : undefined;
    for (const option of (ok?.headers ?? []) as HeaderValueOptionLike[]) applyHeaderOption(requestHeaders, option, 'comma-join');
    removeHeaders(requestHeaders, ok?.headers_to_remove ?? []);
    const upstreamPath = mutateQuery(
      target,
      ok?.query_parameters_to_remove ?? [],
      ((ok?.query_parameters_to_set ?? []) as { key?: string; value?: string }[]).map((p) => ({ key: p.key ?? '', value: p.value ?? '' })),
    );
    const responseHeaderOptions = (ok?.response_headers_to_add ?? []) as HeaderValueOptionLike[];

    // ext_proc (decoder after ext_authz): the request as ext_authz left it.
    envoyRequestHeaders = [...pseudoHeaders(upstreamPath), ...entriesOf(requestHeaders)];
    const hasBody = requestHasBody(req);
    exchange?.requestHeaders(envoyRequestHeaders, !hasBody);

    // The router: route-level header additions, then upstream.
    for (const [key, value] of routeHeaders) requestHeaders.set(key, [value]);
    const outgoing = toNodeHeaders(requestHeaders);
    outgoing.host = authority || upstream.host;
    const upstreamReq = http.request({
      protocol: upstream.protocol,
      hostname: upstream.hostname,
      port: upstream.port,
      method,
      path: upstreamPath,
      headers: outgoing,
      agent: upstreamAgent,
    });
    upstreamReq.on('response', (upstreamRes) => {
      const status = upstreamRes.statusCode ?? 502;
      const headers: HeaderList = new Map();
      for (const [key, values] of Object.entries(upstreamRes.headersDistinct)) {
        if (values !== undefined && !HOP_BY_HOP.has(key)) headers.set(key, [...values]);
      }
      if (exchange) {
        // ext_proc encodes before ext_authz: the upstream's headers, without response_headers_to_add.
        const withBody = responseHasBody(method, upstreamRes);
        exchange.responseHeaders([[':status', String(status)], ...entriesOf(headers)], !withBody);
        // Each read as it passes, sent before it goes on to the client; the end as an empty last chunk (Envoy's
        // HTTP/1 codec), or the trailers. Registered before pipe() so the processor's copy goes first.
        upstreamRes.on('data', (chunk: Buffer) => exchange.responseBody(chunk, false));
        upstreamRes.on('end', () => {
          const trailers = Object.entries(upstreamRes.trailersDistinct).flatMap(([key, values]) =>
            (values ?? []).map((value): [string, string] => [key, value]),
          );
          if (trailers.length > 0) exchange.responseTrailers(trailers);
          else if (withBody) exchange.responseBody(Buffer.alloc(0), true);
        });
      }
      for (const option of responseHeaderOptions) applyHeaderOption(headers, option, 'add-line');
      res.writeHead(status, toNodeHeaders(headers));
      res.flushHeaders();
      upstreamRes.pipe(res);
      upstreamRes.on('error', () => res.destroy());
    });
    upstreamReq.on('error', () => {
      // Envoy's answer when the upstream cannot be reached or resets.
      sendLocalReply(res, 503, new Map(), 'upstream connect error or disconnect/reset before headers', exchange);
    });
    // The client went away (e.g. an SDK cancelled a stream): reset the upstream too.
    res.on('close', () => {
      if (!res.writableFinished) upstreamReq.destroy();
    });
    req.on('data', (chunk: Buffer) => {
      requestBodyBytes += chunk.length;
      exchange?.requestBody(chunk, false);
    });
    req.on('end', () => {
      const trailers = Object.entries(req.trailersDistinct).flatMap(([key, values]) =>
        (values ?? []).map((value): [string, string] => [key, value]),
      );
      if (trailers.length > 0) exchange?.requestTrailers(trailers);
      else if (hasBody) exchange?.requestBody(Buffer.alloc(0), true);
    });
    req.pipe(upstreamReq);
  }

  const server = http.createServer((req, res) => {
    req.on('error', () => res.destroy());
    handle(req, res).catch(() => sendLocalReply(res, 500, new Map(), ''));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;

  let closing: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    checks,
    ...(tap ? { extProc: tap } : {}),
    close: () =>
      (closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
        upstreamAgent.destroy();
        ownClient?.close();
        tap?.close();
      })),
  };
}

// ---------------------------------------------------------------------------
// A curl-like client for tests: raw header lines (an array value sends the
// header once per element, so duplicates reach the front as separate lines),
// a fresh connection per call, the whole body as text.

export interface HttpReply {
  status: number;
  /** Node's merged view of the response headers (lower-case keys). */
  headers: http.IncomingHttpHeaders;
  /** Every response field line, lower-case key → values in order. */
  headerLines: Record<string, string[]>;
  body: string;
  /** Parsed `body` when it is JSON, else undefined. */
  json: unknown;
}

export interface HttpCall {
  method?: string;
  /** Request target, with query. */
  path: string;
  headers?: Record<string, string | string[]>;
  body?: string;
}

export function sendHttp(baseUrl: string, call: HttpCall): Promise<HttpReply> {
  const base = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        hostname: base.hostname,
        port: base.port,
        method: call.method ?? 'GET',
        path: call.path,
        headers: call.headers ?? {},
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', reject);
        res.on('end', () => {
          const body = Buffer.concat(chunks).toString('utf8');
          let json: unknown;
          try {
            json = JSON.parse(body);
          } catch {
            json = undefined;
          }
          const headerLines: Record<string, string[]> = {};
          for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) {
            (headerLines[res.rawHeaders[i]!.toLowerCase()] ??= []).push(res.rawHeaders[i + 1]!);
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, headerLines, body, json });
        });
      },
    );
    req.on('error', reject);
    req.end(call.body);
  });
}
