/**
 * What our Envoy configs must mean, checked on the decoded official Bootstrap
 * message (proto3 JSON view from envoy-bootstrap.ts), not on the YAML text.
 * Each check returns a list of problems, so tests can show both that the real
 * files pass and that a broken variant is caught.
 */

/**
 * The decoded Bootstrap (proto3 JSON) as these checks and the tests read it: only the fields read are
 * declared. proto3 JSON leaves a default value out, so any field may be absent at run time: the checks read
 * with `?.`, and a test that reads an absent field fails its assertion.
 */
export interface EnvoyView {
  admin: { address: Address };
  overload_manager: { resource_monitors: unknown[] };
  static_resources: { listeners: Listener[]; clusters: Cluster[] };
}

export interface Address {
  socket_address: { address: string; port_value: number };
}

export interface Listener {
  name: string;
  address: Address;
  filter_chains: { filters: { name: string; typed_config: ConnectionManager }[] }[];
}

export interface ConnectionManager {
  '@type': string;
  normalize_path: boolean;
  merge_slashes: boolean;
  path_with_escaped_slashes_action: string;
  use_remote_address: boolean;
  internal_address_config: { cidr_ranges: { address_prefix: string; prefix_len: number }[] };
  generate_request_id: boolean;
  /** Whether a client-sent x-request-id survives on an edge request (Envoy's default: false, it is replaced). */
  preserve_external_request_id: boolean;
  max_request_headers_kb: number;
  stream_idle_timeout: string;
  request_timeout: string;
  common_http_protocol_options: { headers_with_underscores_action: string };
  early_header_mutation_extensions: { typed_config: { mutations: { remove: string }[] } }[];
  route_config: { virtual_hosts: VirtualHost[] };
  http_filters: HttpFilter[];
  access_log: AccessLog[];
}

export interface VirtualHost {
  name: string;
  domains: string[];
  routes: Route[];
  retry_policy: unknown;
  typed_per_filter_config: Record<string, PerFilterConfig>;
  request_headers_to_add: HeaderValueOption[];
}

export interface HeaderValueOption {
  header: { key: string; value: string };
  append_action: string;
}

export interface PerFilterConfig {
  '@type': string;
  disabled: boolean;
}

export interface Route {
  name: string;
  match: { path?: string; path_separated_prefix?: string; prefix?: string };
  route: {
    cluster: string;
    timeout: string;
    retry_policy: { retry_on: string; retriable_status_codes?: number[]; per_try_timeout?: string };
  };
  direct_response: { status: number };
  typed_per_filter_config: Record<string, PerFilterConfig>;
  request_headers_to_add: HeaderValueOption[];
}

export interface HttpFilter {
  name: string;
  disabled: boolean;
  /** The ext_authz filter's config; ext_proc's is read through extProcConfig(). */
  typed_config: ExtAuthzConfig;
}

export interface ExtProcConfig {
  '@type': string;
  grpc_service: {
    timeout: string;
    envoy_grpc: { cluster_name: string };
    retry_policy: { retry_on: string; num_retries: number };
  };
  observability_mode: boolean;
  failure_mode_allow: boolean;
  processing_mode: {
    request_header_mode: string;
    response_header_mode: string;
    request_body_mode: string;
    response_body_mode: string;
    request_trailer_mode: string;
    response_trailer_mode: string;
  };
  request_attributes: string[];
  response_attributes: string[];
  deferred_close_timeout: string;
  message_timeout: string;
  forward_rules: unknown;
  allow_mode_override: boolean;
  metadata_options: unknown;
}

export interface ExtAuthzConfig {
  '@type': string;
  failure_mode_allow: boolean;
  transport_api_version: string;
  grpc_service: {
    timeout: string;
    envoy_grpc: { cluster_name: string };
    retry_policy: { retry_on: string };
  };
  status_on_error: { code: string };
  with_request_body: unknown;
  include_peer_certificate: boolean;
  http_service: unknown;
}

