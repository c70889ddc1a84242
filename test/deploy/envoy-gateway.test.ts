/**
 * deploy/envoy-gateway/: a SecurityPolicy (ext_authz) and an
 * EnvoyExtensionPolicy (ext_proc metering) on an HTTPRoute, calling the shared
 * gateway-authz (deploy/shared-service/). The policies are validated against
 * Envoy Gateway's own CRD schemas (vendored, test/deploy/schemas/README.md),
 * their CEL rules included,
 * the Gateway API kinds with @kubernetes-models/gateway-api; then the facts:
 * envoy.yaml's timeout, fail-closed status, body setting, retries, health
 * check and circuit-breaker rule for ext_authz; envoy.yaml's processing mode
 * for metering, as far as Envoy Gateway can express it (the one difference is
 * asserted and documented); every header the pipeline reads reaches Check.
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';

import { HOLD_LIFETIME_US } from '../../src/accounts/credit-holds';
import { CrdSchemas } from './support/crd-schema';
import { extAuthzCircuitBreakerProblems, METERING_PROCESSING_MODE } from './support/envoy-semantics';
import { esmModelProblems, MESH_KINDS } from './support/esm-models';
import { describeObject, kindKey, typeProblems } from './support/k8s-schemas';
import type { K8sObject } from './support/kustomize';
import { baseAuthzContainer, buildLayout, envValue, findObject, readManifests, type Workload } from './support/layouts';
import {
  authzBreakerView,
  capacityOf,
  durationMs,
  envoyAcceptEncoding,
  envoyAuthzCluster,
  envoyAuthzHealthCheck,
  envoyExtAuthz,
  envoyExtProc,
  envoyRequestTimeout,
  envoyRouteTimeout,
  envoyStreamIdleTimeout,
  HEADERS_A_CHECK_NEEDS,
  httpStatusOf,
  retryTokens,
} from './support/mesh-facts';
import { readRepoFile, repoPath } from './support/repo-files';

const SCHEMAS = repoPath('test', 'deploy', 'schemas');
const CRD_FILES = [
  'gateway.envoyproxy.io_securitypolicies.yaml',
  'gateway.envoyproxy.io_envoyextensionpolicies.yaml',
  'gateway.envoyproxy.io_clienttrafficpolicies.yaml',
].map((file) => repoPath('test', 'deploy', 'schemas', 'envoy-gateway', file));
const crds = new CrdSchemas(CRD_FILES);

const FILES = [
  'gateway.yaml',
  'httproute.yaml',
  'security-policy.yaml',
  'envoy-extension-policy.yaml',
  'reference-grant.yaml',
  'client-traffic-policy.yaml',
];
const objects = readManifests(...FILES.map((file) => ['deploy', 'envoy-gateway', file]));
const sharedService = buildLayout('shared-service');

interface BackendRef {
  name: string;
  namespace: string;
  port: number;
}
interface BackendSettings {
  timeout: { tcp: { connectTimeout: string } };
  retry: { numRetries: number; retryOn: { triggers: string[] }; perRetry: { backOff: { baseInterval: string; maxInterval: string } } };
  circuitBreaker: { maxConnections: number; maxPendingRequests: number; maxParallelRequests: number; maxParallelRetries: number };
  healthCheck?: {
    active: {
      type: string;
      grpc: { service?: string };
      timeout: string;
      interval: string;
      unhealthyThreshold: number;
      healthyThreshold: number;
    };
  };
}
interface TargetRef {
  group: string;
  kind: string;
  name: string;
}
interface SecurityPolicy extends K8sObject {
  spec: {
    targetRefs: TargetRef[];
    extAuth: {
      grpc: { backendRefs: BackendRef[]; backendRef?: unknown; backendSettings: BackendSettings };
      headersToExtAuth?: string[];
      bodyToExtAuth?: unknown;
      timeout: string;
      failOpen: boolean;
      statusOnError: number;
    };
  };
}
interface ProcessingModeOptions {
  body?: string;
  attributes?: string[];
}
interface ExtProc {
  backendRefs: BackendRef[];
  backendRef?: unknown;
  backendSettings: BackendSettings;
  shadowMode: boolean;
  failOpen: boolean;
  messageTimeout?: string;
  metadata?: unknown;
  processingMode: { request?: ProcessingModeOptions; response?: ProcessingModeOptions; allowModeOverride?: boolean };
}
interface EnvoyExtensionPolicy extends K8sObject {
  spec: { targetRefs: TargetRef[]; extProc: ExtProc[] };
}
interface HTTPRoute extends K8sObject {
  spec: {
    rules: {
      filters: { type: string; requestHeaderModifier: { set: { name: string; value: string }[] } }[];
      timeouts: { request: string };
    }[];
  };
}

const securityPolicy = findObject<SecurityPolicy>(objects, 'SecurityPolicy', 'gateway-authz');
const extensionPolicy = findObject<EnvoyExtensionPolicy>(objects, 'EnvoyExtensionPolicy', 'gateway-authz-metering');
const route = findObject<HTTPRoute>(objects, 'HTTPRoute', 'llm-api');
const extAuth = securityPolicy.spec.extAuth;
const extProc = extensionPolicy.spec.extProc[0]!;

/** git's blob id of a file: what `git rev-parse <tag>:<path>` names upstream. */
const gitBlobId = (file: string) => {
  const bytes = fs.readFileSync(file);
  return createHash('sha1').update(`blob ${bytes.length}\0`).update(bytes).digest('hex');
};

