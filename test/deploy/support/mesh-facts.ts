/**
 * What the mesh layouts (deploy/istio/, deploy/envoy-gateway/,
 * deploy/shared-service/) must agree on with envoy.yaml, read from envoy.yaml
 * itself (through the strict Bootstrap checker) so that each fact stays in one
 * place: a mesh manifest is compared with it, never with a copy of its values.
 */
import { checkBootstrap, loadEnvoyRoot } from './envoy-bootstrap';
import {
  cluster,
  connectionManager,
  EXT_AUTHZ_FILTER,
  EXT_PROC_FILTER,
  type AuthzCapacity,
  type EnvoyView,
  type HeaderValueOption,
  type HealthCheck,
  routeFor,
} from './envoy-semantics';
import { parseYaml, readRepoFile } from './repo-files';
import { headersThePipelineReads } from '../../../src/check/pipeline/headers-read';
import { headerNamesFor } from '../../../src/check/routes/header-names';
import { loadSettings } from '../../../src/platform/settings';

type Raw = Record<string, unknown>;

/** envoy.yaml as written (YAML values) and as decoded from the official Bootstrap message. */
export const envoyYaml = parseYaml(readRepoFile('envoy.yaml'), 'envoy.yaml') as EnvoyView;
export const envoyView = checkBootstrap(envoyYaml).view;

const rawFilters = (envoyYaml.static_resources.listeners[0]!.filter_chains[0]!.filters[0]!.typed_config.http_filters ?? []) as unknown as {
  name: string;
  typed_config: Raw;
}[];

/** envoy.yaml's ext_authz and ext_proc filter configs, as written. */
export const envoyExtAuthz = rawFilters.find((f) => f.name === EXT_AUTHZ_FILTER)!.typed_config as {
  grpc_service: { timeout: string; retry_policy: { retry_on: string; num_retries: number; retry_back_off: Raw } };
  failure_mode_allow: boolean;
  status_on_error: { code: string };
  with_request_body?: unknown;
};
export const envoyExtProc = rawFilters.find((f) => f.name === EXT_PROC_FILTER)!.typed_config;

/** The ext_authz cluster's settings a mesh can express. */
export const envoyAuthzCluster = cluster(envoyView, 'ext_authz') as ReturnType<typeof cluster> & {
  outlier_detection: { consecutive_5xx: number; interval: string; base_ejection_time: string; max_ejection_percent: number };
};
export const envoyAuthzHealthCheck: HealthCheck = envoyAuthzCluster.health_checks[0]!;

/** The accept-encoding option envoy.yaml adds toward the upstream (on its one virtual host). */
export const envoyAcceptEncoding: HeaderValueOption = connectionManager(
  envoyView,
).route_config.virtual_hosts[0]!.request_headers_to_add.find((option) => option.header.key === 'accept-encoding')!;

/** The route timeout of the LLM API routes. */
export const envoyRouteTimeout = routeFor(envoyView, '/v1/chat/completions')!.route.timeout;

/** The listener's timeouts: the whole request's, and a stream's idle one. */
export const envoyRequestTimeout = connectionManager(envoyView).request_timeout;
export const envoyStreamIdleTimeout = connectionManager(envoyView).stream_idle_timeout;

/** Envoy's HTTP status enum (envoy.type.v3.StatusCode), e.g. ServiceUnavailable -> 503. */
export function httpStatusOf(codeName: string): number {
  const value = loadEnvoyRoot().lookupEnum('envoy.type.v3.StatusCode').values[codeName];
  if (value === undefined) throw new Error(`no envoy.type.v3.StatusCode ${codeName}`);
  return value;
}

/**
 * A duration in milliseconds, from protobuf JSON ("0.25s", "600s") or Gateway API ("250ms", "1m30s"), in integer
 * math (a fraction of a second finer than a millisecond is refused).
 */
export function durationMs(text: string): number {
  const proto = /^(\d+)(?:\.(\d{1,3}))?s$/.exec(text);
  if (proto) return Number(proto[1]) * 1000 + Number((proto[2] ?? '').padEnd(3, '0'));
  const units: Record<string, number> = { h: 3_600_000, m: 60_000, s: 1000, ms: 1 };
  const parts = [...text.matchAll(/(\d{1,5})(ms|h|m|s)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join('') !== text) throw new Error(`not a duration: ${text}`);
  return parts.reduce((sum, p) => sum + Number(p[1]) * units[p[2]!]!, 0);
}

/** A retry_on / triggers list as a sorted set of tokens. */
export const retryTokens = (list: string | readonly string[]) =>
  [...new Set((typeof list === 'string' ? list.split(',') : list).map((token) => token.trim()).filter(Boolean))].sort();

/**
 * Every request header a Check must carry for the pipeline: those it reads (src/check/pipeline/headers-read.ts, every
 * spelling accepted) and x-request-id, which the Check decoder reads itself (src/check/check-request.ts). :method and
 * :path travel in the CheckRequest's attributes whichever headers are sent.
 */
export const HEADERS_A_CHECK_NEEDS: readonly string[] = [...headersThePipelineReads(headerNamesFor(true)), 'x-request-id'];

/** What the replicas behind one Envoy decide at once, from a gateway-authz container's literal env (settings loader defaults elsewhere). */
export function capacityOf(env: readonly { name: string; value?: string }[], replicas: number): AuthzCapacity {
  const names = ['MAX_CHECKS_IN_FLIGHT', 'GRPC_WORKERS', 'GRPC_MAX_CONCURRENT_STREAMS'];
  const given = Object.fromEntries(env.filter((e) => names.includes(e.name) && e.value !== undefined).map((e) => [e.name, e.value!]));
  const loaded = loadSettings({ ADMIN_TOKEN: 'a'.repeat(64), REDIS_URL: 'redis://redis:6379', ...given });
  if (!loaded.ok) throw new Error(loaded.problems.join('; '));
  const { maxChecksInFlight, grpcWorkers, grpcMaxConcurrentStreams } = loaded.settings;
  return { maxChecksInFlight, grpcWorkers, grpcMaxConcurrentStreams, replicas };
}

/** A one-cluster view for envoy-semantics' circuit-breaker rule, from a mesh's own circuit-breaker numbers. */
export function authzBreakerView(breaker: { maxRequests: number; maxPending: number; maxConnections: number }): EnvoyView {
  const thresholds = [
    {
      priority: 'DEFAULT',
      max_requests: breaker.maxRequests,
      max_pending_requests: breaker.maxPending,
      max_connections: breaker.maxConnections,
    },
  ];
  return {
    static_resources: { listeners: [], clusters: [{ name: 'ext_authz', circuit_breakers: { thresholds } }] },
  } as unknown as EnvoyView;
}

/** `obj` without the key path `keys` (a copy), for comparing a mesh's filter config with envoy.yaml's up to that field. */
export function without(value: Raw, keys: readonly string[]): Raw {
  const copy = JSON.parse(JSON.stringify(value)) as Raw;
  let node: Raw = copy;
  for (const key of keys.slice(0, -1)) node = node[key] as Raw;
  delete node[keys[keys.length - 1]!];
  return copy;
}