export interface Cluster {
  name: string;
  type: string;
  connect_timeout: string;
  load_assignment: { endpoints: { lb_endpoints: { endpoint: { address: Address } }[] }[] };
  typed_extension_protocol_options: Record<string, { '@type': string; explicit_http_config: { http2_protocol_options: object } }>;
  health_checks: HealthCheck[];
  circuit_breakers: {
    thresholds: { priority: string; max_connections: number; max_pending_requests: number; max_requests: number; max_retries: number }[];
  };
}

export interface HealthCheck {
  grpc_health_check: { service_name: string };
  timeout: string;
  interval: string;
  unhealthy_threshold: number;
  healthy_threshold: number;
}

export interface AccessLog {
  typed_config: {
    '@type': string;
    log_format: {
      json_format: Record<string, string>;
      text_format_source: { inline_string: string };
      text_format: string;
      formatters: { name: string }[];
    };
  };
}

export const EXT_AUTHZ_FILTER = 'envoy.filters.http.ext_authz';
export const EXT_PROC_FILTER = 'envoy.filters.http.ext_proc';
export const EXT_PROC_TYPE = 'type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor';
export const ROUTER_FILTER = 'envoy.filters.http.router';
export const HCM_TYPE = 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager';
export const EXT_AUTHZ_TYPE = 'type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthz';
export const EXT_AUTHZ_PER_ROUTE_TYPE = 'type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthzPerRoute';
export const HTTP_PROTOCOL_OPTIONS_KEY = 'envoy.extensions.upstreams.http.v3.HttpProtocolOptions';

/** Paths of the three client styles (docs/concepts/routes-and-credentials.md ("Route families")), plus the catch-all. */
export const KEYED_SAMPLE_PATHS = [
  '/v1/chat/completions',
  '/v1/completions',
  '/v1/embeddings',
  '/v1/responses',
  '/v1/responses/resp_123',
  '/v1beta/openai/chat/completions',
  '/v1beta/openai/models',
  '/v1/messages',
  '/v1/messages/count_tokens',
  '/v1/messages/batches/msgbatch_1',
  '/v1/models',
  '/v1/models/gpt-4o',
  '/v1/models/gemini-2.0-flash:generateContent',
  '/v1beta/models',
  '/v1beta/models/gemini-2.0-flash:streamGenerateContent',
  '/some/other/path',
  '/healthz/',
  '/healthzz',
  '/',
];

export function onlyListener(view: EnvoyView): Listener {
  const listeners = view.static_resources?.listeners ?? [];
  if (listeners.length !== 1) throw new Error(`expected exactly one listener, found ${listeners.length}`);
  return listeners[0]!;
}

export function connectionManager(view: EnvoyView): ConnectionManager {
  const filters = onlyListener(view).filter_chains?.[0]?.filters ?? [];
  const hcm = filters.find((f) => f.typed_config?.['@type'] === HCM_TYPE);
  if (!hcm) throw new Error('no http_connection_manager on the listener');
  return hcm.typed_config;
}

export function cluster(view: EnvoyView, name: string): Cluster {
  const found = (view.static_resources?.clusters ?? []).find((c) => c.name === name);
  if (!found) throw new Error(`no cluster '${name}'`);
  return found;
}

export function clusterEndpoints(view: EnvoyView, name: string): Array<{ address: string; port: number }> {
  const c = cluster(view, name);
  return (c.load_assignment?.endpoints ?? []).flatMap((e) =>
    (e.lb_endpoints ?? []).map((lb) => ({
      address: lb.endpoint?.address?.socket_address?.address,
      port: lb.endpoint?.address?.socket_address?.port_value,
    })),
  );
}

export function routes(view: EnvoyView): Route[] {
  const hosts = connectionManager(view).route_config?.virtual_hosts ?? [];
  return hosts.flatMap((h) => h.routes ?? []);
}