/**
 * Envoy Gateway's translation of an ExtProc's processingMode into Envoy's (internal/xds/translator/extproc.go,
 * buildProcessingMode, v1.9.0): everything SKIP/NONE unless given; a present `request`/`response` sends its headers;
 * trailers are sent only with FullDuplexStreamed bodies.
 */
function envoyGatewayProcessingMode(mode: ExtProc['processingMode']): typeof METERING_PROCESSING_MODE {
  const body = (options?: ProcessingModeOptions) =>
    ({ Streamed: 'STREAMED', Buffered: 'BUFFERED', BufferedPartial: 'BUFFERED_PARTIAL', FullDuplexStreamed: 'FULL_DUPLEX_STREAMED' })[
      options?.body ?? ''
    ] ?? 'NONE';
  return {
    request_header_mode: mode.request ? 'SEND' : 'SKIP',
    response_header_mode: mode.response ? 'SEND' : 'SKIP',
    request_body_mode: body(mode.request),
    response_body_mode: body(mode.response),
    request_trailer_mode: body(mode.request) === 'FULL_DUPLEX_STREAMED' ? 'SEND' : 'SKIP',
    response_trailer_mode: body(mode.response) === 'FULL_DUPLEX_STREAMED' ? 'SEND' : 'SKIP',
  };
}

/** The headers a SecurityPolicy's Check carries of those the pipeline needs (none missing when headersToExtAuth is unset: gRPC gets all). */
const missingHeaders = (policy: SecurityPolicy) =>
  policy.spec.extAuth.headersToExtAuth === undefined
    ? []
    : HEADERS_A_CHECK_NEEDS.filter((h) => !policy.spec.extAuth.headersToExtAuth!.map((x) => x.toLowerCase()).includes(h));

describe('the vendored Envoy Gateway CRDs', () => {
  it('are the upstream files byte for byte (git blob ids in test/deploy/schemas/README.md)', () => {
    const rows = readRepoFile('test', 'deploy', 'schemas', 'README.md')
      .split('\n')
      .map((line) => /^\| `([^`]+)` \| [^|]+ \| `[^`]*` \| ([0-9a-f]{40}) \|$/.exec(line))
      .filter((m): m is RegExpExecArray => m !== null);
    // Every vendored file is listed, and every listed file is vendored.
    const vendored = (fs.readdirSync(SCHEMAS, { recursive: true }) as string[]).filter(
      (file) => file !== 'README.md' && fs.statSync(`${SCHEMAS}/${file}`).isFile(),
    );
    expect(rows.map((r) => r[1]).sort()).toEqual(vendored.sort());
    for (const [, file, blob] of rows) expect({ file, blob: gitBlobId(`${SCHEMAS}/${file}`) }).toEqual({ file, blob });
    for (const file of CRD_FILES) expect(rows.map((r) => `${SCHEMAS}/${r[1]}`)).toContain(file);
  });

  it('serve SecurityPolicy, EnvoyExtensionPolicy and ClientTrafficPolicy in gateway.envoyproxy.io/v1alpha1', () => {
    expect(crds.kinds().sort()).toEqual([
      'gateway.envoyproxy.io/v1alpha1/ClientTrafficPolicy',
      'gateway.envoyproxy.io/v1alpha1/EnvoyExtensionPolicy',
      'gateway.envoyproxy.io/v1alpha1/SecurityPolicy',
    ]);
  });
});

