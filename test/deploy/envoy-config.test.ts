/**
 * envoy.yaml (docker compose) and deploy/envoy.yaml (Kubernetes pod) are
 * converted into Envoy's OFFICIAL envoy.config.bootstrap.v3.Bootstrap message
 * (protos from @grpc/grpc-js-xds/deps) by a strict converter, encoded, and
 * their meaning is asserted on the decoded message. No Envoy binary runs here;
 * what Envoy itself would add (e.g. extension registration, runtime checks
 * beyond the proto and PGV rules) is not covered.
 */
import { HOLD_HEADER, HOLD_LIFETIME_US } from '../../src/accounts/credit-holds';
import {
  checkBootstrap,
  checkMessage,
  EnvoyConfigError,
  ENVOY_PROTO_FILES,
  ENVOY_DEPS_DIR,
  loadEnvoyRoot,
  BOOTSTRAP_TYPE,
} from './support/envoy-bootstrap';
import {
  acceptEncodingProblems,
  accessLogProblems,
  authzDisabledOn,
  cluster,
  clusterEndpoints,
  connectionManager,
  extAuthzCircuitBreakerProblems,
  extAuthzClusterProblems,
  extAuthzProblems,
  type AuthzCapacity,
  EXT_AUTHZ_FILTER,
  EXT_PROC_FILTER,
  extProcClusterProblems,
  extProcConfig,
  extProcProblems,
  METERING_PROCESSING_MODE,
  onlyListener,
  type Address,
  retryProblems,
  routeFor,
  routes,
  type EnvoyView,
} from './support/envoy-semantics';
import { parseYaml, parseYamlDocuments, readRepoFile } from './support/repo-files';
import { loadSettings } from '../../src/platform/settings';
import { authzClusterSettingsFromEnvoyYaml } from '../e2e/authz-cluster';
import { upstreamRequestHeadersFromEnvoyYaml } from '../e2e/envoy-front';
import { extProcSettingsFromEnvoyYaml } from '../e2e/ext-proc-tap';
import * as fs from 'node:fs';
import * as path from 'node:path';

/** The negative cases write deliberately wrong values through plain records: the view types would refuse them. */
const loose = (node: object) => node as Record<string, unknown>;

const COMPOSE_ENVOY = 'envoy.yaml';
const K8S_ENVOY = 'deploy/envoy.yaml';

/** The YAML has the shape of the decoded view (proto3 JSON field names), so it is read through the same types. */
function load(file: string): EnvoyView {
  return parseYaml(readRepoFile(file), file) as EnvoyView;
}

const clone = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T;

/** The settings that decide how many Checks a replica decides at once; the settings loader's defaults where a layout sets none. */
const CAPACITY_SETTINGS = ['MAX_CHECKS_IN_FLIGHT', 'GRPC_WORKERS', 'GRPC_MAX_CONCURRENT_STREAMS'] as const;

function capacityOf(env: Record<string, unknown>, replicas: number): AuthzCapacity {
  const given = Object.fromEntries(CAPACITY_SETTINGS.filter((name) => env[name] !== undefined).map((name) => [name, String(env[name])]));
  const loaded = loadSettings({ ADMIN_TOKEN: 'a'.repeat(64), REDIS_URL: 'redis://redis:6379', ...given });
  if (!loaded.ok) throw new Error(loaded.problems.join('; '));
  const { maxChecksInFlight, grpcWorkers, grpcMaxConcurrentStreams } = loaded.settings;
  return { maxChecksInFlight, grpcWorkers, grpcMaxConcurrentStreams, replicas };
}

/** docker-compose.yml: every gateway-authz replica of the service sits behind the one Envoy (`deploy.replicas`, 1 unless set). */
function composeCapacity(): AuthzCapacity {
  const compose = parseYaml(readRepoFile('docker-compose.yml')) as {
    services: Record<string, { environment?: Record<string, string>; deploy?: { replicas?: number } }>;
  };
  const authz = compose.services['gateway-authz']!;
  return capacityOf(authz.environment ?? {}, authz.deploy?.replicas ?? 1);
}

