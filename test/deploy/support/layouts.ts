/**
 * The deploy/ layouts built with the kustomize stand-in, and what the mesh tests read from them: the base (deploy/)
 * is the reference every layout's gateway-authz is held to.
 */
import { describeObject } from './k8s-schemas';
import { kustomizeBuild, type K8sObject } from './kustomize';
import { parseYamlDocuments, readRepoFile, repoPath } from './repo-files';
import type { IContainer } from 'kubernetes-models/v1/Container';

/** The real admin-token.env of each layout is git-ignored; the base's checked-in example stands in for all of them. */
const ADMIN_TOKEN_EXAMPLE = { 'admin-token.env': repoPath('deploy', 'admin-token.env.example') };

/** `kustomize build deploy/<dir>` (the stand-in). */
export const buildLayout = (...dir: string[]) => kustomizeBuild(repoPath('deploy', ...dir), ADMIN_TOKEN_EXAMPLE).objects;

/** Every document of plain manifests (a layout applied with `kubectl apply -f`). */
export const readManifests = (...files: string[][]) =>
  files.flatMap((file) => parseYamlDocuments(readRepoFile(...file), file.join('/')) as K8sObject[]);

export interface Workload extends K8sObject {
  spec: { replicas: number; template: { metadata: { labels: Record<string, string> }; spec: { containers: IContainer[] } } };
}

export function findObject<T extends K8sObject = K8sObject>(objects: readonly K8sObject[], kind: string, name: string): T {
  const found = objects.filter((o) => o.kind === kind && o.metadata?.name === name);
  if (found.length !== 1) throw new Error(`expected one ${kind}/${name}, found ${found.length}`);
  return found[0] as T;
}

export function containerOf(workload: K8sObject, name: string): IContainer {
  const found = (workload as Workload).spec.template.spec.containers.find((c) => c.name === name);
  if (!found) throw new Error(`${describeObject(workload)} has no container ${name}`);
  return found;
}

export const envValue = (container: IContainer, name: string): string | undefined => container.env?.find((e) => e.name === name)?.value;

/** Does a label selector pick pods with these labels? */
export const selects = (selector: Record<string, string>, labels: Record<string, string>) =>
  Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels[k] === v);

export const base = buildLayout();
/** The base's gateway-authz container: the one every layout runs. */
export const baseAuthzContainer = containerOf(findObject(base, 'Deployment', 'gateway-authz'), 'gateway-authz');

/** An object without its metadata, and its labels: what must match the base's. */
export const contentOf = (object: K8sObject) => {
  const { metadata, ...rest } = object;
  return { rest, labels: (metadata as { labels?: unknown } | undefined)?.labels };
};
