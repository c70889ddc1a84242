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
 * Not checked here: the CEL rules (`x-kubernetes-validations`), which only the
 * API server evaluates. The tests assert the facts those rules guard that
 * matter to us (e.g. ext_proc takes backendRefs, not backendRef) directly.
 */
import * as fs from 'node:fs';

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

const INT32 = { min: -(2 ** 31), max: 2 ** 31 - 1 };

function newAjv(): Ajv {
  // strict: false lets the Kubernetes extensions (x-kubernetes-*) through as annotations.
  const ajv = new Ajv({ allErrors: true, strict: false });
  ajv.addFormat('int32', { type: 'number', validate: (n: number) => Number.isInteger(n) && n >= INT32.min && n <= INT32.max });
  ajv.addFormat('int64', { type: 'number', validate: (n: number) => Number.isSafeInteger(n) });
  ajv.addFormat('byte', /^[A-Za-z0-9+/]*={0,2}$/);
  ajv.addFormat('date-time', true);
  return ajv;
}

/** The validators of one or more CRD files, by `apiVersion/kind` of each served version. */
export class CrdSchemas {
  private readonly validators = new Map<string, ValidateFunction>();
  private readonly ajv = newAjv();

  constructor(files: readonly string[]) {
    for (const file of files) {
      for (const doc of parseYamlDocuments(fs.readFileSync(file, 'utf8'), file) as Crd[]) {
        if (doc.kind !== 'CustomResourceDefinition') throw new Error(`${file}: not a CustomResourceDefinition`);
        for (const version of doc.spec.versions.filter((v) => v.served)) {
          const key = `${doc.spec.group}/${version.name}/${doc.spec.names.kind}`;
          this.validators.set(key, this.ajv.compile(withUnknownFieldsRefused(version.schema.openAPIV3Schema) as Schema));
        }
      }
    }
  }

  kinds(): string[] {
    return [...this.validators.keys()];
  }

  /** The problems of one object (empty when it validates), each prefixed with Kind/name. */
  problems(object: K8sObject): string[] {
    const key = `${object.apiVersion}/${object.kind}`;
    const name = `${object.kind}/${object.metadata?.name}`;
    const validate = this.validators.get(key);
    if (!validate) return [`${name}: no CRD schema for ${key}`];
    if (validate(object)) return [];
    return (validate.errors ?? []).map((error) => {
      const extra = error.keyword === 'additionalProperties' ? ` '${String(error.params.additionalProperty)}'` : '';
      return `${name}: ${error.instancePath || '/'} ${error.message}${extra}`;
    });
  }
}