/** Envoy's first-match route selection for a path, for the match kinds our configs use. */
export function routeFor(view: EnvoyView, path: string): Route | undefined {
  return routes(view).find((route) => {
    const m = route.match ?? {};
    if (m.path !== undefined) return path === m.path;
    if (m.path_separated_prefix !== undefined) return path === m.path_separated_prefix || path.startsWith(`${m.path_separated_prefix}/`);
    if (m.prefix !== undefined) return path.startsWith(m.prefix);
    throw new Error(`route ${route.name}: match kind not understood by this test: ${JSON.stringify(m)}`);
  });
}

/** Is ext_authz disabled for this route by a per-route override keyed by the filter's exact name? */
export function authzDisabledOn(view: EnvoyView, route: Route): boolean {
  const hosts = connectionManager(view).route_config?.virtual_hosts ?? [];
  const host = hosts.find((h) => (h.routes ?? []).includes(route));
  const perRoute = route.typed_per_filter_config?.[EXT_AUTHZ_FILTER] ?? host?.typed_per_filter_config?.[EXT_AUTHZ_FILTER];
  return perRoute?.disabled === true;
}

/** The ext_authz filter contract of README / reference §2, §3, §5 and "Facts". */
export function extAuthzProblems(view: EnvoyView): string[] {
  const problems: string[] = [];
  const hcm = connectionManager(view);
  const filters = hcm.http_filters ?? [];
  if (filters[0]?.name !== EXT_AUTHZ_FILTER) problems.push(`first http filter is ${filters[0]?.name}, not ${EXT_AUTHZ_FILTER}`);
  if (filters[filters.length - 1]?.name !== ROUTER_FILTER) problems.push('the router is not the last http filter');
  if (filters.filter((f) => f.name === EXT_AUTHZ_FILTER).length !== 1) problems.push('ext_authz must appear exactly once');
  const authz = filters.find((f) => f.name === EXT_AUTHZ_FILTER);
  const ext: Partial<ExtAuthzConfig> = authz?.typed_config ?? {};
  if (ext['@type'] !== EXT_AUTHZ_TYPE) problems.push(`ext_authz typed_config is ${ext['@type']}`);
  if (authz?.disabled === true) problems.push('ext_authz filter is disabled by default');
  // proto3 `bool`: false is the default and is not on the wire; anything else is true.
  if (ext.failure_mode_allow === true) problems.push('failure_mode_allow must be false (fail closed)');
  if (ext.transport_api_version !== 'V3') problems.push(`transport_api_version is ${ext.transport_api_version}, not V3`);
  if (ext.grpc_service?.envoy_grpc?.cluster_name !== 'ext_authz') problems.push('grpc_service.envoy_grpc.cluster_name is not ext_authz');
  if (ext.grpc_service?.timeout !== '0.25s') problems.push(`grpc_service.timeout is ${ext.grpc_service?.timeout}, not 0.25s`);
  if (ext.status_on_error?.code !== 'ServiceUnavailable')
    problems.push(`status_on_error is ${ext.status_on_error?.code}, not ServiceUnavailable (503)`);
  if (ext.with_request_body !== undefined) problems.push('with_request_body is set (keys are in headers; bodies must not be buffered)');
  if (ext.include_peer_certificate === true) problems.push('include_peer_certificate is set');
  if (ext.http_service !== undefined) problems.push('http_service is set (gRPC only)');

  // Per-route overrides: keyed by the exact filter name, only on the health route.
  for (const host of hcm.route_config?.virtual_hosts ?? []) {
    for (const key of Object.keys(host.typed_per_filter_config ?? {}))
      problems.push(`virtual host ${host.name} has a typed_per_filter_config '${key}'`);
    for (const route of host.routes ?? []) {
      for (const [key, value] of Object.entries(route.typed_per_filter_config ?? {})) {
        if (key !== EXT_AUTHZ_FILTER)
          problems.push(`route ${route.name}: typed_per_filter_config key '${key}' is not the ext_authz filter name ${EXT_AUTHZ_FILTER}`);
        else if (value['@type'] !== EXT_AUTHZ_PER_ROUTE_TYPE) problems.push(`route ${route.name}: override is ${value['@type']}`);
      }
    }
  }
  const health = routeFor(view, '/healthz');
  if (!health || !authzDisabledOn(view, health)) problems.push('/healthz does not disable ext_authz');
  else if (health.direct_response?.status !== 200) problems.push('/healthz is not a direct 200');
  for (const path of KEYED_SAMPLE_PATHS) {
    const route = routeFor(view, path);
    if (!route) problems.push(`${path}: no route`);
    else if (authzDisabledOn(view, route)) problems.push(`${path}: ext_authz disabled on route ${route.name}`);
    else if (route.route?.cluster !== 'upstream_api') problems.push(`${path}: route ${route.name} does not go to upstream_api`);
  }
  return problems;
}

