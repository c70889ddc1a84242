/**
 * deploy/ (kustomize base): every manifest, and every object the generators
 * make, is validated against the Kubernetes schemas (kubernetes-models) and
 * type-checked for unknown fields; then the properties that matter are
 * asserted: probes, drain timing, security context, selectors, references,
 * the admin Secret's placeholder, and the Envoy config in the ConfigMap
 * (through the same strict Bootstrap checker as envoy.yaml).
 *
 * No cluster and no kustomize binary run here: support/kustomize.ts is a
 * stand-in for the features the kustomization uses (it refuses any other).
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';

import { checkBootstrap } from './support/envoy-bootstrap';
import {
  acceptEncodingProblems,
  accessLogProblems,
  authzDisabledOn,
  clusterEndpoints,
  extProcClusterProblems,
  extProcProblems,
  extAuthzClusterProblems,
  extAuthzProblems,
  onlyListener,
  retryProblems,
  routeFor,
} from './support/envoy-semantics';
import { describeObject, KINDS, kindKey, schemaProblems, typeProblems } from './support/k8s-schemas';
import { kustomizeBuild, podContainers, readKustomization, type K8sObject } from './support/kustomize';
import { parseYaml, parseYamlDocuments, readRepoFile, REPO_ROOT, repoPath } from './support/repo-files';
import { loadSettings } from '../../src/platform/settings';
import type { IDeployment } from 'kubernetes-models/apps/v1/Deployment';
import type { IPodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import type { INetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import type { IConfigMap } from 'kubernetes-models/v1/ConfigMap';
import type { IContainer } from 'kubernetes-models/v1/Container';
import type { ISecret } from 'kubernetes-models/v1/Secret';
import type { IService } from 'kubernetes-models/v1/Service';

/**
 * A manifest as these tests read it: every field of its kubernetes-models interface present. A field the
 * manifest lacks is undefined at run time and fails the assertion that reads it.
 */
type Present<T> = T extends readonly (infer U)[] ? Present<U>[] : T extends object ? { [K in keyof T]-?: Present<NonNullable<T[K]>> } : T;

interface Kinds {
  Deployment: IDeployment;
  ConfigMap: IConfigMap;
  Secret: ISecret;
  Service: IService;
  PodDisruptionBudget: IPodDisruptionBudget;
  NetworkPolicy: INetworkPolicy;
}
type Container = Present<IContainer>;

const DEPLOY = repoPath('deploy');
/** The real admin-token.env is git-ignored; the checked-in example stands in for it. */
const SUBSTITUTES = { 'admin-token.env': 'admin-token.env.example' };
const built = kustomizeBuild(DEPLOY, SUBSTITUTES);
const objects = built.objects;

function only<Kind extends keyof Kinds>(kind: Kind, name?: string): Present<Kinds[Kind]> {
  const found = objects.filter((o) => o.kind === kind && (name === undefined || o.metadata?.name === name));
  if (found.length !== 1) throw new Error(`expected one ${kind}${name ? `/${name}` : ''}, found ${found.length}`);
  return found[0] as Present<Kinds[Kind]>;
}

const deployment = only('Deployment', 'gateway-authz');
const podSpec = deployment.spec.template.spec;
const podLabels: Record<string, string> = deployment.spec.template.metadata.labels;
const container = (name: string): Container => {
  const found = podSpec.containers.find((c) => c.name === name);
  if (!found) throw new Error(`no container ${name}`);
  return found;
};
const envOf = (c: Container) => Object.fromEntries((c.env ?? []).map((e) => [e.name, e]));
const envValue = (c: Container, name: string): string => {
  const entry = envOf(c)[name];
  if (!entry || typeof entry.value !== 'string') throw new Error(`${c.name}: env ${name} has no literal value`);
  return entry.value;
};
/** A container port by name or number. */
const portNumber = (c: Container, port: string | number): number => {
  if (typeof port === 'number') return port;
  const found = (c.ports ?? []).find((p) => p.name === port);
  if (!found) throw new Error(`${c.name} has no port named ${port}`);
  return found.containerPort;
};
const selects = (selector: Record<string, string>, labels: Record<string, string>) =>
  Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels[k] === v);

