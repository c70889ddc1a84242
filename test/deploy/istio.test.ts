/**
 * deploy/istio/: the mesh config (two ext_authz providers), the sidecar layout
 * (kustomize: gateway-authz in the application's pod) and the shared layout
 * (policies for deploy/shared-service/). Every object is validated against
 * its project's schema: @kubernetes-models/istio and Istio's own CRDs
 * (vendored, with their CEL rules) for Istio's kinds,
 * kubernetes-models for core kinds, Istio's own protos for the mesh config
 * (which no CRD covers), and Envoy's protos for what the EnvoyFilters insert;
 * a type check against the models' interfaces catches unknown fields. Then
 * the facts: each layout asks gateway-authz with envoy.yaml's timeout,
 * fail-closed status and body setting, sends the headers the pipeline reads,
 * meters with envoy.yaml's ext_proc filter, and reaches the right port.
 */
import { HOLD_LIFETIME_US } from '../../src/accounts/credit-holds';
import { CrdSchemas } from './support/crd-schema';
import { checkMessage, EnvoyConfigError } from './support/envoy-bootstrap';
import { EXT_AUTHZ_FILTER, EXT_PROC_FILTER, extAuthzCircuitBreakerProblems } from './support/envoy-semantics';
import { esmModelProblems, MESH_KINDS } from './support/esm-models';
import { GRPC_PROVIDER_TYPE, HTTP_PROVIDER_TYPE, jsonFieldNames, meshConfigProblems } from './support/istio-protos';
import { describeObject, KINDS, kindKey, schemaProblems, typeProblems } from './support/k8s-schemas';
import type { K8sObject } from './support/kustomize';
import { repoPath } from './support/repo-files';
import {
  base,
  baseAuthzContainer,
  buildLayout,
  containerOf,
  contentOf,
  envValue,
  findObject,
  readManifests,
  selects,
  type Workload,
} from './support/layouts';
import {
  authzBreakerView,
  capacityOf,
  durationMs,
  envoyAcceptEncoding,
  envoyAuthzCluster,
  envoyExtAuthz,
  envoyExtProc,
  envoyRequestTimeout,
  envoyRouteTimeout,
  envoyStreamIdleTimeout,
  httpStatusOf,
  without,
} from './support/mesh-facts';

interface GrpcProvider {
  service: string;
  port: number;
  timeout: string;
  failOpen: boolean;
  statusOnError: string;
  includeRequestBodyInCheck?: unknown;
}
interface MeshConfig {
  pathNormalization: { normalization: string };
  extensionProviders: { name: string; envoyExtAuthzGrpc: GrpcProvider }[];
}
interface AuthorizationPolicy extends K8sObject {
  spec: {
    selector: { matchLabels: Record<string, string> };
    action: string;
    provider: { name: string };
    rules: { to: { operation: { ports: string[] } }[] }[];
  };
}
interface ConfigPatch {
  applyTo: string;
  match: {
    context: string;
    listener?: { portNumber: number; filterChain: { filter: { name: string; subFilter?: { name: string } } } };
    routeConfiguration?: { portNumber: number };
  };
  patch: { operation: string; value: Record<string, unknown> };
}
interface EnvoyFilter extends K8sObject {
  spec: { workloadSelector: { labels: Record<string, string> }; configPatches: ConfigPatch[] };
}
interface DestinationRule extends K8sObject {
  spec: {
    host: string;
    trafficPolicy: {
      connectionPool: {
        tcp: { connectTimeout: string; maxConnections: number };
        http: { http2MaxRequests: number; http1MaxPendingRequests: number; maxRetries: number };
      };
      outlierDetection?: { consecutive5xxErrors: number; interval: string; baseEjectionTime: string; maxEjectionPercent: number };
    };
  };
}
interface ServiceEntry extends K8sObject {
  spec: { hosts: string[]; endpoints: { address: string }[]; ports: { number: number; protocol: string }[]; resolution: string };
}

