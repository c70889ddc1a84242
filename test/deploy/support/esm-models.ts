/**
 * Schema checks for the mesh kinds with the projects' own models:
 * @kubernetes-models/istio (generated from Istio's CRDs) and
 * @kubernetes-models/gateway-api (from the Gateway API's Go types). Both ship
 * as ES modules only, which Jest's CommonJS module system cannot load, so
 * their validate() runs in a child Node process (validate-esm-models.mjs).
 * Their TypeScript interfaces serve the unknown-field check
 * (k8s-schemas.ts typeProblems), as kubernetes-models' do for core kinds.
 */
import { execFileSync } from 'node:child_process';
import * as path from 'node:path';

import { kindKey, type TypedKind } from './k8s-schemas';
import type { K8sObject } from './kustomize';

const ISTIO = '@kubernetes-models/istio';
const GATEWAY_API = '@kubernetes-models/gateway-api';

/** apiVersion/kind -> the module exporting its model class (named after the kind) and its interface. */
export const MESH_KINDS: Readonly<Record<string, TypedKind>> = {
  'install.istio.io/v1alpha1/IstioOperator': { module: `${ISTIO}/install.istio.io/v1alpha1/IstioOperator`, iface: 'IIstioOperator' },
  'networking.istio.io/v1/ServiceEntry': { module: `${ISTIO}/networking.istio.io/v1/ServiceEntry`, iface: 'IServiceEntry' },
  'networking.istio.io/v1/DestinationRule': { module: `${ISTIO}/networking.istio.io/v1/DestinationRule`, iface: 'IDestinationRule' },
  'networking.istio.io/v1alpha3/EnvoyFilter': { module: `${ISTIO}/networking.istio.io/v1alpha3/EnvoyFilter`, iface: 'IEnvoyFilter' },
  'security.istio.io/v1/AuthorizationPolicy': {
    module: `${ISTIO}/security.istio.io/v1/AuthorizationPolicy`,
    iface: 'IAuthorizationPolicy',
  },
  'gateway.networking.k8s.io/v1/Gateway': { module: `${GATEWAY_API}/gateway.networking.k8s.io/v1/Gateway`, iface: 'IGateway' },
  'gateway.networking.k8s.io/v1/HTTPRoute': { module: `${GATEWAY_API}/gateway.networking.k8s.io/v1/HTTPRoute`, iface: 'IHTTPRoute' },
  'gateway.networking.k8s.io/v1beta1/ReferenceGrant': {
    module: `${GATEWAY_API}/gateway.networking.k8s.io/v1beta1/ReferenceGrant`,
    iface: 'IReferenceGrant',
  },
};

/** validate() of each object's model, in one child process; the problems of each object, in order, prefixed with Kind/name. */
export function esmModelProblems(objects: readonly K8sObject[]): string[][] {
  const requests = objects.map((object) => {
    const kind = MESH_KINDS[kindKey(object)];
    if (!kind) throw new Error(`no @kubernetes-models module for ${kindKey(object)}`);
    return { module: kind.module, object };
  });
  const output = execFileSync(process.execPath, [path.join(__dirname, 'validate-esm-models.mjs')], {
    input: JSON.stringify(requests),
    encoding: 'utf8',
  });
  const results = JSON.parse(output) as string[][];
  return results.map((problems, index) =>
    problems.map((problem) => `${objects[index]!.kind}/${objects[index]!.metadata?.name}: ${problem}`),
  );
}