/** Retries only where the upstream provably has not seen the request. */
export const SAFE_RETRY_ON = new Set(['connect-failure', 'refused-stream']);

export function retryProblems(view: EnvoyView): string[] {
  const problems: string[] = [];
  const hosts = connectionManager(view).route_config?.virtual_hosts ?? [];
  for (const host of hosts) if (host.retry_policy) problems.push(`virtual host ${host.name} has a retry_policy`);
  for (const route of routes(view)) {
    const policy = route.route?.retry_policy;
    if (!policy) continue;
    const on = String(policy.retry_on ?? '')
      .split(',')
      .map((s) => s.trim());
    const unsafe = on.filter((token) => !SAFE_RETRY_ON.has(token));
    if (unsafe.length > 0) problems.push(`route ${route.name} retries on ${unsafe.join(', ')}`);
    if ((policy.retriable_status_codes ?? []).length > 0) problems.push(`route ${route.name} retries on status codes`);
    if (policy.per_try_timeout) problems.push(`route ${route.name} has a per_try_timeout (would cut long completions)`);
  }
  return problems;
}

export function extAuthzClusterProblems(view: EnvoyView): string[] {
  const problems: string[] = [];
  const c = cluster(view, 'ext_authz');
  const options = c.typed_extension_protocol_options?.[HTTP_PROTOCOL_OPTIONS_KEY];
  if (!options || options['@type'] !== `type.googleapis.com/${HTTP_PROTOCOL_OPTIONS_KEY}`)
    problems.push('ext_authz has no HttpProtocolOptions');
  else if (!options.explicit_http_config?.http2_protocol_options) problems.push('ext_authz cluster is not explicitly HTTP/2');
  if (c.connect_timeout !== '0.25s') problems.push(`ext_authz connect_timeout is ${c.connect_timeout}`);
  const checks = c.health_checks ?? [];
  const grpc = checks.find((h) => h.grpc_health_check !== undefined);
  if (!grpc) problems.push('ext_authz has no grpc health check');
  else {
    if (grpc.grpc_health_check.service_name !== undefined && grpc.grpc_health_check.service_name !== '')
      problems.push('grpc health check service_name is not ""');
    const expected = { timeout: '1s', interval: '5s', unhealthy_threshold: 2, healthy_threshold: 1 };
    for (const [key, value] of Object.entries(expected)) {
      const actual = grpc[key as keyof typeof expected];
      if (actual !== value) problems.push(`health check ${key} is ${actual}, not ${value}`);
    }
  }
  return problems;
}

/** What the gateway-authz replicas behind one Envoy can decide at once, from their settings. */
export interface AuthzCapacity {
  maxChecksInFlight: number;
  grpcWorkers: number;
  /** Replicas this Envoy's ext_authz cluster spreads Checks over (its circuit breaker is shared by all of them). */
  replicas: number;
  grpcMaxConcurrentStreams: number;
}

/** Envoy's value for a circuit breaker threshold left unset (envoy.config.cluster.v3.CircuitBreakers.Thresholds). */
const ENVOY_DEFAULT_THRESHOLD = 1024;