const meshConfigObjects = readManifests(['deploy', 'istio', 'mesh-config.yaml']);
const meshConfig = (meshConfigObjects[0] as K8sObject & { spec: { meshConfig: MeshConfig } }).spec.meshConfig;
const sidecar = buildLayout('istio', 'sidecar');
const sharedPolicies = readManifests(
  ['deploy', 'istio', 'shared', 'authorization-policy.yaml'],
  ['deploy', 'istio', 'shared', 'destination-rule.yaml'],
  ['deploy', 'istio', 'shared', 'envoy-filter.yaml'],
);
const sharedService = buildLayout('shared-service');
const everyObject = [...meshConfigObjects, ...sidecar, ...sharedPolicies];

const provider = (name: string): GrpcProvider => {
  const found = meshConfig.extensionProviders.find((p) => p.name === name);
  if (!found) throw new Error(`no extension provider ${name}`);
  return found.envoyExtAuthzGrpc;
};
/** Istio's name for the outbound cluster of a host and port (what ext_authz and an EnvoyFilter refer to). */
const outboundCluster = (host: string, port: number) => `outbound|${port}||${host}`;
const fqdn = (service: K8sObject) => `${service.metadata!.name}.${service.metadata!.namespace}.svc.cluster.local`;

function protoProblems(typeName: string, value: unknown): string[] {
  try {
    checkMessage(typeName, value);
    return [];
  } catch (error) {
    if (error instanceof EnvoyConfigError) return [...error.problems];
    throw error;
  }
}

/** Problems of a MERGE patch's value: its own fields only (a part of a message lacks the message's required fields). */
const mergeProblems = (typeName: string, value: unknown) =>
  protoProblems(typeName, value).filter((problem) => !/ is required in |\(required\)$/.test(problem));

