// kubernetes-models' validate() for the packages that ship as ES modules only (@kubernetes-models/istio,
// @kubernetes-models/gateway-api): Jest's CommonJS module system cannot load them, so esm-models.ts runs this file
// in a child Node process. Input on stdin: [{ module, object }], the module exporting the object's kind as a class.
// Output on stdout: one list of problems per object, in order (empty when it validates).
import { readFileSync } from 'node:fs';

const requests = JSON.parse(readFileSync(0, 'utf8'));
const results = [];
for (const { module, object } of requests) {
  const Model = (await import(module))[object.kind];
  if (typeof Model !== 'function') {
    results.push([`${module} exports no ${object.kind}`]);
    continue;
  }
  try {
    new Model(object).validate();
    results.push([]);
  } catch (error) {
    const details = error.errors;
    results.push(Array.isArray(details) ? details.map((d) => `${d.instancePath || '/'} ${d.message}`) : [String(error.message)]);
  }
}
process.stdout.write(JSON.stringify(results));