/**
 * The ext_authz circuit breaker is the bound on Checks in flight: a replica
 * cannot refuse 3 x its saturation itself (reading and refusing a Check costs
 * node:http2 most of a decision), so Envoy must refuse the excess before it is
 * sent. max_requests = MAX_CHECKS_IN_FLIGHT x GRPC_WORKERS x replicas: below
 * it Envoy would refuse what the replicas would decide, above it the replicas
 * are handed more than they can refuse. Pending Checks wait only for a
 * connection, so their queue is small; enough connections to reach
 * max_requests at GRPC_MAX_CONCURRENT_STREAMS each.
 */
export function extAuthzCircuitBreakerProblems(view: EnvoyView, capacity: AuthzCapacity): string[] {
  const problems: string[] = [];
  const threshold = cluster(view, 'ext_authz').circuit_breakers?.thresholds?.find((t) => (t.priority ?? 'DEFAULT') === 'DEFAULT');
  const maxRequests = threshold?.max_requests ?? ENVOY_DEFAULT_THRESHOLD;
  const maxPending = threshold?.max_pending_requests ?? ENVOY_DEFAULT_THRESHOLD;
  const maxConnections = threshold?.max_connections ?? ENVOY_DEFAULT_THRESHOLD;
  const bound = capacity.maxChecksInFlight * capacity.grpcWorkers * capacity.replicas;
  if (maxRequests !== bound)
    problems.push(
      `ext_authz max_requests is ${maxRequests}, not MAX_CHECKS_IN_FLIGHT ${capacity.maxChecksInFlight} × GRPC_WORKERS ${capacity.grpcWorkers} × ${capacity.replicas} replica(s) = ${bound}`,
    );
  if (!(maxPending > 0 && maxPending <= maxRequests / 4))
    problems.push(`ext_authz max_pending_requests is ${maxPending}, not between 1 and a quarter of max_requests (${maxRequests / 4})`);
  const connectionsNeeded = Math.ceil(maxRequests / capacity.grpcMaxConcurrentStreams);
  if (maxConnections < connectionsNeeded)
    problems.push(
      `ext_authz max_connections is ${maxConnections}, fewer than the ${connectionsNeeded} that max_requests needs at GRPC_MAX_CONCURRENT_STREAMS ${capacity.grpcMaxConcurrentStreams}`,
    );
  return problems;
}

const FORBIDDEN_HEADERS = ['authorization', 'proxy-authorization', 'x-api-key', 'x-goog-api-key', 'x-vendorg-api-key', 'cookie'];

/** Access logs must never carry credentials or the query string (?key=). */
export function accessLogProblems(view: EnvoyView): string[] {
  const problems: string[] = [];
  const logs = connectionManager(view).access_log ?? [];
  if (logs.length === 0) problems.push('no access log');
  for (const log of logs) {
    const format: Partial<AccessLog['typed_config']['log_format']> = log.typed_config?.log_format ?? {};
    const texts = [
      ...Object.values<unknown>(format.json_format ?? {}),
      format.text_format_source?.inline_string,
      format.text_format,
    ].filter((v): v is string => typeof v === 'string');
    const commands = texts.flatMap((text) =>
      [...text.matchAll(/%([A-Z_]+)(?:\(([^)]*)\))?(?::\d+)?%/g)].map((m) => ({ name: m[1]!, arg: m[2] ?? '' })),
    );
    for (const { name, arg } of commands) {
      const headers = arg.split('?').map((h) => h.trim().toLowerCase());
      if (['REQ', 'RESP', 'TRAILER', 'REQ_WITHOUT_QUERY'].includes(name)) {
        for (const header of headers)
          if (FORBIDDEN_HEADERS.includes(header)) problems.push(`access log ${name}(${arg}) logs a credential header`);
      }
      if (name !== 'REQ_WITHOUT_QUERY' && headers.some((h) => h === ':path' || h === 'x-envoy-original-path'))
        problems.push(`access log ${name}(${arg}) logs the path WITH its query string`);
      if (name === 'PATH' || name === 'REQUEST_HEADERS' || name === 'DOWNSTREAM_PEER_CERT') problems.push(`access log uses %${name}%`);
      if (name === 'REQ_WITHOUT_QUERY') {
        const declared = (format.formatters ?? []).some((f) => f.name === 'envoy.formatter.req_without_query');
        if (!declared) problems.push('REQ_WITHOUT_QUERY is used without declaring the envoy.formatter.req_without_query formatter');
      }
    }
    if (!commands.some((c) => c.name === 'REQ_WITHOUT_QUERY' && c.arg.toLowerCase() === ':path'))
      problems.push('access log has no query-free path');
  }
  return problems;
}