describe('deploy/istio: schemas', () => {
  const meshObjects = everyObject.filter((o) => MESH_KINDS[kindKey(o)]);
  const coreObjects = everyObject.filter((o) => !MESH_KINDS[kindKey(o)]);

  it('has a schema for every object: Istio kinds in @kubernetes-models/istio, the rest in kubernetes-models', () => {
    expect(coreObjects.filter((o) => !KINDS[kindKey(o)]).map(describeObject)).toEqual([]);
    expect(meshObjects.map(kindKey).sort()).toEqual([
      'install.istio.io/v1alpha1/IstioOperator',
      'networking.istio.io/v1/DestinationRule',
      'networking.istio.io/v1/DestinationRule',
      'networking.istio.io/v1/DestinationRule',
      'networking.istio.io/v1/DestinationRule',
      'networking.istio.io/v1/ServiceEntry',
      'networking.istio.io/v1alpha3/EnvoyFilter',
      'networking.istio.io/v1alpha3/EnvoyFilter',
      'security.istio.io/v1/AuthorizationPolicy',
      'security.istio.io/v1/AuthorizationPolicy',
    ]);
  });

  it('validates every Istio object with @kubernetes-models/istio', () => {
    expect(esmModelProblems(meshObjects).flat()).toEqual([]);
  });

  // Istio's own CRDs (istio/api), strict about unknown fields as the API server is, and their CEL rules, which the
  // models do not run. IstioOperator is not among them (istioctl reads it; its meshConfig is held to the proto below).
  const istioCrds = new CrdSchemas([
    repoPath('test', 'deploy', 'schemas', 'istio-api', 'kubernetes', 'customresourcedefinitions.gen.yaml'),
  ]);
  const crdObjects = meshObjects.filter((o) => o.kind !== 'IstioOperator');

  it.each(crdObjects.map((o) => [describeObject(o), o] as const))("%s validates against Istio's own CRD schema", (_name, object) => {
    expect(istioCrds.problems(object)).toEqual([]);
  });

  it("passes the CEL rules of Istio's CRDs, every one of them evaluated; a broken ServiceEntry fails them", () => {
    expect(istioCrds.celProblems(crdObjects)).toEqual({ failed: [], unevaluated: [] });
    const entry = JSON.parse(JSON.stringify(findObject(sidecar, 'ServiceEntry', 'gateway-authz-local'))) as ServiceEntry;
    entry.spec.resolution = 'NONE';
    entry.spec.hosts.push('*');
    expect(istioCrds.celProblems([entry])).toEqual({
      failed: [
        'ServiceEntry/gateway-authz-local: /spec: NONE mode cannot set endpoints',
        'ServiceEntry/gateway-authz-local: /spec/hosts/2: hostname cannot be wildcard',
      ],
      unevaluated: [],
    });
  });

  it.each(coreObjects.map((o) => [describeObject(o), o] as const))('%s validates (kubernetes-models)', (_name, object) => {
    expect(schemaProblems(object)).toEqual([]);
  });

  it('has no unknown fields (type check against the models’ interfaces)', () => {
    // IstioOperator's model declares no spec (its CRD keeps any): its one field, meshConfig, is held to the proto below.
    const typed = everyObject.filter((o) => o.kind !== 'IstioOperator');
    expect(typeProblems(typed, { ...KINDS, ...MESH_KINDS })).toEqual([]);
  });

  it("checks the mesh config against Istio's own protos (istio.mesh.v1alpha1.MeshConfig), and the IstioOperator holds nothing else", () => {
    expect(meshConfigProblems(meshConfig)).toEqual([]);
    expect(meshConfigObjects).toHaveLength(1);
    expect(Object.keys(meshConfigObjects[0]!).sort()).toEqual(['apiVersion', 'kind', 'metadata', 'spec']);
    expect(Object.keys(meshConfigObjects[0]!.spec as object)).toEqual(['meshConfig']);
  });

  it("checks what the EnvoyFilters insert against Envoy's protos", () => {
    for (const filter of sharedPolicies.concat(sidecar).filter((o) => o.kind === 'EnvoyFilter') as EnvoyFilter[]) {
      const [extProc, acceptEncoding] = filter.spec.configPatches;
      expect(protoProblems('envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter', extProc!.patch.value)).toEqual([]);
      // A MERGE value is a partial VirtualHost (no name or domains), so its one field is checked on its own.
      expect(Object.keys(acceptEncoding!.patch.value)).toEqual(['request_headers_to_add']);
      for (const option of acceptEncoding!.patch.value.request_headers_to_add as unknown[])
        expect(protoProblems('envoy.config.core.v3.HeaderValueOption', option)).toEqual([]);
    }
  });

  it('catches a misspelt field, a wrong type and a wrong enum (so a green run means something)', () => {
    // Mesh config: a misspelt provider field and a string where the proto has a number.
    const broken = JSON.parse(JSON.stringify(meshConfig)) as MeshConfig;
    const grpc = broken.extensionProviders[0]!.envoyExtAuthzGrpc as unknown as Record<string, unknown>;
    grpc.failOpn = grpc.failOpen;
    delete grpc.failOpen;
    grpc.port = 'ninety';
    expect(meshConfigProblems(broken)).toEqual([
      "extensionProviders[0].envoyExtAuthzGrpc.port: expected an integer (uint32), got string 'ninety'",
      "extensionProviders[0].envoyExtAuthzGrpc.failOpn: unknown field 'failOpn' in istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.EnvoyExternalAuthorizationGrpcProvider",
    ]);
    // AuthorizationPolicy: a wrong enum (the model's schema) and a misspelt field (the interface).
    const policy = JSON.parse(JSON.stringify(findObject(sidecar, 'AuthorizationPolicy', 'gateway-authz'))) as AuthorizationPolicy;
    policy.spec.action = 'EXTERNAL';
    expect(esmModelProblems([policy]).flat()).toEqual([
      expect.stringMatching(/^AuthorizationPolicy\/gateway-authz: \/spec\/action must be equal to one of the allowed values/),
    ]);
    const misspelt = JSON.parse(JSON.stringify(findObject(sidecar, 'AuthorizationPolicy', 'gateway-authz'))) as Record<
      string,
      Record<string, unknown>
    >;
    misspelt.spec!.provder = misspelt.spec!.provider;
    delete misspelt.spec!.provider;
    expect(typeProblems([misspelt as K8sObject], MESH_KINDS)).toEqual([expect.stringContaining(`'"provder"' does not exist`)]);
    // EnvoyFilter: a misspelt ext_proc field is caught by Envoy's protos.
    const filter = JSON.parse(JSON.stringify(findObject<EnvoyFilter>(sidecar, 'EnvoyFilter', 'gateway-authz-metering'))) as EnvoyFilter;
    const value = filter.spec.configPatches[0]!.patch.value as { typed_config: Record<string, unknown> };
    value.typed_config.observability_mod = true;
    expect(protoProblems('envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter', value)).toEqual([
      expect.stringContaining('observability_mod'),
    ]);
  });
});

