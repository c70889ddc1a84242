/**
 * deploy/shared-service/: gateway-authz as one shared service for a mesh or a
 * gateway (used by deploy/istio/shared/ and deploy/envoy-gateway/). Built with
 * the kustomize stand-in, every object is validated with kubernetes-models and
 * type-checked for unknown fields; the gateway-authz container, the settings,
 * the admin Secret and the PDB are held equal to the base's (deploy/), so the
 * layouts cannot drift apart; the Services reach the gRPC port.
 */
import { describeObject, schemaProblems, typeProblems } from './support/k8s-schemas';
import type { K8sObject } from './support/kustomize';
import {
  base,
  baseAuthzContainer,
  buildLayout,
  containerOf,
  contentOf,
  envValue,
  findObject,
  selects,
  type Workload,
} from './support/layouts';
import type { IContainer } from 'kubernetes-models/v1/Container';

type ServiceObject = K8sObject & {
  spec: { selector: Record<string, string>; ports: { name: string; port: number; targetPort: string; appProtocol?: string }[] };
};

const shared = buildLayout('shared-service');
const deployment = findObject<Workload>(shared, 'Deployment', 'gateway-authz');
const authz = containerOf(deployment, 'gateway-authz');

describe('deploy/shared-service (kustomize build)', () => {
  it('builds gateway-authz alone, with two gRPC Services, in the gateway-authz namespace', () => {
    expect(shared.map(describeObject).sort()).toEqual([
      'ConfigMap/gateway-authz-settings',
      'Deployment/gateway-authz',
      'NetworkPolicy/gateway-authz',
      'PodDisruptionBudget/gateway-authz',
      'Secret/gateway-authz-admin',
      'Service/gateway-authz-admin',
      'Service/gateway-authz-customer',
      'Service/gateway-authz-grpc',
      'Service/gateway-authz-metering',
    ]);
    for (const object of shared)
      expect({ object: describeObject(object), namespace: object.metadata?.namespace }).toEqual({
        object: describeObject(object),
        namespace: 'gateway-authz',
      });
    expect(deployment.spec.template.spec.containers.map((c) => c.name)).toEqual(['gateway-authz']);
  });

  it.each(shared.map((o) => [describeObject(o), o] as const))('%s validates (kubernetes-models)', (_name, object) => {
    expect(schemaProblems(object)).toEqual([]);
  });

  it('has no unknown fields (type check against the kubernetes-models interfaces)', () => {
    expect(typeProblems(shared)).toEqual([]);
  });
});

describe('the shared gateway-authz, held to the base', () => {
  it("runs the base's gateway-authz container, with gRPC on the pod IP instead of loopback", () => {
    expect(envValue(baseAuthzContainer, 'GRPC_BIND_ADDRESS')).toBe('127.0.0.1');
    expect(envValue(authz, 'GRPC_BIND_ADDRESS')).toBe('0.0.0.0');
    const withoutBind = (c: IContainer) => ({ ...c, env: c.env?.filter((e) => e.name !== 'GRPC_BIND_ADDRESS') });
    expect(withoutBind(authz)).toEqual(withoutBind(baseAuthzContainer));
  });

  it("uses the base's settings, admin Secret, PDB, replicas and pod labels", () => {
    for (const [kind, name] of [
      ['ConfigMap', 'gateway-authz-settings'],
      ['Secret', 'gateway-authz-admin'],
      ['PodDisruptionBudget', 'gateway-authz'],
      ['Service', 'gateway-authz-admin'],
      ['Service', 'gateway-authz-customer'],
    ] as const) {
      expect({ kind, name, ...contentOf(findObject(shared, kind, name)) }).toEqual({
        kind,
        name,
        ...contentOf(findObject(base, kind, name)),
      });
    }
    const baseDeployment = findObject<Workload>(base, 'Deployment', 'gateway-authz');
    expect(deployment.spec.replicas).toBe(baseDeployment.spec.replicas);
    expect(deployment.spec.template.metadata.labels).toEqual(baseDeployment.spec.template.metadata.labels);
  });

  it.each(['gateway-authz-grpc', 'gateway-authz-metering'])('%s reaches the gRPC port of the gateway-authz pods over HTTP/2', (name) => {
    const service = findObject<ServiceObject>(shared, 'Service', name);
    const labels = deployment.spec.template.metadata.labels;
    expect(selects(service.spec.selector, labels)).toBe(true);
    const grpcPort = authz.ports!.find((p) => p.name === 'grpc')!;
    expect(service.spec.ports).toEqual([{ name: 'grpc', port: 9191, targetPort: 'grpc', protocol: 'TCP', appProtocol: 'grpc' }]);
    expect(grpcPort.containerPort).toBe(Number(envValue(authz, 'GRPC_PORT')));
  });

  it('lets other pods reach the gRPC port (the mesh calls it), as well as admin and customer', () => {
    const policy = findObject<K8sObject & { spec: { ingress: { ports: { port: number }[] }[] } }>(shared, 'NetworkPolicy', 'gateway-authz');
    expect(policy.spec.ingress.flatMap((rule) => rule.ports.map((p) => p.port)).sort()).toEqual([9191, 9192, 9193]);
  });
});
