// The CEL rules of a CRD schema (x-kubernetes-validations) on an object, as the API server evaluates them on create:
// each rule at each schema node the object reaches, with `self` the object's value there. @marcbachmann/cel-js is an ES
// module only, so crd-schema.ts runs this file in a child Node process. Input on stdin: [{ schema, object }].
// Output: per object, { failed: [messages], unevaluated: [rules] }. Transition rules (those reading oldSelf) do not
// apply on create and are skipped; a rule the evaluator cannot run (a Kubernetes CEL library function it lacks) is
// listed as unevaluated, never taken as passed. As on the API server, the schema's defaults are applied first (a
// backendRef's kind defaults to Service, and the rules read it).
import { readFileSync } from 'node:fs';

import { evaluate } from '@marcbachmann/cel-js';

/** Structural defaulting: a missing property that has a `default` gets it, at every depth. Returns the defaulted copy. */
function withDefaults(schema, value) {
  if (!schema || typeof schema !== 'object') return value;
  if (Array.isArray(value)) return value.map((item) => withDefaults(schema.items, item));
  if (!value || typeof value !== 'object') return value;
  const copy = {};
  for (const [key, child] of Object.entries(value)) {
    const childSchema =
      schema.properties?.[key] ?? (typeof schema.additionalProperties === 'object' ? schema.additionalProperties : undefined);
    copy[key] = withDefaults(childSchema, child);
  }
  for (const [key, property] of Object.entries(schema.properties ?? {})) {
    if (!(key in copy) && property.default !== undefined) copy[key] = withDefaults(property, structuredClone(property.default));
  }
  return copy;
}

function walk(schema, value, path, result) {
  if (!schema || typeof schema !== 'object' || value === undefined) return;
  for (const { rule, message } of schema['x-kubernetes-validations'] ?? []) {
    if (rule.includes('oldSelf')) continue;
    try {
      if (evaluate(rule, { self: value }) !== true) result.failed.push(`${path || '/'}: ${message ?? rule}`);
    } catch (error) {
      result.unevaluated.push(`${path || '/'}: ${rule} (${error.message.split('\n')[0]})`);
    }
  }
  if (Array.isArray(value)) {
    value.forEach((item, index) => walk(schema.items, item, `${path}/${index}`, result));
  } else if (value && typeof value === 'object') {
    for (const [key, child] of Object.entries(value)) {
      const childSchema =
        schema.properties?.[key] ?? (typeof schema.additionalProperties === 'object' ? schema.additionalProperties : undefined);
      walk(childSchema, child, `${path}/${key}`, result);
    }
  }
}

const requests = JSON.parse(readFileSync(0, 'utf8'));
const results = requests.map(({ schema, object }) => {
  const result = { failed: [], unevaluated: [] };
  walk(schema, withDefaults(schema, object), '', result);
  return result;
});
process.stdout.write(JSON.stringify(results));