/** The ext_proc filter's typed_config, if the filter is there. */
export function extProcConfig(view: EnvoyView): Partial<ExtProcConfig> | undefined {
  const filter = (connectionManager(view).http_filters ?? []).find((f) => f.name === EXT_PROC_FILTER);
  return filter ? (filter.typed_config as unknown as Partial<ExtProcConfig>) : undefined;
}

/** What metering needs from Envoy (docs/concepts/metering.md, envoy.yaml's ext_proc comments). */
export const METERING_PROCESSING_MODE = {
  request_header_mode: 'SEND',
  response_header_mode: 'SEND',
  request_body_mode: 'NONE',
  response_body_mode: 'STREAMED',
  request_trailer_mode: 'SKIP',
  response_trailer_mode: 'SEND',
};

/**
 * The usage-metering ext_proc filter: right after ext_authz, observability mode, fail-open, the processing
 * mode above (proto3 JSON leaves enum defaults out: DEFAULT/NONE read as absent), request.size as a response
 * attribute, its own cluster, no stream deadline.
 */
export function extProcProblems(view: EnvoyView): string[] {
  const problems: string[] = [];
  const filters = connectionManager(view).http_filters ?? [];
  const names = filters.map((f) => f.name);
  if (names.filter((n) => n === EXT_PROC_FILTER).length !== 1) problems.push('ext_proc must appear exactly once');
  const authzAt = names.indexOf(EXT_AUTHZ_FILTER);
  if (authzAt === -1 || names[authzAt + 1] !== EXT_PROC_FILTER)
    problems.push(`ext_proc does not come right after ext_authz (${names.join(', ')})`);
  const filter = filters.find((f) => f.name === EXT_PROC_FILTER);
  if (filter?.disabled === true) problems.push('ext_proc filter is disabled by default');
  const ext = extProcConfig(view) ?? {};
  if (ext['@type'] !== EXT_PROC_TYPE) problems.push(`ext_proc typed_config is ${ext['@type']}`);
  if (ext.observability_mode !== true) problems.push('observability_mode must be true (metering must never wait on the processor)');
  if (ext.failure_mode_allow !== true) problems.push('failure_mode_allow must be true (metering must never break an answer)');
  const mode: Record<string, string | undefined> = { ...ext.processing_mode };
  const effective = (key: string, unset: string) => (mode[key] === undefined || mode[key] === 'DEFAULT' ? unset : mode[key]);
  const actual = {
    request_header_mode: effective('request_header_mode', 'SEND'),
    response_header_mode: effective('response_header_mode', 'SEND'),
    request_body_mode: mode.request_body_mode ?? 'NONE',
    response_body_mode: mode.response_body_mode ?? 'NONE',
    request_trailer_mode: effective('request_trailer_mode', 'SKIP'),
    response_trailer_mode: effective('response_trailer_mode', 'SKIP'),
  };
  for (const [key, wanted] of Object.entries(METERING_PROCESSING_MODE)) {
    const got = actual[key as keyof typeof actual];
    if (got !== wanted) problems.push(`processing_mode.${key} is ${got}, not ${wanted}`);
  }
  if (JSON.stringify(ext.response_attributes ?? []) !== JSON.stringify(['request.size']))
    problems.push(`response_attributes is ${JSON.stringify(ext.response_attributes ?? [])}, not ["request.size"]`);
  if ((ext.request_attributes ?? []).length > 0) problems.push('request_attributes is set (the request headers carry everything needed)');
  if (ext.grpc_service?.envoy_grpc?.cluster_name !== 'ext_proc') problems.push('grpc_service.envoy_grpc.cluster_name is not ext_proc');
  if (ext.grpc_service?.timeout !== undefined) problems.push(`grpc_service.timeout ${ext.grpc_service.timeout} would cut long answers`);
  const retryOn = String(ext.grpc_service?.retry_policy?.retry_on ?? '')
    .split(',')
    .filter(Boolean);
  const unsafe = retryOn.filter((token) => !SAFE_RETRY_ON.has(token));
  if (unsafe.length > 0) problems.push(`ext_proc retries on ${unsafe.join(', ')} (the processor may have seen the stream)`);
  if (ext.deferred_close_timeout !== '5s') problems.push(`deferred_close_timeout is ${ext.deferred_close_timeout}, not 5s`);
  if (ext.message_timeout !== undefined) problems.push('message_timeout is set (observability mode never waits for a reply)');
  if (ext.forward_rules !== undefined) problems.push('forward_rules is set (the processor needs every header)');
  if (ext.allow_mode_override === true) problems.push('allow_mode_override is set');
  return problems;
}