describe('deploy/kustomization.yaml', () => {
  it('lists every manifest in deploy/ and uses only files that exist', () => {
    const k = readKustomization(DEPLOY);
    const manifests = fs.readdirSync(DEPLOY).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml' && f !== 'envoy.yaml');
    expect([...k.resources!].sort()).toEqual(manifests.sort());
    expect(k.configMapGenerator!.map((g) => g.name).sort()).toEqual(['gateway-authz-envoy', 'gateway-authz-settings']);
    expect(k.configMapGenerator!.find((g) => g.name === 'gateway-authz-envoy')!.files).toEqual(['envoy.yaml']);
  });

  it('builds the expected objects', () => {
    expect(objects.map(describeObject).sort()).toEqual([
      'ConfigMap/gateway-authz-envoy',
      'ConfigMap/gateway-authz-settings',
      'Deployment/gateway-authz',
      'NetworkPolicy/gateway-authz',
      'PodDisruptionBudget/gateway-authz',
      'Secret/gateway-authz-admin',
      'Service/gateway-authz',
      'Service/gateway-authz-admin',
      'Service/gateway-authz-customer',
    ]);
    expect(container('gateway-authz').image).toBe('gateway-authz:dev');
    expect(container('envoy').image).toMatch(/^envoyproxy\/envoy:v1\.36[.-]/);
  });
});

describe('Kubernetes schemas (kubernetes-models 4.5.1)', () => {
  it.each(objects.map((o) => [describeObject(o), o] as const))('%s validates', (_name, object) => {
    expect(KINDS[kindKey(object)]).toBeDefined();
    expect(schemaProblems(object)).toEqual([]);
  });

  it('has no unknown fields anywhere (type check against the kubernetes-models interfaces)', () => {
    expect(typeProblems(objects)).toEqual([]);
  });

  it('catches a wrong type, a bad enum and a misspelled field (so a green run means something)', () => {
    // The wrong values are written through plain records: the types would refuse them, as they should.
    const broken = JSON.parse(JSON.stringify(deployment)) as typeof deployment;
    (broken.spec.template.spec.containers[1]!.ports[0] as Record<string, unknown>).containerPort = '9191';
    (broken.spec.strategy as Record<string, unknown>).type = 'Rolling';
    expect(schemaProblems(broken)).toEqual([
      'Deployment/gateway-authz: /spec/strategy/type must be equal to one of the allowed values',
      'Deployment/gateway-authz: /spec/template/spec/containers/1/ports/0/containerPort must be integer',
    ]);
    const misspelled = JSON.parse(JSON.stringify(deployment)) as typeof deployment;
    const authz = misspelled.spec.template.spec.containers.find((c) => c.name === 'gateway-authz') as Record<string, unknown>;
    authz.readinesProbe = authz.readinessProbe;
    delete authz.readinessProbe;
    expect(schemaProblems(misspelled)).toEqual([]); // kubernetes-models alone would let it through
    expect(typeProblems([misspelled])).toEqual([
      expect.stringMatching(/^Deployment\/gateway-authz: .*'"readinesProbe"' does not exist in type 'IContainer'/),
    ]);
  });
});