describe("the ext_authz providers (envoy.yaml's ext_authz filter, where Istio can say it)", () => {
  it.each(['gateway-authz-local', 'gateway-authz'])('%s: timeout, fail-closed 503 and no body, as envoy.yaml', (name) => {
    const grpc = provider(name);
    expect(durationMs(grpc.timeout)).toBe(durationMs(envoyExtAuthz.grpc_service.timeout));
    expect(grpc.failOpen).toBe(false);
    expect(envoyExtAuthz.failure_mode_allow).toBe(false);
    expect(Number(grpc.statusOnError)).toBe(httpStatusOf(envoyExtAuthz.status_on_error.code));
    expect(grpc.includeRequestBodyInCheck).toBeUndefined();
    expect(envoyExtAuthz.with_request_body).toBeUndefined();
    expect(grpc.port).toBe(Number(envValue(baseAuthzContainer, 'GRPC_PORT')));
  });

  it('sends every request header (so every header the pipeline reads), and leaves the Check answer to strip credentials', () => {
    // Istio's gRPC provider has no header list at all: Envoy's ext_authz then sends every request header to a gRPC
    // service (allowed_headers unset). The header lists, and headersToUpstreamOnAllow (which filters what an HTTP
    // authorizer may set), belong to the HTTP provider only. gateway-authz strips credentials through
    // OkHttpResponse.headers_to_remove, which Envoy applies for a gRPC authorizer whatever the provider says.
    expect(jsonFieldNames(GRPC_PROVIDER_TYPE)).toEqual([
      'clearRouteCache',
      'failOpen',
      'includeRequestBodyInCheck',
      'port',
      'service',
      'statusOnError',
      'timeout',
    ]);
    expect(jsonFieldNames(HTTP_PROVIDER_TYPE)).toEqual(
      expect.arrayContaining(['includeRequestHeadersInCheck', 'headersToUpstreamOnAllow', 'headersToDownstreamOnDeny']),
    );
  });

  it('normalises paths as envoy.yaml does (normalize_path and merge_slashes)', () => {
    expect(meshConfig.pathNormalization.normalization).toBe('MERGE_SLASHES');
  });
});