/** The ext_proc cluster: gateway-authz's gRPC port over HTTP/2, health-checked, with room for one stream per answer in flight. */
export function extProcClusterProblems(view: EnvoyView): string[] {
  const problems: string[] = [];
  const c = cluster(view, 'ext_proc');
  const authz = cluster(view, 'ext_authz');
  if (JSON.stringify(clusterEndpoints(view, 'ext_proc')) !== JSON.stringify(clusterEndpoints(view, 'ext_authz')))
    problems.push('ext_proc does not point at the same gateway-authz endpoints as ext_authz');
  if (c.type !== authz.type) problems.push(`ext_proc is ${c.type}, ext_authz ${authz.type}`);
  const options = c.typed_extension_protocol_options?.[HTTP_PROTOCOL_OPTIONS_KEY];
  if (!options?.explicit_http_config?.http2_protocol_options) problems.push('ext_proc cluster is not explicitly HTTP/2');
  if (JSON.stringify(c.health_checks) !== JSON.stringify(authz.health_checks))
    problems.push('ext_proc health check differs from ext_authz');
  const defaultThreshold = (name: string) =>
    cluster(view, name).circuit_breakers?.thresholds?.find((t) => (t.priority ?? 'DEFAULT') === 'DEFAULT');
  const streams = defaultThreshold('ext_proc')?.max_requests ?? 1024;
  const answers = defaultThreshold('upstream_api')?.max_requests ?? 1024;
  if (streams <= answers)
    problems.push(`ext_proc max_requests ${streams} does not exceed upstream_api's ${answers} (an overflow is an unmetered answer)`);
  return problems;
}

/** Every request to the upstream asks for an unencoded answer, so the processor can read it. */
export function acceptEncodingProblems(view: EnvoyView): string[] {
  const problems: string[] = [];
  for (const host of connectionManager(view).route_config?.virtual_hosts ?? []) {
    for (const route of host.routes ?? []) {
      if (!route.route) continue;
      const options = [...(host.request_headers_to_add ?? []), ...(route.request_headers_to_add ?? [])].filter(
        (o) => o.header?.key?.toLowerCase() === 'accept-encoding',
      );
      const last = options[options.length - 1];
      if (!last) problems.push(`route ${route.name}: accept-encoding is not set toward the upstream`);
      else if (last.header.value !== 'identity')
        problems.push(`route ${route.name}: accept-encoding is ${last.header.value}, not identity`);
      else if (last.append_action !== 'OVERWRITE_IF_EXISTS_OR_ADD')
        problems.push(`route ${route.name}: accept-encoding is not overwritten (${last.append_action})`);
    }
  }
  return problems;
}
