/**
 * A small, explicit stand-in for `kustomize build` covering exactly the
 * features deploy/ and its mesh layouts use (resources, files or other
 * kustomization directories; configMapGenerator with files/literals,
 * secretGenerator with envs, images, namespace). Any other kustomization
 * field is an error here, so the stand-in can never silently ignore what the
 * real kustomize would do. Generated names keep no hash suffix (real
 * kustomize appends one and rewrites the references to it).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

import type { IContainer } from 'kubernetes-models/v1/Container';
import type { IPodSpec } from 'kubernetes-models/v1/PodSpec';

import { parseYaml, parseYamlDocuments } from './repo-files';

/** A manifest object: what every kind has is typed, the rest is kind-specific (see k8s-schemas.ts). */
export interface K8sObject {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; namespace?: string };
  [field: string]: unknown;
}

/** A configMapGenerator or secretGenerator entry. */
interface Generator {
  name?: string;
  type?: string;
  files?: string[];
  literals?: string[];
  envs?: string[];
  [field: string]: unknown;
}

interface ImageOverride {
  name?: string;
  newName?: string;
  newTag?: string;
  digest?: string;
  [field: string]: unknown;
}

export interface Kustomization {
  apiVersion?: string;
  kind?: string;
  resources?: string[];
  configMapGenerator?: Generator[];
  secretGenerator?: Generator[];
  images?: ImageOverride[];
  namespace?: string;
  [field: string]: unknown;
}

export interface Built {
  readonly objects: K8sObject[];
  /** Where each object came from (file, or generator name). */
  readonly sources: Map<K8sObject, string>;
}

const SUPPORTED_FIELDS = new Set(['apiVersion', 'kind', 'resources', 'configMapGenerator', 'secretGenerator', 'images', 'namespace']);

export function readKustomization(dir: string): Kustomization {
  return parseYaml(fs.readFileSync(path.join(dir, 'kustomization.yaml'), 'utf8'), 'kustomization.yaml') as Kustomization;
}

/**
 * @param substitutes generator input files to read from another file, e.g.
 *   { 'admin-token.env': 'admin-token.env.example' } (the real one is git-ignored);
 *   a relative path is taken from each kustomization's own directory, also in the bases it includes.
 */
export function kustomizeBuild(dir: string, substitutes: Record<string, string> = {}): Built {
  const k = readKustomization(dir);
  const unsupported = Object.keys(k).filter((key) => !SUPPORTED_FIELDS.has(key));
  if (unsupported.length > 0) throw new Error(`kustomization.yaml uses ${unsupported.join(', ')}, which this stand-in does not implement`);
  if (k.apiVersion !== 'kustomize.config.k8s.io/v1beta1' || k.kind !== 'Kustomization')
    throw new Error('not a kustomize.config.k8s.io/v1beta1 Kustomization');

  const objects: K8sObject[] = [];
  const sources = new Map<K8sObject, string>();
  const add = (object: K8sObject, source: string) => {
    objects.push(object);
    sources.set(object, source);
  };
  const read = (file: string) => fs.readFileSync(path.resolve(dir, substitutes[file] ?? file), 'utf8');

  for (const file of k.resources ?? []) {
    const full = path.resolve(dir, file);
    if (fs.statSync(full).isDirectory()) {
      // Another kustomization (a base): built on its own, its objects taken as they come out.
      const base = kustomizeBuild(full, substitutes);
      for (const object of base.objects) add(object, `${file}/${base.sources.get(object)}`);
      continue;
    }
    for (const doc of parseYamlDocuments(read(file), file)) add(doc as K8sObject, file);
  }

  for (const gen of k.configMapGenerator ?? []) {
    checkKeys(gen, ['name', 'files', 'literals', 'envs'], `configMapGenerator ${gen.name}`);
    add(
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: gen.name }, data: generatorData(gen, read) },
      `configMapGenerator ${gen.name}`,
    );
  }
  for (const gen of k.secretGenerator ?? []) {
    checkKeys(gen, ['name', 'files', 'literals', 'envs', 'type'], `secretGenerator ${gen.name}`);
    const data = Object.fromEntries(
      Object.entries(generatorData(gen, read)).map(([key, value]) => [key, Buffer.from(value).toString('base64')]),
    );
    add(
      { apiVersion: 'v1', kind: 'Secret', type: gen.type ?? 'Opaque', metadata: { name: gen.name }, data },
      `secretGenerator ${gen.name}`,
    );
  }

  for (const image of k.images ?? []) {
    checkKeys(image, ['name', 'newName', 'newTag', 'digest'], `images ${image.name}`);
    for (const object of objects) {
      for (const container of podContainers(object)) {
        const [name] = String(container.image).split(/[:@]/);
        if (name !== image.name) continue;
        const base = image.newName ?? image.name;
        container.image = image.digest ? `${base}@${image.digest}` : image.newTag ? `${base}:${image.newTag}` : base;
      }
    }
  }
  // Every object here is namespaced; kustomize leaves cluster-scoped kinds alone.
  if (k.namespace !== undefined) for (const object of objects) object.metadata = { ...object.metadata, namespace: k.namespace };
  return { objects, sources };
}

function checkKeys(object: object, allowed: string[], where: string): void {
  const extra = Object.keys(object).filter((key) => !allowed.includes(key));
  if (extra.length > 0) throw new Error(`${where}: ${extra.join(', ')} not implemented by this stand-in`);
}

function generatorData(gen: Generator, read: (file: string) => string): Record<string, string> {
  const data: Record<string, string> = {};
  const put = (key: string, value: string, where: string) => {
    if (key in data) throw new Error(`${where}: key ${key} given twice`);
    data[key] = value;
  };
  for (const spec of gen.files ?? []) {
    const [key, file] = spec.includes('=') ? (spec.split('=', 2) as [string, string]) : [path.basename(spec), spec];
    put(key, read(file), `${gen.name} files`);
  }
  for (const literal of gen.literals ?? []) {
    const at = literal.indexOf('=');
    if (at <= 0) throw new Error(`${gen.name}: literal '${literal}' is not KEY=VALUE`);
    put(literal.slice(0, at), literal.slice(at + 1), `${gen.name} literals`);
  }
  for (const file of gen.envs ?? []) {
    for (const line of read(file).split('\n')) {
      const trimmed = line.trim();
      if (trimmed === '' || trimmed.startsWith('#')) continue;
      const at = trimmed.indexOf('=');
      if (at <= 0) throw new Error(`${file}: line '${trimmed}' is not KEY=VALUE`);
      put(trimmed.slice(0, at), trimmed.slice(at + 1), file);
    }
  }
  return data;
}

export function podContainers(object: K8sObject): IContainer[] {
  const spec = (object.kind === 'Pod' ? object.spec : (object.spec as { template?: { spec?: unknown } } | undefined)?.template?.spec) as
    IPodSpec | undefined;
  return [...(spec?.initContainers ?? []), ...(spec?.containers ?? [])];
}