describe('deploy/envoy-gateway: schemas', () => {
  const policies = objects.filter((o) => o.apiVersion?.startsWith('gateway.envoyproxy.io/'));
  const gatewayApi = objects.filter((o) => !policies.includes(o));

  it('has the expected objects', () => {
    expect(objects.map(describeObject).sort()).toEqual([
      'ClientTrafficPolicy/llm-api',
      'EnvoyExtensionPolicy/gateway-authz-metering',
      'Gateway/llm-api',
      'HTTPRoute/llm-api',
      'ReferenceGrant/gateway-authz-from-llm-api',
      'SecurityPolicy/gateway-authz',
    ]);
  });

  it.each(policies.map((o) => [describeObject(o), o] as const))("%s validates against Envoy Gateway's CRD schema", (_name, object) => {
    expect(crds.problems(object)).toEqual([]);
  });

  it("passes the CRDs' CEL rules (x-kubernetes-validations), every one of them evaluated", () => {
    expect(crds.celProblems(policies)).toEqual({ failed: [], unevaluated: [] });
  });

  it('catches what only a CEL rule forbids (so the rules are really run)', () => {
    const wrongRef = JSON.parse(JSON.stringify(extensionPolicy)) as EnvoyExtensionPolicy;
    wrongRef.spec.extProc[0]!.backendRef = wrongRef.spec.extProc[0]!.backendRefs[0];
    const both = JSON.parse(JSON.stringify(securityPolicy)) as SecurityPolicy & { spec: { extAuth: { http?: unknown } } };
    both.spec.extAuth.http = { backendRefs: both.spec.extAuth.grpc.backendRefs };
    expect(crds.celProblems([wrongRef, both])).toEqual({
      failed: [
        'EnvoyExtensionPolicy/gateway-authz-metering: /spec/extProc/0: BackendRefs must be used, backendRef is not supported.',
        'SecurityPolicy/gateway-authz: /spec/extAuth: only one of grpc or http can be specified',
      ],
      unevaluated: [],
    });
  });

  it('validates the Gateway API objects with @kubernetes-models/gateway-api, with no unknown fields', () => {
    expect(gatewayApi.every((o) => MESH_KINDS[kindKey(o)])).toBe(true);
    expect(esmModelProblems(gatewayApi).flat()).toEqual([]);
    expect(typeProblems(gatewayApi, MESH_KINDS)).toEqual([]);
  });

  it('catches a misspelt field, a wrong type and a wrong enum (so a green run means something)', () => {
    const broken = JSON.parse(JSON.stringify(securityPolicy)) as Record<string, Record<string, Record<string, unknown>>>;
    const auth = broken.spec!.extAuth!;
    auth.statusOnErorr = auth.statusOnError;
    delete auth.statusOnError;
    auth.failOpen = 'no';
    (auth.grpc as BackendSettings & { backendSettings: BackendSettings }).backendSettings.retry.retryOn.triggers.push('timeout');
    expect(crds.problems(broken as K8sObject).sort()).toEqual([
      "SecurityPolicy/gateway-authz: /spec/extAuth must NOT have additional properties 'statusOnErorr'",
      'SecurityPolicy/gateway-authz: /spec/extAuth/failOpen must be boolean',
      'SecurityPolicy/gateway-authz: /spec/extAuth/grpc/backendSettings/retry/retryOn/triggers/3 must be equal to one of the allowed values',
    ]);
    const route = JSON.parse(JSON.stringify(findObject(objects, 'HTTPRoute', 'llm-api'))) as Record<string, Record<string, unknown>>;
    route.spec!.parentRef = route.spec!.parentRefs;
    delete route.spec!.parentRefs;
    expect(typeProblems([route as K8sObject], MESH_KINDS)).toEqual([
      expect.stringContaining(`'"parentRef"' does not exist in type 'IHTTPRouteSpec'`),
    ]);
  });
});

