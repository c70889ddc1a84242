/**
 * Validation of custom resources against a CustomResourceDefinition's own
 * OpenAPI v3 schema (the CRD files vendored under test/deploy/schemas/, see
 * the README there), with a JSON-schema validator (ajv), as close to the API
 * server as a schema alone allows:
 *
 *  - types, enums, patterns, required fields, minimum/maximum, min/max
 *    items and lengths, the OpenAPI integer formats;
 *  - unknown fields are errors: the API server prunes them, and `kubectl
 *    apply` (strict field validation, its default) refuses them. A schema
 *    node that lists `properties` gets `additionalProperties: false` unless
 *    it says `x-kubernetes-preserve-unknown-fields` or sets
 *    `additionalProperties` itself.
 *
 * The CEL rules (`x-kubernetes-validations`) are evaluated apart, by
 * @marcbachmann/cel-js in a child process (evaluate-crd-rules.mjs, ES module
 * only): celProblems(). A rule it cannot run (a Kubernetes CEL library
 * function it lacks) is reported as unevaluated, never as passed.
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

import Ajv, { type ValidateFunction } from 'ajv';

import { parseYamlDocuments } from './repo-files';
import type { K8sObject } from './kustomize';

type Schema = Record<string, unknown>;

interface CrdVersion {
  name: string;
  served: boolean;
  schema: { openAPIV3Schema: Schema };
}

interface Crd {
  kind: string;
  spec: { group: string; names: { kind: string }; versions: CrdVersion[] };
}

/** Kubernetes' unknown-field rule, written into the schema (see the file comment). */
export function withUnknownFieldsRefused(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(withUnknownFieldsRefused);
  if (!schema || typeof schema !== 'object') return schema;
  const node: Schema = Object.fromEntries(Object.entries(schema).map(([key, value]) => [key, withUnknownFieldsRefused(value)]));
  if (node.properties !== undefined && node['x-kubernetes-preserve-unknown-fields'] !== true && node.additionalProperties === undefined) {
    node.additionalProperties = false;
  }
  return node;
}

/** What the API server allows at the root of every object, whether or not a CRD's schema lists it (Istio's do not). */
const ROOT_FIELDS = { apiVersion: { type: 'string' }, kind: { type: 'string' }, metadata: { type: 'object' } };

function withRootFields(schema: Schema): Schema {
  return { ...schema, properties: { ...ROOT_FIELDS, ...(schema.properties as Schema | undefined) } };
}

const INT32 = { min: -(2 ** 31), max: 2 ** 31 - 1 };

function newAjv(): Ajv {
  // strict: false lets the Kubernetes extensions (x-kubernetes-*) through as annotations.
  const ajv = new Ajv({ allErrors: true, strict: false });
  ajv.addFormat('int32', { type: 'number', validate: (n: number) => Number.isInteger(n) && n >= INT32.min && n <= INT32.max });
  ajv.addFormat('int64', { type: 'number', validate: (n: number) => Number.isSafeInteger(n) });
  ajv.addFormat('double', { type: 'number', validate: (n: number) => Number.isFinite(n) });
  ajv.addFormat('byte', /^[A-Za-z0-9+/]*={0,2}$/);
  ajv.addFormat('date-time', true);
  return ajv;
}

/** The validators of one or more CRD files, by `apiVersion/kind` of each served version. */
export class CrdSchemas {
  private readonly validators = new Map<string, ValidateFunction>();
  /** The schemas as the CRDs give them, for the CEL rules. */
  private readonly schemas = new Map<string, Schema>();
  private readonly ajv = newAjv();

  constructor(files: readonly string[]) {
    for (const file of files) {
      for (const doc of parseYamlDocuments(fs.readFileSync(file, 'utf8'), file) as Crd[]) {
        if (doc.kind !== 'CustomResourceDefinition') throw new Error(`${file}: not a CustomResourceDefinition`);
        for (const version of doc.spec.versions.filter((v) => v.served)) {
          const key = `${doc.spec.group}/${version.name}/${doc.spec.names.kind}`;
          this.schemas.set(key, version.schema.openAPIV3Schema);
        }
      }
    }
  }

  kinds(): string[] {
    return [...this.schemas.keys()];
  }

  /** Compiled on first use: a CRD file may serve many kinds, of which a test checks a few. */
  private validatorFor(key: string): ValidateFunction | undefined {
    const schema = this.schemas.get(key);
    if (!schema) return undefined;
    let validate = this.validators.get(key);
    if (!validate) {
      validate = this.ajv.compile(withUnknownFieldsRefused(withRootFields(schema)) as Schema);
      this.validators.set(key, validate);
    }
    return validate;
  }

  /** The problems of one object (empty when it validates), each prefixed with Kind/name. */
  problems(object: K8sObject): string[] {
    const key = `${object.apiVersion}/${object.kind}`;
    const name = `${object.kind}/${object.metadata?.name}`;
    const validate = this.validatorFor(key);
    if (!validate) return [`${name}: no CRD schema for ${key}`];
    if (validate(object)) return [];
    return (validate.errors ?? []).map((error) => {
      const extra = error.keyword === 'additionalProperties' ? ` '${String(error.params.additionalProperty)}'` : '';
      return `${name}: ${error.instancePath || '/'} ${error.message}${extra}`;
    });
  }

  /**
   * The CEL rules of each object's CRD on it: the rules that failed (their messages, with where), and those that
   * could not be evaluated, each prefixed with Kind/name.
   */
  celProblems(objects: readonly K8sObject[]): { failed: string[]; unevaluated: string[] } {
    const requests = objects.map((object) => {
      const schema = this.schemas.get(`${object.apiVersion}/${object.kind}`);
      if (!schema) throw new Error(`no CRD schema for ${object.apiVersion}/${object.kind}`);
      return { schema, object };
    });
    const output = execFileSync(process.execPath, [path.join(__dirname, 'evaluate-crd-rules.mjs')], {
      input: JSON.stringify(requests),
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
    });
    const results = JSON.parse(output) as { failed: string[]; unevaluated: string[] }[];
    const named = (index: number, lines: string[]) =>
      lines.map((line) => `${objects[index]!.kind}/${objects[index]!.metadata?.name}: ${line}`);
    return {
      failed: results.flatMap((r, index) => named(index, r.failed)),
      unevaluated: results.flatMap((r, index) => named(index, r.unevaluated)),
    };
  }
}