/** deploy/deployment.yaml: each pod's Envoy talks to the gateway-authz container beside it only (127.0.0.1). */
function kubernetesCapacity(): AuthzCapacity {
  type Env = { name: string; value?: string }[];
  const deployment = parseYamlDocuments(readRepoFile('deploy/deployment.yaml')).find(
    (doc) => (doc as { kind?: string }).kind === 'Deployment',
  ) as { spec: { template: { spec: { containers: { name: string; env?: Env }[] } } } };
  const env = deployment.spec.template.spec.containers.find((c) => c.name === 'gateway-authz')!.env ?? [];
  const opaque = env.filter((e) => (CAPACITY_SETTINGS as readonly string[]).includes(e.name) && typeof e.value !== 'string');
  if (opaque.length > 0) throw new Error(`deploy/deployment.yaml: ${opaque.map((e) => e.name).join(', ')} must be literal values here`);
  return capacityOf(Object.fromEntries(env.map((e) => [e.name, e.value])), 1);
}
const hcmOf = (config: EnvoyView) => config.static_resources.listeners[0]!.filter_chains[0]!.filters[0]!.typed_config;
const extAuthzOf = (config: EnvoyView) => hcmOf(config).http_filters.find((f) => f.name === EXT_AUTHZ_FILTER)!.typed_config;
const extProcOf = (config: EnvoyView) => loose(hcmOf(config).http_filters.find((f) => f.name === EXT_PROC_FILTER)!.typed_config);
const firstCluster = (config: EnvoyView) => config.static_resources.clusters[0]!;
const firstHost = (config: EnvoyView) => hcmOf(config).route_config.virtual_hosts[0]!;
const routeAt = (config: EnvoyView, index: number) => firstHost(config).routes[index]!;
const EXT_AUTHZ_PATH =
  'static_resources.listeners[0].filter_chains[0].filters[0].typed_config(envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager)' +
  '.http_filters[0].typed_config(envoy.extensions.filters.http.ext_authz.v3.ExtAuthz)';

/** Drops proto3 default scalars (false, 0, "") and empty lists, which are not on the wire. */
function stripDefaults(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(stripDefaults);
  if (value && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value)
        .filter(([, v]) => v !== false && v !== 0 && v !== '' && !(Array.isArray(v) && v.length === 0))
        .map(([k, v]) => [k, stripDefaults(v)]),
    );
  }
  return value;
}

function problemsOf(config: unknown): string[] {
  try {
    checkBootstrap(config);
    return [];
  } catch (error) {
    if (error instanceof EnvoyConfigError) return [...error.problems];
    throw error;
  }
}

describe('the official protos used by the checker', () => {
  it('has every proto file our configs reference in the @grpc/grpc-js-xds deps copy', () => {
    for (const file of ENVOY_PROTO_FILES) expect(fs.existsSync(path.join(ENVOY_DEPS_DIR, 'envoy-api', file))).toBe(true);
    expect(loadEnvoyRoot().lookupType(BOOTSTRAP_TYPE).fullName).toBe(`.${BOOTSTRAP_TYPE}`);
  });
});

