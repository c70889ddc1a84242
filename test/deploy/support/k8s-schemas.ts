/**
 * Kubernetes schema checks for manifests, with the `kubernetes-models`
 * package (generated from the Kubernetes OpenAPI spec):
 *
 *  1. `new Model(obj).validate()`: types, enums, required fields, formats;
 *  2. unknown fields: kubernetes-models' JSON schemas allow additional
 *     properties (a misspelled `readinesProbe` passes), while the API server
 *     rejects them under strict field validation. So the manifests are also
 *     type-checked as object literals against kubernetes-models' TypeScript
 *     interfaces, whose excess-property check names every unknown field, at
 *     any depth.
 */
import * as path from 'node:path';

import * as ts from 'typescript';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';

import { REPO_ROOT } from './repo-files';
import type { K8sObject } from './kustomize';

/** Module and interface for the TypeScript check. */
export interface TypedKind {
  readonly module: string;
  readonly iface: string;
}

interface Kind extends TypedKind {
  readonly model: new (data: K8sObject) => { validate(): void };
}

export const KINDS: Record<string, Kind> = {
  'v1/ConfigMap': { model: ConfigMap, module: 'kubernetes-models/v1/ConfigMap', iface: 'IConfigMap' },
  'v1/Secret': { model: Secret, module: 'kubernetes-models/v1/Secret', iface: 'ISecret' },
  'v1/Service': { model: Service, module: 'kubernetes-models/v1/Service', iface: 'IService' },
  'apps/v1/Deployment': { model: Deployment, module: 'kubernetes-models/apps/v1/Deployment', iface: 'IDeployment' },
  'policy/v1/PodDisruptionBudget': {
    model: PodDisruptionBudget,
    module: 'kubernetes-models/policy/v1/PodDisruptionBudget',
    iface: 'IPodDisruptionBudget',
  },
  'networking.k8s.io/v1/NetworkPolicy': {
    model: NetworkPolicy,
    module: 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy',
    iface: 'INetworkPolicy',
  },
};

export const kindKey = (object: K8sObject) => `${object.apiVersion}/${object.kind}`;
export const describeObject = (object: K8sObject) => `${object.kind}/${object.metadata?.name}`;

/** kubernetes-models validation; returns the problems (empty when valid). */
export function schemaProblems(object: K8sObject): string[] {
  const kind = KINDS[kindKey(object)];
  if (!kind) return [`${describeObject(object)}: no schema for ${kindKey(object)} in this check`];
  try {
    new kind.model(object).validate();
    return [];
  } catch (error) {
    const details = (error as { errors?: Array<{ instancePath: string; message: string }> }).errors;
    const lines = details?.map((d) => `${d.instancePath || '/'} ${d.message}`) ?? [(error as Error).message];
    return lines.map((line) => `${describeObject(object)}: ${line}`);
  }
}

/**
 * Type-checks every object as a literal of its kubernetes-models interface.
 * Returns readable problems, e.g. "Deployment/gateway-authz: 'readinesProbe'
 * does not exist in type 'IIoK8sApiCoreV1Container'". Objects of a kind not
 * in `kinds` are left out.
 */
export function typeProblems(objects: readonly K8sObject[], kinds: Readonly<Record<string, TypedKind>> = KINDS): string[] {
  const fileName = path.join(REPO_ROOT, 'test', 'deploy', '__k8s_manifest_types__.ts');
  const imports: string[] = [];
  const decls: string[] = [];
  const owners: Array<{ start: number; object: K8sObject }> = [];
  const known = objects.filter((object) => kinds[kindKey(object)]);
  known.forEach((object, index) => {
    const kind = kinds[kindKey(object)]!;
    imports.push(`import type { ${kind.iface} as T${index} } from ${JSON.stringify(kind.module)};`);
  });
  let source = `${imports.join('\n')}\n`;
  known.forEach((object, index) => {
    owners.push({ start: source.length, object });
    const decl = `export const m${index}: T${index} = ${JSON.stringify(object, null, 2)};\n`;
    decls.push(decl);
    source += decl;
  });

  const options: ts.CompilerOptions = {
    strict: true,
    noEmit: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.CommonJS,
    moduleResolution: ts.ModuleResolutionKind.Node10,
    skipLibCheck: true,
    types: [],
  };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  const fileExists = host.fileExists.bind(host);
  const readFile = host.readFile.bind(host);
  host.getSourceFile = (name, languageVersion, onError, shouldCreate) =>
    path.resolve(name) === fileName
      ? ts.createSourceFile(name, source, languageVersion, true)
      : getSourceFile(name, languageVersion, onError, shouldCreate);
  host.fileExists = (name) => path.resolve(name) === fileName || fileExists(name);
  host.readFile = (name) => (path.resolve(name) === fileName ? source : readFile(name));

  const program = ts.createProgram([fileName], options, host);
  const sourceFile = program.getSourceFile(fileName)!;
  const diagnostics = [...program.getSyntacticDiagnostics(sourceFile), ...program.getSemanticDiagnostics(sourceFile)];
  return diagnostics.map((diagnostic) => {
    const start = diagnostic.start ?? 0;
    const owner = [...owners].reverse().find((o) => o.start <= start);
    const text = ts.flattenDiagnosticMessageText(diagnostic.messageText, ' ');
    const near = source.slice(start, start + 60).split('\n')[0];
    return `${owner ? describeObject(owner.object) : 'manifest'}: ${text} (at ${near})`;
  });
}