describe('ext_authz (SecurityPolicy): envoy.yaml’s filter and cluster, where Envoy Gateway can say them', () => {
  it('targets the HTTPRoute and calls the shared gateway-authz gRPC Service, which a ReferenceGrant allows', () => {
    expect(securityPolicy.spec.targetRefs).toEqual([{ group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'llm-api' }]);
    expect(extAuth.grpc.backendRef).toBeUndefined();
    const [ref] = extAuth.grpc.backendRefs;
    const service = findObject<K8sObject & { spec: { ports: { port: number }[] } }>(sharedService, 'Service', ref!.name);
    expect(ref!.namespace).toBe(service.metadata!.namespace);
    expect(service.spec.ports.map((p) => p.port)).toContain(ref!.port);
    expect(ref!.port).toBe(Number(envValue(baseAuthzContainer, 'GRPC_PORT')));
    const grant = findObject<K8sObject & { spec: { from: { kind: string; namespace: string }[]; to: { kind: string; name: string }[] } }>(
      objects,
      'ReferenceGrant',
      'gateway-authz-from-llm-api',
    );
    expect(grant.metadata!.namespace).toBe(ref!.namespace);
    expect(grant.spec.from).toContainEqual(
      expect.objectContaining({ kind: 'SecurityPolicy', namespace: securityPolicy.metadata!.namespace }),
    );
    expect(grant.spec.to).toContainEqual(expect.objectContaining({ kind: 'Service', name: ref!.name }));
  });

  it('fails closed with 503 within envoy.yaml’s timeout, sends no body, and every header the pipeline reads', () => {
    expect(durationMs(extAuth.timeout)).toBe(durationMs(envoyExtAuthz.grpc_service.timeout));
    expect(extAuth.failOpen).toBe(envoyExtAuthz.failure_mode_allow);
    expect(extAuth.statusOnError).toBe(httpStatusOf(envoyExtAuthz.status_on_error.code));
    expect(extAuth.bodyToExtAuth).toBeUndefined();
    expect(envoyExtAuthz.with_request_body).toBeUndefined();
    // Unset: a gRPC authorization service gets every request header (Envoy Gateway's ExtAuth.headersToExtAuth).
    expect(extAuth.headersToExtAuth).toBeUndefined();
    expect(missingHeaders(securityPolicy)).toEqual([]);
    // Were a list set, it would have to name them all; one missing is caught.
    const narrowed = JSON.parse(JSON.stringify(securityPolicy)) as SecurityPolicy;
    narrowed.spec.extAuth.headersToExtAuth = HEADERS_A_CHECK_NEEDS.filter((h) => h !== 'x-api-key');
    expect(missingHeaders(narrowed)).toEqual(['x-api-key']);
  });

  it('retries, health-checks and bounds Checks as envoy.yaml’s ext_authz cluster does', () => {
    const settings = extAuth.grpc.backendSettings;
    expect(durationMs(settings.timeout.tcp.connectTimeout)).toBe(durationMs(envoyAuthzCluster.connect_timeout));
    const retry = envoyExtAuthz.grpc_service.retry_policy;
    expect(retryTokens(settings.retry.retryOn.triggers)).toEqual(retryTokens(retry.retry_on));
    expect(settings.retry.numRetries).toBe(retry.num_retries);
    const backOff = retry.retry_back_off as { base_interval: string; max_interval: string };
    expect(durationMs(settings.retry.perRetry.backOff.baseInterval)).toBe(durationMs(backOff.base_interval));
    expect(durationMs(settings.retry.perRetry.backOff.maxInterval)).toBe(durationMs(backOff.max_interval));
    const active = settings.healthCheck!.active;
    expect(active.type).toBe('GRPC');
    expect(active.grpc.service ?? '').toBe(envoyAuthzHealthCheck.grpc_health_check.service_name ?? '');
    expect({
      timeout: durationMs(active.timeout),
      interval: durationMs(active.interval),
      unhealthy: active.unhealthyThreshold,
      healthy: active.healthyThreshold,
    }).toEqual({
      timeout: durationMs(envoyAuthzHealthCheck.timeout),
      interval: durationMs(envoyAuthzHealthCheck.interval),
      unhealthy: envoyAuthzHealthCheck.unhealthy_threshold,
      healthy: envoyAuthzHealthCheck.healthy_threshold,
    });
    const replicas = findObject<Workload>(sharedService, 'Deployment', 'gateway-authz').spec.replicas;
    const breaker = authzBreakerView({
      maxRequests: settings.circuitBreaker.maxParallelRequests,
      maxPending: settings.circuitBreaker.maxPendingRequests,
      maxConnections: settings.circuitBreaker.maxConnections,
    });
    expect(extAuthzCircuitBreakerProblems(breaker, capacityOf(baseAuthzContainer.env ?? [], replicas))).toEqual([]);
  });
});