describe.each([
  [
    COMPOSE_ENVOY,
    {
      authz: { type: 'STRICT_DNS', address: 'gateway-authz', port: 9191 },
      upstream: { type: 'STRICT_DNS', address: 'upstream', port: 8081 },
      capacity: composeCapacity,
    },
  ],
  [
    K8S_ENVOY,
    {
      authz: { type: 'STATIC', address: '127.0.0.1', port: 9191 },
      upstream: { type: 'STRICT_DNS', address: 'upstream-api', port: 8081 },
      capacity: kubernetesCapacity,
    },
  ],
])('%s', (file, expected) => {
  const config = load(file);
  const checked = checkBootstrap(config);
  const view = checked.view;

  it('converts strictly into an envoy.config.bootstrap.v3.Bootstrap that encodes and decodes losslessly', () => {
    expect(checked.bytes.length).toBeGreaterThan(1000);
    const type = loadEnvoyRoot().lookupType(BOOTSTRAP_TYPE);
    const again = type.encode(type.decode(checked.bytes)).finish();
    expect(Buffer.from(again).equals(Buffer.from(checked.bytes))).toBe(true);
  });

  it('loses nothing: the decoded message says exactly what the YAML says (up to proto3 defaults)', () => {
    // protobufjs' fromObject drops what it does not know; this proves every
    // YAML value reached the binary message (and came back the same).
    expect(stripDefaults(view)).toEqual(stripDefaults(config));
  });

  it('keeps the admin interface on loopback, listens on 0.0.0.0:8080, and caps client connections', () => {
    expect(view.admin.address.socket_address).toEqual({ address: '127.0.0.1', port_value: 9901 });
    expect(onlyListener(view).address.socket_address).toEqual({ address: '0.0.0.0', port_value: 8080 });
    expect(view.overload_manager.resource_monitors).toEqual([
      {
        name: 'envoy.resource_monitors.global_downstream_max_connections',
        typed_config: {
          '@type': 'type.googleapis.com/envoy.extensions.resource_monitors.downstream_connections.v3.DownstreamConnectionsConfig',
          max_active_downstream_connections: 50000,
        },
      },
    ]);
  });

  it('normalises paths, rejects escaped slashes, trusts only loopback, and bounds headers and idle streams', () => {
    const hcm = connectionManager(view);
    expect(hcm.normalize_path).toBe(true);
    expect(hcm.merge_slashes).toBe(true);
    expect(hcm.path_with_escaped_slashes_action).toBe('REJECT_REQUEST');
    expect(hcm.use_remote_address).toBe(true);
    expect(hcm.internal_address_config.cidr_ranges).toEqual([{ address_prefix: '127.0.0.1', prefix_len: 32 }]);
    expect(hcm.generate_request_id).not.toBe(false);
    // x-request-id counts each metered answer once: Envoy replaces a client's own on every request from outside.
    expect(hcm.preserve_external_request_id).not.toBe(true);
    expect(hcmOf(config).preserve_external_request_id).toBe(false);
    expect(hcm.max_request_headers_kb).toBe(60);
    expect(hcm.stream_idle_timeout).toBe('600s');
    expect(hcm.common_http_protocol_options.headers_with_underscores_action).toBe('REJECT_REQUEST');
  });

  it("bounds the request and the answer within a credit hold's lifetime, so no metered answer outlives its hold", () => {
    const seconds = (duration: string) => Number(/^(\d+)s$/.exec(duration)![1]);
    const requestTimeout = seconds(connectionManager(view).request_timeout);
    const routeTimeouts = routes(view)
      .filter((r) => r.route)
      .map((r) => seconds(r.route.timeout));
    expect(requestTimeout).toBeGreaterThan(0);
    // The route timeout starts once the whole request has arrived; a minute is left for the usage record to reach the store.
    expect((requestTimeout + Math.max(...routeTimeouts) + 60) * 1_000_000).toBeLessThanOrEqual(HOLD_LIFETIME_US);
  });

  it('drops client-sent x-gateway-* identity and hold headers before any filter runs', () => {
    const early = connectionManager(view).early_header_mutation_extensions;
    const removed = early.flatMap((e) => e.typed_config.mutations.map((m) => m.remove));
    expect(removed.sort()).toEqual(
      [HOLD_HEADER, 'x-gateway-account-id', 'x-gateway-key-id', 'x-gateway-key-prefix', 'x-gateway-route-family'].sort(),
    );
  });

  it('runs ext_authz first, fail-closed (503), gRPC V3 with a 0.25 s timeout, without body, on every keyed route', () => {
    expect(extAuthzProblems(view)).toEqual([]);
    // The YAML states fail-closed explicitly (proto3 drops a false bool from the wire).
    expect(extAuthzOf(config).failure_mode_allow).toBe(false);
  });

  it('retries a Check on another replica only where it never ran, within the 0.25 s (rolling restarts)', () => {
    const grpcService = extAuthzOf(view).grpc_service;
    expect(grpcService.retry_policy).toMatchObject({
      retry_on: 'connect-failure,refused-stream,unavailable',
      num_retries: 2,
      retry_back_off: { base_interval: '0.005s', max_interval: '0.05s' },
      retry_host_predicate: [{ name: 'envoy.retry_host_predicates.previous_hosts' }],
    });
    // A timeout or reset may have spent a rate-limit token: never retried.
    expect(grpcService.retry_policy.retry_on).not.toMatch(/reset|deadline|5xx/);
    // What the Envoy-faithful front mirrors (test/e2e/authz-cluster.ts) is read from this same file.
    const mirrored = authzClusterSettingsFromEnvoyYaml();
    expect(mirrored.retry).toEqual({
      retryOn: ['connect-failure', 'refused-stream', 'unavailable'],
      numRetries: 2,
      baseIntervalMs: 5,
      maxIntervalMs: 50,
      avoidPreviousHosts: true,
      hostSelectionMaxAttempts: 3,
    });
    expect(mirrored.healthCheck).toEqual({
      serviceName: '',
      intervalMs: 5000,
      timeoutMs: 1000,
      unhealthyThreshold: 2,
      healthyThreshold: 1,
    });
  });

  it('disables ext_authz only on the health route, keyed by exactly the filter name', () => {
    const disabled = routes(view)
      .filter((r) => authzDisabledOn(view, r))
      .map((r) => r.name);
    expect(disabled).toEqual(['envoy_healthz']);
    expect(Object.keys(routeFor(view, '/healthz')!.typed_per_filter_config)).toEqual([EXT_AUTHZ_FILTER]);
    for (const path of [
      '/v1/chat/completions',
      '/v1/messages',
      '/v1beta/models/gemini-2.0-flash:generateContent',
      '/v1/models',
      '/anything',
    ]) {
      const route = routeFor(view, path)!;
      expect({ path, disabled: authzDisabledOn(view, route), typedPerFilter: route.typed_per_filter_config }).toEqual({
        path,
        disabled: false,
        typedPerFilter: undefined,
      });
    }
  });

  it('retries only connect failures and refused streams, and gives LLM calls 600 s', () => {
    expect(retryProblems(view)).toEqual([]);
    for (const route of routes(view).filter((r) => r.route)) {
      expect({ route: route.name, timeout: route.route.timeout, retryOn: route.route.retry_policy?.retry_on }).toEqual({
        route: route.name,
        timeout: '600s',
        retryOn: 'connect-failure,refused-stream',
      });
    }
  });

  it('talks HTTP/2 to ext_authz with a grpc health check, and has the right cluster addresses', () => {
    expect(extAuthzClusterProblems(view)).toEqual([]);
    expect(cluster(view, 'ext_authz').type).toBe(expected.authz.type);
    expect(clusterEndpoints(view, 'ext_authz')).toEqual([{ address: expected.authz.address, port: expected.authz.port }]);
    expect(cluster(view, 'upstream_api').type).toBe(expected.upstream.type);
    expect(clusterEndpoints(view, 'upstream_api')).toEqual([{ address: expected.upstream.address, port: expected.upstream.port }]);
    expect(view.static_resources.clusters.map((c) => c.name).sort()).toEqual(['ext_authz', 'ext_proc', 'otel_collector', 'upstream_api']);
  });

  it('traces with the OpenTelemetry tracer to the otel_collector cluster over HTTP/2, sampling 1 % (docs/operations/tracing.md)', () => {
    const tracing = loose(hcmOf(view)).tracing as {
      random_sampling: unknown;
      provider: { name: string; typed_config: { '@type': string; grpc_service: { envoy_grpc: { cluster_name: string } } } };
    };
    expect(tracing.random_sampling).toEqual({ value: 1 });
    expect(tracing.provider.name).toBe('envoy.tracers.opentelemetry');
    expect(tracing.provider.typed_config['@type']).toBe('type.googleapis.com/envoy.config.trace.v3.OpenTelemetryConfig');
    expect(tracing.provider.typed_config.grpc_service.envoy_grpc.cluster_name).toBe('otel_collector');
    const collector = loose(cluster(view, 'otel_collector'));
    expect(collector.typed_extension_protocol_options).toEqual(loose(cluster(view, 'ext_authz')).typed_extension_protocol_options);
    expect(clusterEndpoints(view, 'otel_collector')).toEqual([{ address: 'otel-collector', port: 4317 }]);
  });

  it('bounds the Checks in flight where refusing costs the replicas nothing: max_requests = MAX_CHECKS_IN_FLIGHT × GRPC_WORKERS × replicas behind this Envoy', () => {
    const capacity = expected.capacity();
    expect(capacity).toEqual({ maxChecksInFlight: 128, grpcWorkers: 1, grpcMaxConcurrentStreams: 100, replicas: 1 });
    expect(extAuthzCircuitBreakerProblems(view, capacity)).toEqual([]);
    expect(cluster(view, 'ext_authz').circuit_breakers.thresholds).toEqual([
      { priority: 'DEFAULT', max_connections: 1024, max_pending_requests: 16, max_requests: 128, max_retries: 3 },
    ]);
  });

  it('meters with ext_proc right after ext_authz: observability mode, fail-open, headers and the streamed response body', () => {
    expect(extProcProblems(view)).toEqual([]);
    expect(connectionManager(view).http_filters.map((f) => f.name)).toEqual([
      EXT_AUTHZ_FILTER,
      EXT_PROC_FILTER,
      'envoy.filters.http.router',
    ]);
    // What the YAML states, including the values proto3 leaves off the wire (NONE, SKIP).
    const ext = extProcOf(config);
    expect(ext.observability_mode).toBe(true);
    expect(ext.failure_mode_allow).toBe(true);
    expect(ext.processing_mode).toEqual(METERING_PROCESSING_MODE);
    expect(ext.response_attributes).toEqual(['request.size']);
    expect(ext.deferred_close_timeout).toBe('5s');
    // Only ext_proc fails open: the key check stays fail-closed.
    expect(extAuthzOf(config).failure_mode_allow).toBe(false);
    // The Envoy-faithful front (test/e2e/ext-proc-tap.ts) runs the filter as read from this same file.
    expect(extProcSettingsFromEnvoyYaml()).toEqual({
      clusterName: 'ext_proc',
      processingMode: {
        requestHeaderMode: 'SEND',
        responseHeaderMode: 'SEND',
        requestBodyMode: 'NONE',
        responseBodyMode: 'STREAMED',
        requestTrailerMode: 'SKIP',
        responseTrailerMode: 'SEND',
      },
      requestAttributes: [],
      responseAttributes: ['request.size'],
      deferredCloseTimeoutMs: 5000,
    });
  });

  it('opens metering streams on a cluster of their own: same gateway-authz endpoints, HTTP/2, room for every answer in flight', () => {
    expect(extProcClusterProblems(view)).toEqual([]);
    expect(clusterEndpoints(view, 'ext_proc')).toEqual([{ address: expected.authz.address, port: expected.authz.port }]);
    expect(extProcConfig(view)!.grpc_service!.retry_policy.retry_on).toBe('connect-failure,refused-stream');
  });

  it('asks the upstream for unencoded answers on every route, so the processor can read them', () => {
    expect(acceptEncodingProblems(view)).toEqual([]);
    expect(firstHost(config).request_headers_to_add).toEqual([
      { header: { key: 'accept-encoding', value: 'identity' }, append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' },
    ]);
    // The Envoy-faithful front's router sets what this same file says.
    expect(upstreamRequestHeadersFromEnvoyYaml()).toEqual({ 'accept-encoding': 'identity' });
  });

  it('logs JSON to stdout without credential headers or the query string', () => {
    expect(accessLogProblems(view)).toEqual([]);
    const log = connectionManager(view).access_log[0]!;
    expect(log.typed_config['@type']).toBe('type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog');
    expect(log.typed_config.log_format.json_format.path).toBe('%REQ_WITHOUT_QUERY(:PATH)%');
    expect(JSON.stringify(log).toLowerCase()).not.toMatch(/authorization|x-api-key|x-goog-api-key|x-vendorg-api-key/);
  });
});

describe('deploy/envoy.yaml', () => {
  it('equals envoy.yaml except for the cluster addresses', () => {
    const normalise = (config: EnvoyView) => {
      const copy = clone(config);
      for (const c of copy.static_resources.clusters.map(loose)) {
        delete c.load_assignment;
        if (c.name === 'ext_authz' || c.name === 'ext_proc') {
          delete c.type;
          delete c.dns_lookup_family;
        }
      }
      return copy;
    };
    expect(normalise(load(K8S_ENVOY))).toEqual(normalise(load(COMPOSE_ENVOY)));
  });
});

describe('the strict converter (negative cases, so a green run means something)', () => {
  const base = load(COMPOSE_ENVOY);

  it('refuses an unknown field and names its path, inside Any typed_config too', () => {
    const top = clone(base);
    loose(firstCluster(top)).conect_timeout = '1s';
    expect(problemsOf(top)).toEqual([
      `static_resources.clusters[0].conect_timeout: unknown field 'conect_timeout' in envoy.config.cluster.v3.Cluster`,
    ]);

    const nested = clone(base);
    loose(extAuthzOf(nested)).failure_mode_allowed = false;
    expect(problemsOf(nested)).toEqual([
      `${EXT_AUTHZ_PATH}.failure_mode_allowed: unknown field 'failure_mode_allowed' in envoy.extensions.filters.http.ext_authz.v3.ExtAuthz`,
    ]);
  });

  it('refuses a wrong JSON type (string for bool, string for integer, object for string, scalar for repeated, scalar for message)', () => {
    const cases: Array<[(c: EnvoyView) => void, RegExp]> = [
      [
        (c) => (loose(extAuthzOf(c)).failure_mode_allow = 'false'),
        /\.failure_mode_allow: expected a bool \(true\/false\), got string 'false'/,
      ],
      [
        (c) => (loose(c.admin.address.socket_address).port_value = '99o1'),
        /^admin\.address\.socket_address\.port_value: expected an integer \(uint32\), got string '99o1'/,
      ],
      [
        (c) => (loose(firstCluster(c)).name = { name: 'ext_authz' }),
        /^static_resources\.clusters\[0\]\.name: expected a string, got object/,
      ],
      [
        (c) => (loose(firstHost(c)).domains = '*'),
        /\.route_config\.virtual_hosts\[0\]\.domains: expected an array \(repeated string\), got string/,
      ],
      [
        (c) => (loose(firstCluster(c).health_checks[0]!).grpc_health_check = true),
        /^static_resources\.clusters\[0\]\.health_checks\[0\]\.grpc_health_check: expected an object/,
      ],
      [
        (c) => (loose(firstCluster(c)).connect_timeout = 0.25),
        /^static_resources\.clusters\[0\]\.connect_timeout: expected a duration string such as "0\.25s", got number/,
      ],
      [
        (c) => (loose(hcmOf(c)).max_request_headers_kb = { value: 60 }),
        /\.max_request_headers_kb: expected an integer \(uint32\), got object/,
      ],
    ];
    for (const [mutate, expected] of cases) {
      const config = clone(base);
      mutate(config);
      const problems = problemsOf(config);
      expect(problems).toHaveLength(1);
      expect(problems[0]).toMatch(expected);
    }
  });

  it('refuses an unknown @type URL, and one without the type.googleapis.com/ prefix', () => {
    const unknown = clone(base);
    extAuthzOf(unknown)['@type'] = 'type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuth';
    expect(problemsOf(unknown)).toEqual([
      `${EXT_AUTHZ_PATH.replace(/\(envoy\.extensions\.filters\.http\.ext_authz\.v3\.ExtAuthz\)$/, '')}: unknown "@type" 'type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuth' (no message envoy.extensions.filters.http.ext_authz.v3.ExtAuth in the loaded Envoy protos)`,
    ]);
    const perRoute = clone(base);
    routeAt(perRoute, 0).typed_per_filter_config[EXT_AUTHZ_FILTER]!['@type'] =
      'envoy.extensions.filters.http.ext_authz.v3.ExtAuthzPerRoute';
    expect(problemsOf(perRoute)).toEqual([
      expect.stringMatching(
        /routes\[0\]\.typed_per_filter_config\["envoy\.filters\.http\.ext_authz"\]: "@type" must start with type\.googleapis\.com\//,
      ),
    ]);
  });

  it('refuses an enum name that does not exist', () => {
    const config = clone(base);
    extAuthzOf(config).status_on_error.code = 'Unavailable';
    const problems = problemsOf(config);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(
      new RegExp(
        `^${EXT_AUTHZ_PATH.replace(/[.()[\]]/g, '\\$&')}\\.status_on_error\\.code: 'Unavailable' is not a value of enum envoy\\.type\\.v3\\.StatusCode`,
      ),
    );
    const transport = clone(base);
    extAuthzOf(transport).transport_api_version = 'v3';
    expect(problemsOf(transport)).toEqual([
      expect.stringMatching(/\.transport_api_version: 'v3' is not a value of enum envoy\.config\.core\.v3\.ApiVersion/),
    ]);
  });

  it('refuses null (an empty YAML value) where Envoy would silently read "unset"', () => {
    const config = clone(base);
    loose(
      firstCluster(config).typed_extension_protocol_options['envoy.extensions.upstreams.http.v3.HttpProtocolOptions']!.explicit_http_config,
    ).http2_protocol_options = null;
    expect(problemsOf(config)).toEqual([
      expect.stringMatching(/explicit_http_config\.http2_protocol_options: null is not allowed .* \(write \{\} for an empty message\)$/),
    ]);
  });

  it('applies the PGV rules Envoy enforces: required fields, required oneofs, ranges, patterns', () => {
    const cases: Array<[(c: EnvoyView) => void, RegExp]> = [
      [
        (c) => delete loose(firstCluster(c).health_checks[0]!).unhealthy_threshold,
        /health_checks\[0\]\.unhealthy_threshold: required field 'unhealthy_threshold' is missing$/,
      ],
      [
        (c) => delete loose(firstCluster(c).health_checks[0]!).grpc_health_check,
        /health_checks\[0\]: one of http_health_check \| tcp_health_check \| grpc_health_check \| custom_health_check is required/,
      ],
      [(c) => (extAuthzOf(c).grpc_service.envoy_grpc.cluster_name = ''), /envoy_grpc\.cluster_name: must not be empty \(required\)$/],
      [(c) => (firstCluster(c).connect_timeout = '0s'), /^static_resources\.clusters\[0\]\.connect_timeout: 0s must be > 0s$/],
      [(c) => (c.admin.address.socket_address.port_value = 65536), /^admin\.address\.socket_address\.port_value: 65536 must be <= 65535$/],
      [(c) => (hcmOf(c).max_request_headers_kb = 9000), /max_request_headers_kb: 9000 must be <= 8192$/],
      [(c) => (routeAt(c, 4).match.path_separated_prefix = '/v1/responses/'), /path_separated_prefix: '\/v1\/responses\/' does not match/],
      [
        (c) => (loose(firstCluster(c).health_checks[0]!).http_health_check = { path: '/x' }),
        /http_health_check: oneof 'health_checker' already set by 'grpc_health_check'$/,
      ],
    ];
    for (const [mutate, expected] of cases) {
      const config = clone(base);
      mutate(config);
      const problems = problemsOf(config);
      expect(problems).toHaveLength(1);
      expect(problems[0]).toMatch(expected);
    }
  });

  it('refuses deprecated fields, and YAML merge keys (Envoy does not support `<<`)', () => {
    const deprecated = clone(base);
    loose(routeAt(deprecated, 1).route).internal_redirect_action = 'PASS_THROUGH_INTERNAL_REDIRECT';
    expect(problemsOf(deprecated)).toEqual([
      expect.stringMatching(
        /\.internal_redirect_action: field 'internal_redirect_action' of envoy\.config\.route\.v3\.RouteAction is deprecated$/,
      ),
    ]);
    const merged = parseYaml('admin:\n  <<: { address: { socket_address: { address: 127.0.0.1, port_value: 9901 } } }\n');
    expect(problemsOf(merged)).toEqual([`admin.<<: unknown field '<<' in envoy.config.bootstrap.v3.Admin`]);
  });

  it('accepts what proto3 JSON accepts: lowerCamel names, integers as strings, wrappers as plain values', () => {
    expect(checkMessage('envoy.config.core.v3.SocketAddress', { address: '127.0.0.1', portValue: '9901' })).toEqual({
      address: '127.0.0.1',
      port_value: 9901,
    });
    expect(
      checkMessage('envoy.config.core.v3.HealthCheck', {
        timeout: '1s',
        interval: '5s',
        unhealthy_threshold: 2,
        healthy_threshold: 1,
        tcp_health_check: {},
      }),
    ).toMatchObject({
      timeout: { seconds: 1, nanos: 0 },
      unhealthy_threshold: { value: 2 },
    });
  });
});

describe('the semantic checks (negative cases)', () => {
  const base = load(COMPOSE_ENVOY);
  const viewOf = (config: EnvoyView) => checkBootstrap(config).view;

  it('notices a per-route override keyed by a name other than the filter name (Envoy would ignore it)', () => {
    const config = clone(base);
    const perRoute = routeAt(config, 0).typed_per_filter_config;
    perRoute['envoy.filters.http.ext_authz_v3'] = perRoute[EXT_AUTHZ_FILTER]!;
    delete perRoute[EXT_AUTHZ_FILTER];
    expect(extAuthzProblems(viewOf(config))).toEqual([
      "route envoy_healthz: typed_per_filter_config key 'envoy.filters.http.ext_authz_v3' is not the ext_authz filter name envoy.filters.http.ext_authz",
      '/healthz does not disable ext_authz',
    ]);
  });

  it('notices ext_authz not first, fail-open, a wrong timeout and a disabled style route', () => {
    const config = clone(base);
    const hcm = hcmOf(config);
    hcm.http_filters.reverse();
    const ext = hcm.http_filters.find((f) => f.name === EXT_AUTHZ_FILTER)!.typed_config;
    ext.failure_mode_allow = true;
    ext.grpc_service.timeout = '0.2s';
    hcm.route_config.virtual_hosts[0]!.routes[6]!.typed_per_filter_config = clone(
      hcm.route_config.virtual_hosts[0]!.routes[0]!.typed_per_filter_config,
    );
    expect(extAuthzProblems(viewOf(config))).toEqual([
      'first http filter is envoy.filters.http.router, not envoy.filters.http.ext_authz',
      'the router is not the last http filter',
      'failure_mode_allow must be false (fail closed)',
      'grpc_service.timeout is 0.2s, not 0.25s',
      '/v1/messages: ext_authz disabled on route messages',
      '/v1/messages/count_tokens: ext_authz disabled on route messages',
      '/v1/messages/batches/msgbatch_1: ext_authz disabled on route messages',
    ]);
  });

  it('notices unsafe retries and a query-carrying path in the access log', () => {
    const config = clone(base);
    const hcm = hcmOf(config);
    hcm.route_config.virtual_hosts[0]!.routes[1]!.route = {
      ...hcm.route_config.virtual_hosts[0]!.routes[1]!.route,
      retry_policy: { retry_on: '5xx,connect-failure' },
    };
    hcm.access_log[0]!.typed_config.log_format.json_format.path = '%REQ(:PATH)%';
    hcm.access_log[0]!.typed_config.log_format.json_format.auth = '%REQ(AUTHORIZATION)%';
    expect(retryProblems(viewOf(config))).toEqual(['route chat_completions retries on 5xx']);
    expect(accessLogProblems(viewOf(config))).toEqual([
      'access log REQ(:PATH) logs the path WITH its query string',
      'access log REQ(AUTHORIZATION) logs a credential header',
      'access log has no query-free path',
    ]);
  });

  it('notices ext_proc misplaced, fail-closed, waiting, with the wrong body modes or attributes, or with a stream deadline', () => {
    const config = clone(base);
    const hcm = hcmOf(config);
    const [authz, proc, router] = hcm.http_filters;
    hcm.http_filters = [proc!, authz!, router!];
    const ext = extProcOf(config);
    ext.failure_mode_allow = false;
    delete ext.observability_mode;
    ext.processing_mode = { request_body_mode: 'STREAMED', response_body_mode: 'BUFFERED', response_trailer_mode: 'DEFAULT' };
    ext.response_attributes = [];
    (ext.grpc_service as Record<string, unknown>).timeout = '0.25s';
    (ext.grpc_service as { retry_policy: { retry_on: string } }).retry_policy.retry_on = 'connect-failure,reset';
    ext.message_timeout = '0.2s';
    expect(extProcProblems(viewOf(config))).toEqual([
      'ext_proc does not come right after ext_authz (envoy.filters.http.ext_proc, envoy.filters.http.ext_authz, envoy.filters.http.router)',
      'observability_mode must be true (metering must never wait on the processor)',
      'failure_mode_allow must be true (metering must never break an answer)',
      'processing_mode.request_body_mode is STREAMED, not NONE',
      'processing_mode.response_body_mode is BUFFERED, not STREAMED',
      'processing_mode.response_trailer_mode is SKIP, not SEND',
      'response_attributes is [], not ["request.size"]',
      'grpc_service.timeout 0.25s would cut long answers',
      'ext_proc retries on reset (the processor may have seen the stream)',
      'message_timeout is set (observability mode never waits for a reply)',
    ]);
    const missing = clone(base);
    hcmOf(missing).http_filters = hcmOf(missing).http_filters.filter((f) => f.name !== EXT_PROC_FILTER);
    expect(extProcProblems(viewOf(missing))).toContain('ext_proc must appear exactly once');
  });

  it('notices an ext_proc cluster on other endpoints or with too few streams, and a route that lets the upstream compress', () => {
    const config = clone(base);
    const proc = loose(config.static_resources.clusters.find((c) => c.name === 'ext_proc')!);
    (proc.circuit_breakers as { thresholds: { max_requests: number }[] }).thresholds[0]!.max_requests = 1024;
    (
      proc.load_assignment as { endpoints: { lb_endpoints: { endpoint: { address: Address } }[] }[] }
    ).endpoints[0]!.lb_endpoints[0]!.endpoint.address.socket_address.port_value = 9192;
    delete proc.health_checks;
    expect(extProcClusterProblems(viewOf(config))).toEqual([
      'ext_proc does not point at the same gateway-authz endpoints as ext_authz',
      'ext_proc health check differs from ext_authz',
      "ext_proc max_requests 1024 does not exceed upstream_api's 10000 (an overflow is an unmetered answer)",
    ]);

    const encoding = clone(base);
    firstHost(encoding).request_headers_to_add = [];
    routeAt(encoding, 1).request_headers_to_add = [
      { header: { key: 'accept-encoding', value: 'gzip' }, append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' },
    ];
    const problems = acceptEncodingProblems(viewOf(encoding));
    expect(problems[0]).toBe('route chat_completions: accept-encoding is gzip, not identity');
    expect(problems.slice(1)).toEqual(
      routes(viewOf(encoding))
        .filter((r) => r.route && r.name !== 'chat_completions')
        .map((r) => `route ${r.name}: accept-encoding is not set toward the upstream`),
    );
  });

  it("notices ext_authz's circuit breaker drifting from the replicas' settings, an unbounded pending queue, and too few connections", () => {
    const shipped = viewOf(clone(base));
    const capacity = composeCapacity();
    expect(extAuthzCircuitBreakerProblems(shipped, capacity)).toEqual([]);
    // The settings move and the breaker does not: each is a problem.
    expect(extAuthzCircuitBreakerProblems(shipped, capacityOf({ MAX_CHECKS_IN_FLIGHT: '64' }, 1))).toEqual([
      'ext_authz max_requests is 128, not MAX_CHECKS_IN_FLIGHT 64 × GRPC_WORKERS 1 × 1 replica(s) = 64',
    ]);
    // A layout that leaves MAX_CHECKS_IN_FLIGHT unset gets the service's default (256), and the rule sees it.
    expect(extAuthzCircuitBreakerProblems(shipped, capacityOf({}, 1))).toEqual([
      'ext_authz max_requests is 128, not MAX_CHECKS_IN_FLIGHT 256 × GRPC_WORKERS 1 × 1 replica(s) = 256',
    ]);
    expect(extAuthzCircuitBreakerProblems(shipped, capacityOf({ MAX_CHECKS_IN_FLIGHT: '128', GRPC_WORKERS: '2' }, 1))).toEqual([
      'ext_authz max_requests is 128, not MAX_CHECKS_IN_FLIGHT 128 × GRPC_WORKERS 2 × 1 replica(s) = 256',
    ]);
    expect(extAuthzCircuitBreakerProblems(shipped, { ...capacity, replicas: 3 })).toEqual([
      'ext_authz max_requests is 128, not MAX_CHECKS_IN_FLIGHT 128 × GRPC_WORKERS 1 × 3 replica(s) = 384',
    ]);
    // The breaker moves and the settings do not (the old 10000 / 4096, and a pool too small to reach max_requests).
    const drifted = clone(base);
    firstCluster(drifted).circuit_breakers.thresholds[0] = {
      priority: 'DEFAULT',
      max_connections: 2,
      max_pending_requests: 4096,
      max_requests: 10000,
      max_retries: 3,
    };
    expect(extAuthzCircuitBreakerProblems(viewOf(drifted), capacity)).toEqual([
      'ext_authz max_requests is 10000, not MAX_CHECKS_IN_FLIGHT 128 × GRPC_WORKERS 1 × 1 replica(s) = 128',
      'ext_authz max_pending_requests is 4096, not between 1 and a quarter of max_requests (2500)',
      'ext_authz max_connections is 2, fewer than the 100 that max_requests needs at GRPC_MAX_CONCURRENT_STREAMS 100',
    ]);
    // No circuit breaker at all: Envoy's defaults (1024 each) are no bound on one replica.
    const unset = clone(base);
    delete loose(firstCluster(unset)).circuit_breakers;
    expect(extAuthzCircuitBreakerProblems(viewOf(unset), capacity)).toEqual([
      'ext_authz max_requests is 1024, not MAX_CHECKS_IN_FLIGHT 128 × GRPC_WORKERS 1 × 1 replica(s) = 128',
      'ext_authz max_pending_requests is 1024, not between 1 and a quarter of max_requests (256)',
    ]);
  });

  it('notices an ext_authz cluster without HTTP/2 or health check', () => {
    const config = clone(base);
    const authz = loose(firstCluster(config));
    delete authz.typed_extension_protocol_options;
    delete authz.health_checks;
    expect(extAuthzClusterProblems(viewOf(config))).toEqual(['ext_authz has no HttpProtocolOptions', 'ext_authz has no grpc health check']);
  });
});