describe.each([
  {
    layout: 'sidecar',
    objects: sidecar,
    providerName: 'gateway-authz-local',
    /** Where the provider and the metering filter must lead: the ServiceEntry's hosts on the pod's loopback. */
    targets: () => {
      const entry = findObject<ServiceEntry>(sidecar, 'ServiceEntry', 'gateway-authz-local');
      return { authz: entry.spec.hosts[0]!, metering: entry.spec.hosts[1]! };
    },
    replicas: 1,
  },
  {
    layout: 'shared',
    objects: sharedPolicies,
    providerName: 'gateway-authz',
    targets: () => ({
      authz: fqdn(findObject(sharedService, 'Service', 'gateway-authz-grpc')),
      metering: fqdn(findObject(sharedService, 'Service', 'gateway-authz-metering')),
    }),
    replicas: findObject<Workload>(sharedService, 'Deployment', 'gateway-authz').spec.replicas,
  },
])('Istio, $layout layout', ({ objects, providerName, targets, replicas }) => {
  const policy = findObject<AuthorizationPolicy>(objects, 'AuthorizationPolicy', 'gateway-authz');
  const filter = findObject<EnvoyFilter>(objects, 'EnvoyFilter', 'gateway-authz-metering');
  const rules = objects.filter((o) => o.kind === 'DestinationRule') as DestinationRule[];
  const ruleFor = (host: string) => {
    const found = rules.find((r) => r.spec.host === host);
    if (!found) throw new Error(`no DestinationRule for ${host}`);
    return found;
  };
  const appPort = Number(policy.spec.rules[0]!.to[0]!.operation.ports[0]);

  it('asks its provider on every request to the application port, and the provider leads to gateway-authz', () => {
    expect(policy.spec.action).toBe('CUSTOM');
    expect(policy.spec.provider.name).toBe(providerName);
    expect(policy.spec.rules).toEqual([{ to: [{ operation: { ports: [String(appPort)] } }] }]);
    expect(provider(providerName).service).toBe(targets().authz);
    expect(ruleFor(targets().authz)).toBeDefined();
  });

  it("meters with envoy.yaml's ext_proc filter, right after ext_authz, on the application port, through its own cluster", () => {
    const [extProc, acceptEncoding] = filter.spec.configPatches;
    expect(filter.spec.workloadSelector.labels).toEqual(policy.spec.selector.matchLabels);
    expect(extProc!.applyTo).toBe('HTTP_FILTER');
    expect(extProc!.match).toEqual({
      context: 'SIDECAR_INBOUND',
      listener: {
        portNumber: appPort,
        filterChain: { filter: { name: 'envoy.filters.network.http_connection_manager', subFilter: { name: EXT_AUTHZ_FILTER } } },
      },
    });
    expect(extProc!.patch.operation).toBe('INSERT_AFTER');
    const value = extProc!.patch.value as { name: string; typed_config: Record<string, unknown> };
    expect(value.name).toBe(EXT_PROC_FILTER);
    // Field for field envoy.yaml's filter (its processing mode, observability and fail-open mode, attributes, retries,
    // deferred close), but the cluster.
    const grpcPath = ['grpc_service', 'envoy_grpc'];
    expect(without(value.typed_config, grpcPath)).toEqual(without(envoyExtProc, grpcPath));
    const meteringCluster = outboundCluster(targets().metering, 9191);
    expect((value.typed_config.grpc_service as { envoy_grpc: unknown }).envoy_grpc).toEqual({
      cluster_name: meteringCluster,
      authority: meteringCluster.replace(/\|/g, '_.'),
    });
    // envoy.yaml's accept-encoding toward the upstream, on the same port's inbound routes.
    expect(acceptEncoding).toEqual({
      applyTo: 'VIRTUAL_HOST',
      match: { context: 'SIDECAR_INBOUND', routeConfiguration: { portNumber: appPort } },
      patch: { operation: 'MERGE', value: { request_headers_to_add: [envoyAcceptEncoding] } },
    });
  });

  it("bounds the application port's requests as envoy.yaml does, so every answer ends within a credit hold's lifetime", () => {
    const [, , listener, route] = filter.spec.configPatches;
    expect(listener).toMatchObject({
      applyTo: 'NETWORK_FILTER',
      match: {
        context: 'SIDECAR_INBOUND',
        listener: { portNumber: appPort, filterChain: { filter: { name: 'envoy.filters.network.http_connection_manager' } } },
      },
      patch: { operation: 'MERGE' },
    });
    const hcm = listener!.patch.value.typed_config as { request_timeout: string; stream_idle_timeout: string };
    expect(durationMs(hcm.request_timeout)).toBe(durationMs(envoyRequestTimeout));
    expect(durationMs(hcm.stream_idle_timeout)).toBe(durationMs(envoyStreamIdleTimeout));
    expect(route).toEqual({
      applyTo: 'HTTP_ROUTE',
      match: { context: 'SIDECAR_INBOUND', routeConfiguration: { portNumber: appPort } },
      patch: { operation: 'MERGE', value: { route: { timeout: envoyRouteTimeout } } },
    });
    // A MERGE value is a part of its message: its fields are checked, not the message's required ones.
    expect(mergeProblems('envoy.config.listener.v3.Filter', listener!.patch.value)).toEqual([]);
    expect(mergeProblems('envoy.config.listener.v3.Filter', { typed_config: { ...hcm, request_timout: '60s' } })).toEqual([
      expect.stringContaining("unknown field 'request_timout'"),
    ]);
    expect(mergeProblems('envoy.config.route.v3.RouteAction', route!.patch.value.route)).toEqual([]);
    expect(mergeProblems('envoy.config.route.v3.RouteAction', { timout: '600s' })).toEqual([
      expect.stringContaining("unknown field 'timout'"),
    ]);
    expect((durationMs(hcm.request_timeout) + durationMs(envoyRouteTimeout) + 60_000) * 1000).toBeLessThanOrEqual(HOLD_LIFETIME_US);
  });

  it("gives the ext_authz cluster envoy.yaml's connect timeout and circuit-breaker rule, and metering a cluster of its own", () => {
    const authz = ruleFor(targets().authz).spec.trafficPolicy;
    const metering = ruleFor(targets().metering).spec.trafficPolicy;
    expect(targets().metering).not.toBe(targets().authz);
    expect(durationMs(authz.connectionPool.tcp.connectTimeout)).toBe(durationMs(envoyAuthzCluster.connect_timeout));
    expect(durationMs(metering.connectionPool.tcp.connectTimeout)).toBe(durationMs(envoyAuthzCluster.connect_timeout));
    const breaker = authzBreakerView({
      maxRequests: authz.connectionPool.http.http2MaxRequests,
      maxPending: authz.connectionPool.http.http1MaxPendingRequests,
      maxConnections: authz.connectionPool.tcp.maxConnections,
    });
    expect(extAuthzCircuitBreakerProblems(breaker, capacityOf(baseAuthzContainer.env ?? [], replicas))).toEqual([]);
    expect(metering.connectionPool.http.http2MaxRequests).toBeGreaterThan(authz.connectionPool.http.http2MaxRequests);
  });
});