describe('metering (EnvoyExtensionPolicy): envoy.yaml’s ext_proc filter, as far as Envoy Gateway can say it', () => {
  it('targets the same HTTPRoute and streams to the metering Service through backendRefs (backendRef is refused by its CRD rule)', () => {
    expect(extensionPolicy.spec.targetRefs).toEqual(securityPolicy.spec.targetRefs);
    expect(extensionPolicy.spec.extProc).toHaveLength(1);
    expect(extProc.backendRef).toBeUndefined();
    const [ref] = extProc.backendRefs;
    expect(ref).toEqual({ name: 'gateway-authz-metering', namespace: 'gateway-authz', port: extAuth.grpc.backendRefs[0]!.port });
    expect(findObject(sharedService, 'Service', ref!.name).metadata!.namespace).toBe(ref!.namespace);
    expect(ref!.name).not.toBe(extAuth.grpc.backendRefs[0]!.name);
  });

  it('sends and goes, fails open, and asks for the request size, as envoy.yaml', () => {
    const config = envoyExtProc as { observability_mode: boolean; failure_mode_allow: boolean; response_attributes: string[] };
    expect(extProc.shadowMode).toBe(config.observability_mode);
    expect(extProc.failOpen).toBe(config.failure_mode_allow);
    expect(extProc.processingMode.response!.attributes).toEqual(config.response_attributes);
    expect(extProc.processingMode.request!.attributes).toBeUndefined();
    expect(extProc.processingMode.allowModeOverride).toBeUndefined();
    expect(extProc.messageTimeout).toBeUndefined();
    expect(extProc.metadata).toBeUndefined();
  });

  it('gets envoy.yaml’s processing mode but for response trailers, which Envoy Gateway sends only with FullDuplexStreamed', () => {
    const mode = envoyGatewayProcessingMode(extProc.processingMode);
    expect({ ...mode, response_trailer_mode: 'SEND' }).toEqual(METERING_PROCESSING_MODE);
    expect(mode.response_trailer_mode).toBe('SKIP');
  });

  it('retries opening a stream only where gateway-authz never saw it, and allows far more streams than Checks', () => {
    const settings = extProc.backendSettings;
    const retry = (envoyExtProc as { grpc_service: { retry_policy: { retry_on: string; num_retries: number } } }).grpc_service.retry_policy;
    expect(retryTokens(settings.retry.retryOn.triggers)).toEqual(retryTokens(retry.retry_on));
    expect(settings.retry.numRetries).toBe(retry.num_retries);
    expect(settings.circuitBreaker.maxParallelRequests).toBeGreaterThan(extAuth.grpc.backendSettings.circuitBreaker.maxParallelRequests);
  });
});

describe('the HTTPRoute', () => {
  it('asks the upstream for unencoded answers (metering reads them) and allows envoy.yaml’s route timeout', () => {
    for (const rule of route.spec.rules) {
      const set = rule.filters.filter((f) => f.type === 'RequestHeaderModifier').flatMap((f) => f.requestHeaderModifier.set);
      expect(set).toContainEqual({ name: envoyAcceptEncoding.header.key, value: envoyAcceptEncoding.header.value });
      expect(durationMs(rule.timeouts.request)).toBe(durationMs(envoyRouteTimeout));
    }
  });
});

describe("deploy/envoy-gateway: the listener's timeouts, as envoy.yaml's", () => {
  const policy = findObject<
    K8sObject & { spec: { targetRefs: { group: string; kind: string; name: string }[]; timeout: { http: Record<string, string> } } }
  >(objects, 'ClientTrafficPolicy', 'llm-api');

  it("targets the Gateway, with envoy.yaml's request timeout and stream idle timeout", () => {
    expect(policy.spec.targetRefs).toEqual([{ group: 'gateway.networking.k8s.io', kind: 'Gateway', name: 'llm-api' }]);
    expect(durationMs(policy.spec.timeout.http.requestReceivedTimeout!)).toBe(durationMs(envoyRequestTimeout));
    expect(durationMs(policy.spec.timeout.http.streamIdleTimeout!)).toBe(durationMs(envoyStreamIdleTimeout));
  });

  it("ends every answer within a credit hold's lifetime: request timeout + route timeout + a minute", () => {
    const routeMs = Math.max(...route.spec.rules.map((rule) => durationMs(rule.timeouts.request)));
    expect((durationMs(policy.spec.timeout.http.requestReceivedTimeout!) + routeMs + 60_000) * 1000).toBeLessThanOrEqual(HOLD_LIFETIME_US);
  });
});
