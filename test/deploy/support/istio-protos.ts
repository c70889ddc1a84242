/**
 * Istio's mesh config is not a Kubernetes resource (IstioOperator's spec, the
 * istiod chart's `meshConfig` value and the `istio` ConfigMap all take it
 * free-form), so no CRD schema checks it. Its schema is Istio's own proto,
 * istio.mesh.v1alpha1.MeshConfig: the files under
 * test/deploy/schemas/istio-api/ (istio/api, see the README there) are loaded
 * with protobufjs and the YAML is walked by the same strict converter as
 * envoy.yaml (envoy-bootstrap.ts: unknown fields, JSON types, enum names,
 * deprecated fields).
 */
import * as path from 'node:path';

import type * as protobuf from 'protobufjs';

import { checkMessage, ENVOY_DEPS_DIR, EnvoyConfigError, loadProtoRoot } from './envoy-bootstrap';
import { repoPath } from './repo-files';

export const ISTIO_API_DIR = repoPath('test', 'deploy', 'schemas', 'istio-api');
export const MESH_CONFIG_TYPE = 'istio.mesh.v1alpha1.MeshConfig';
export const GRPC_PROVIDER_TYPE = 'istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.EnvoyExternalAuthorizationGrpcProvider';
export const HTTP_PROVIDER_TYPE = 'istio.mesh.v1alpha1.MeshConfig.ExtensionProvider.EnvoyExternalAuthorizationHttpProvider';

const INCLUDE_DIRS = [
  ISTIO_API_DIR,
  // google/api/field_behavior.proto, which Istio's networking protos import.
  path.join(ENVOY_DEPS_DIR, 'googleapis'),
  path.dirname(require.resolve('protobufjs/package.json')),
];

let cachedRoot: protobuf.Root | undefined;

export function loadIstioRoot(): protobuf.Root {
  cachedRoot ??= loadProtoRoot(INCLUDE_DIRS, ['mesh/v1alpha1/config.proto']);
  return cachedRoot;
}

/** The problems of a mesh config against istio.mesh.v1alpha1.MeshConfig (empty when it is valid). */
export function meshConfigProblems(meshConfig: unknown): string[] {
  try {
    checkMessage(MESH_CONFIG_TYPE, meshConfig, loadIstioRoot());
    return [];
  } catch (error) {
    if (error instanceof EnvoyConfigError) return [...error.problems];
    throw error;
  }
}

/** The JSON names of a message's fields (what a YAML key may be). */
export function jsonFieldNames(typeName: string): string[] {
  return loadIstioRoot()
    .lookupType(typeName)
    .fieldsArray.map((field) => field.name.replace(/_([a-z])/g, (_m, letter: string) => letter.toUpperCase()))
    .sort();
}