describe('the pod', () => {
  it('runs 2 replicas of envoy + gateway-authz with matching selector and template labels', () => {
    expect(deployment.spec.replicas).toBe(2);
    expect(podSpec.containers.map((c) => c.name)).toEqual(['envoy', 'gateway-authz']);
    expect(selects(deployment.spec.selector.matchLabels, podLabels)).toBe(true);
    expect(deployment.spec.strategy.rollingUpdate.maxUnavailable).toBe(0);
  });

  it('configures gateway-authz from the ConfigMap and the admin Secret, with a drain delay', () => {
    const authz = container('gateway-authz');
    expect(envValue(authz, 'GRPC_PORT')).toBe('9191');
    expect(envValue(authz, 'ADMIN_PORT')).toBe('9192');
    expect(envValue(authz, 'CUSTOMER_PORT')).toBe('9193');
    expect(portNumber(authz, 'customer')).toBe(9193);
    expect(envValue(authz, 'SHUTDOWN_DRAIN_DELAY_MS')).toBe('5000');
    const env = envOf(authz);
    expect(env.REDIS_URL!.valueFrom.configMapKeyRef).toEqual({ name: 'gateway-authz-settings', key: 'REDIS_URL' });
    expect(only('ConfigMap', 'gateway-authz-settings').data.REDIS_URL).toMatch(/^rediss?:\/\/[^:/]+:\d+/);
    expect(env.ADMIN_TOKEN!.valueFrom.secretKeyRef).toEqual({ name: 'gateway-authz-admin', key: 'ADMIN_TOKEN' });
    // A durable choice for usage (docs/concepts/durability.md), one the settings loader accepts with the ConfigMap's Redis.
    expect(env.USAGE_DURABILITY!.valueFrom.configMapKeyRef).toEqual({ name: 'gateway-authz-settings', key: 'USAGE_DURABILITY' });
    const settings = only('ConfigMap', 'gateway-authz-settings').data;
    const loaded = loadSettings({ REDIS_URL: settings.REDIS_URL, USAGE_DURABILITY: settings.USAGE_DURABILITY });
    expect(loaded.ok && loaded.settings.usage.durability).toEqual({ mode: 'appendfsync-always' });
    expect(Object.keys(only('Secret', 'gateway-authz-admin').data)).toEqual(['ADMIN_TOKEN']);
    // Every env value is a string (Kubernetes refuses numbers) and every reference resolves.
    for (const c of podContainers(deployment)) {
      for (const entry of c.env ?? []) {
        if ('value' in entry) expect(typeof entry.value).toBe('string');
        const cm = entry.valueFrom?.configMapKeyRef;
        if (cm) expect(only('ConfigMap', cm.name).data).toHaveProperty([cm.key]);
        const secret = entry.valueFrom?.secretKeyRef;
        if (secret) expect(only('Secret', secret.name).data).toHaveProperty([secret.key]);
      }
    }
    for (const volume of podSpec.volumes) if (volume.configMap) expect(only('ConfigMap', volume.configMap.name)).toBeDefined();
  });

  it('listens for gRPC on the pod loopback only (its Envoy is beside it), for admin and customers on the pod IP', () => {
    const authz = container('gateway-authz');
    expect(envValue(authz, 'GRPC_BIND_ADDRESS')).toBe('127.0.0.1');
    expect(envValue(authz, 'ADMIN_BIND_ADDRESS')).toBe('0.0.0.0');
    expect(envValue(authz, 'CUSTOMER_BIND_ADDRESS')).toBe('0.0.0.0');
    // The pod's Envoy calls both gRPC services on that loopback address.
    const view = checkBootstrap(parseYaml(only('ConfigMap', 'gateway-authz-envoy').data['envoy.yaml']!)).view;
    for (const name of ['ext_authz', 'ext_proc']) {
      expect(clusterEndpoints(view, name)).toEqual([{ address: envValue(authz, 'GRPC_BIND_ADDRESS'), port: 9191 }]);
    }
    // No probe dials the gRPC port: the kubelet reaches only the pod IP.
    for (const probe of [authz.readinessProbe, authz.livenessProbe, authz.startupProbe]) {
      expect(probe.grpc).toBeUndefined();
      expect(portNumber(authz, probe.httpGet.port)).toBe(9192);
    }
    const literal = Object.fromEntries(
      (authz.env ?? []).flatMap((e) => ('value' in e && e.value !== undefined ? [[e.name, e.value]] : [])),
    );
    const result = loadSettings(literal);
    expect(result.ok && [result.settings.grpcBindAddress, result.settings.adminBindAddress, result.settings.customerBindAddress]).toEqual([
      '127.0.0.1',
      '0.0.0.0',
      '0.0.0.0',
    ]);
  });

  it('probes gateway-authz readiness on /readyz 9192 (Redis answers, not shutting down) and liveness on /healthz 9192', () => {
    const authz = container('gateway-authz');
    expect(authz.readinessProbe.httpGet.path).toBe('/readyz');
    expect(portNumber(authz, authz.readinessProbe.httpGet.port)).toBe(9192);
    expect(portNumber(authz, 'grpc')).toBe(9191);
    expect(authz.livenessProbe.httpGet.path).toBe('/healthz');
    expect(portNumber(authz, authz.livenessProbe.httpGet.port)).toBe(9192);
    expect(authz.startupProbe.httpGet.path).toBe('/healthz');
    // Liveness must not follow Redis: it is not the readiness endpoint.
    expect(authz.livenessProbe.httpGet.path).not.toBe('/readyz');
  });

  it("probes Envoy on its own /healthz route (ext_authz disabled there), since Envoy's admin is loopback-only", () => {
    const envoy = container('envoy');
    for (const probe of [envoy.readinessProbe, envoy.livenessProbe]) {
      expect(probe.httpGet.path).toBe('/healthz');
      expect(portNumber(envoy, probe.httpGet.port)).toBe(8080);
    }
    const view = checkBootstrap(parseYaml(only('ConfigMap', 'gateway-authz-envoy').data['envoy.yaml']!)).view;
    const health = routeFor(view, '/healthz')!;
    expect(authzDisabledOn(view, health)).toBe(true);
    expect(health.direct_response.status).toBe(200);
    expect(view.admin.address.socket_address.address).toBe('127.0.0.1');
  });

  it('lets Envoy drain before gateway-authz stops answering, all within the grace period', () => {
    const envoy = container('envoy');
    const authz = container('gateway-authz');
    const preStop = envoy.lifecycle.preStop.exec.command.join(' ');
    expect(preStop).toMatch(/POST \/drain_listeners\?graceful HTTP\/1\.1/);
    expect(preStop).toContain('/dev/tcp/127.0.0.1/9901');
    const sleepSeconds = Number(/sleep (\d+)\s*$/.exec(preStop)?.[1]);
    const drainTimeSeconds = Number(envoy.args[envoy.args.indexOf('--drain-time-s') + 1]);
    const drainDelaySeconds = Number(envValue(authz, 'SHUTDOWN_DRAIN_DELAY_MS')) / 1000;
    const shutdownTimeoutSeconds = Number(envValue(authz, 'SHUTDOWN_TIMEOUT_MS')) / 1000;
    expect(sleepSeconds).toBeGreaterThan(0);
    expect(sleepSeconds).toBeLessThan(drainDelaySeconds); // Envoy is gone before gateway-authz stops answering
    expect(drainTimeSeconds).toBeLessThanOrEqual(sleepSeconds);
    expect(podSpec.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(drainDelaySeconds + shutdownTimeoutSeconds);
    expect(podSpec.terminationGracePeriodSeconds).toBeGreaterThan(sleepSeconds);
    expect(authz.lifecycle).toBeUndefined(); // SIGTERM at once: NOT_SERVING + drain delay
  });

  it('runs both containers non-root, read-only, without privilege escalation or capabilities, with resources', () => {
    expect(podSpec.securityContext.runAsNonRoot).toBe(true);
    expect(podSpec.automountServiceAccountToken).toBe(false);
    for (const c of podSpec.containers) {
      const sc = c.securityContext;
      expect({
        name: c.name,
        readOnly: sc.readOnlyRootFilesystem,
        escalation: sc.allowPrivilegeEscalation,
        drop: sc.capabilities.drop,
      }).toEqual({
        name: c.name,
        readOnly: true,
        escalation: false,
        drop: ['ALL'],
      });
      expect(sc.runAsUser).toBeGreaterThan(0);
      expect(sc.privileged).toBeUndefined();
      for (const part of ['requests', 'limits'] as const)
        for (const resource of ['cpu', 'memory']) expect(c.resources[part][resource]).toBeDefined();
    }
    expect(container('gateway-authz').securityContext.runAsUser).toBe(1000); // `node` in the node:24 image
  });

  it('feeds Envoy the ConfigMap built from deploy/envoy.yaml, and it passes the strict Bootstrap checker', () => {
    const envoy = container('envoy');
    const configMap = only('ConfigMap', 'gateway-authz-envoy');
    expect(configMap.data['envoy.yaml']).toBe(readRepoFile('deploy', 'envoy.yaml'));
    const volume = podSpec.volumes.find((v) => v.configMap?.name === 'gateway-authz-envoy');
    const mount = envoy.volumeMounts.find((m) => m.name === volume!.name)!;
    expect(mount.readOnly).toBe(true);
    expect(envoy.args.slice(0, 2)).toEqual(['-c', `${mount.mountPath}/envoy.yaml`]);

    const view = checkBootstrap(parseYaml(configMap.data['envoy.yaml']!)).view;
    expect(extAuthzProblems(view)).toEqual([]);
    expect(extAuthzClusterProblems(view)).toEqual([]);
    expect(retryProblems(view)).toEqual([]);
    expect(accessLogProblems(view)).toEqual([]);
    expect(extProcProblems(view)).toEqual([]);
    expect(extProcClusterProblems(view)).toEqual([]);
    expect(acceptEncodingProblems(view)).toEqual([]);
    // Envoy's ports and the pod agree.
    expect(onlyListener(view).address.socket_address.port_value).toBe(portNumber(envoy, 'http'));
    expect(clusterEndpoints(view, 'ext_authz')).toEqual([{ address: '127.0.0.1', port: portNumber(container('gateway-authz'), 'grpc') }]);
    expect(clusterEndpoints(view, 'ext_proc')).toEqual([{ address: '127.0.0.1', port: portNumber(container('gateway-authz'), 'grpc') }]);
  });
});

describe('Services, PodDisruptionBudget and NetworkPolicy', () => {
  it('exposes Envoy :8080, the admin API :9192 and the customer dashboard :9193 as ClusterIP Services selecting the pod', () => {
    const publicService = only('Service', 'gateway-authz');
    const admin = only('Service', 'gateway-authz-admin');
    const customer = only('Service', 'gateway-authz-customer');
    for (const [service, containerName, port] of [
      [publicService, 'envoy', 8080],
      [admin, 'gateway-authz', 9192],
      [customer, 'gateway-authz', 9193],
    ] as const) {
      expect(service.spec.type).toBe('ClusterIP');
      expect(selects(service.spec.selector, podLabels)).toBe(true);
      expect(service.spec.ports).toHaveLength(1);
      expect(service.spec.ports[0]!.port).toBe(port);
      expect(portNumber(container(containerName), service.spec.ports[0]!.targetPort)).toBe(port);
    }
    // Nothing exposes the ext_authz gRPC port.
    expect(
      (objects.filter((o) => o.kind === 'Service') as Present<IService>[]).flatMap((s) => s.spec.ports.map((p) => p.port)),
    ).not.toContain(9191);
  });

  it('keeps at least one pod through voluntary disruptions', () => {
    const pdb = only('PodDisruptionBudget');
    expect(pdb.spec.minAvailable).toBe(1);
    expect(pdb.spec.minAvailable).toBeLessThan(deployment.spec.replicas);
    expect(pdb.spec.selector.matchLabels).toEqual(deployment.spec.selector.matchLabels);
    expect(selects(pdb.spec.selector.matchLabels, podLabels)).toBe(true);
  });

  it('admits other pods only to 8080, 9192 and 9193, never to the gRPC port', () => {
    const policy = only('NetworkPolicy');
    expect(selects(policy.spec.podSelector.matchLabels, podLabels)).toBe(true);
    expect(policy.spec.policyTypes).toEqual(['Ingress']);
    const ports = policy.spec.ingress.flatMap((rule) => rule.ports.map((p) => p.port)).sort();
    expect(ports).toEqual([8080, 9192, 9193]);
  });
});

describe('the admin token', () => {
  const example = readRepoFile('deploy', 'admin-token.env.example');
  const token = /^ADMIN_TOKEN=(.*)$/m.exec(example)?.[1] ?? '';

  it('ships only a placeholder, too short for gateway-authz to accept (it refuses tokens under 16 characters)', () => {
    expect(token).toMatch(/REPLACE/);
    expect(token.length).toBeLessThan(16);
    expect(Buffer.from(only('Secret', 'gateway-authz-admin').data.ADMIN_TOKEN!, 'base64').toString()).toBe(token);
  });

  it('keeps the real token file out of git and holds no token-like value in deploy/', () => {
    expect(readRepoFile('deploy', '.gitignore').split('\n')).toContain('admin-token.env');
    const tracked = execFileSync('git', ['ls-files', 'deploy'], { cwd: REPO_ROOT, encoding: 'utf8' }).split('\n');
    // The mesh layouts under deploy/ (istio/, envoy-gateway/, shared-service/) each generate their own admin Secret too.
    expect(tracked.filter((file) => file.endsWith('/admin-token.env'))).toEqual([]);
    const files = (fs.readdirSync(DEPLOY, { recursive: true }) as string[]).filter(
      (f) => !f.endsWith('admin-token.env') && fs.statSync(repoPath('deploy', f)).isFile(),
    );
    for (const file of files) {
      const text = readRepoFile('deploy', file);
      expect({ file, hex: /\b[0-9a-f]{32,}\b/i.test(text), customerKey: /gk_(live|test)_[A-Za-z0-9]{20,}/.test(text) }).toEqual({
        file,
        hex: false,
        customerKey: false,
      });
    }
    // No Secret object is written out by hand: the only one comes from the generator.
    for (const file of readKustomization(DEPLOY).resources as string[]) {
      const kinds = (parseYamlDocuments(readRepoFile('deploy', file), file) as K8sObject[]).map((d) => d.kind);
      expect(kinds).not.toContain('Secret');
    }
    expect(built.sources.get(only('Secret'))).toBe('secretGenerator gateway-authz-admin');
  });
});