describe('Istio, sidecar layout: the pod', () => {
  const app = findObject<Workload>(sidecar, 'Deployment', 'llm-api');
  const authz = containerOf(app, 'gateway-authz');
  const entry = findObject<ServiceEntry>(sidecar, 'ServiceEntry', 'gateway-authz-local');

  it("runs the base's gateway-authz container beside the application, with the base's settings and admin Secret", () => {
    expect(authz).toEqual(baseAuthzContainer);
    for (const [kind, name] of [
      ['ConfigMap', 'gateway-authz-settings'],
      ['Secret', 'gateway-authz-admin'],
    ] as const) {
      expect({ kind, name, ...contentOf(findObject(sidecar, kind, name)) }).toEqual({
        kind,
        name,
        ...contentOf(findObject(base, kind, name)),
      });
    }
    for (const object of sidecar)
      expect(`${describeObject(object)} in ${object.metadata?.namespace}`).toBe(`${describeObject(object)} in llm-api`);
  });

  it("reaches gateway-authz on the pod's loopback, where it listens, over HTTP/2", () => {
    expect(entry.spec.endpoints).toEqual([{ address: envValue(authz, 'GRPC_BIND_ADDRESS') }]);
    expect(entry.spec.ports).toEqual([{ name: 'grpc', number: Number(envValue(authz, 'GRPC_PORT')), protocol: 'GRPC' }]);
    expect(entry.spec.resolution).toBe('STATIC');
  });

  it("gates the application's port only, on the application's pods, with a sidecar injected", () => {
    const policy = findObject<AuthorizationPolicy>(sidecar, 'AuthorizationPolicy', 'gateway-authz');
    const labels = app.spec.template.metadata.labels;
    expect(selects(policy.spec.selector.matchLabels, labels)).toBe(true);
    expect(labels['sidecar.istio.io/inject']).toBe('true');
    const appPorts = containerOf(app, 'llm-api').ports!.map((p) => p.containerPort);
    expect(policy.spec.rules[0]!.to[0]!.operation.ports).toEqual(appPorts.map(String));
    // gateway-authz's own admin and customer ports are not gated by a customer key.
    for (const port of authz.ports!) expect(appPorts).not.toContain(port.containerPort);
  });
});
