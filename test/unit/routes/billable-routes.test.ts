import { GATED_ROUTE_FAMILIES } from '../../../src/check/routes/route';
import { isMeteredRequest } from '../../../src/metering/usage-extractor';
import { refusedRouteFamily } from '../../../src/check/routes/classify';
import {
  buildRouteTable,
  compilePathMatcher,
  DEFAULT_ROUTE_SPECS,
  KEYED_FAMILIES,
  type KeyedFamily,
  type RouteSpec,
} from '../../../src/check/routes/route-table';

/**
 * Every default route says whether its answers cost money, and keeps its
 * word: a metered route is one the usage processor reads, an unmetered one
 * says why nothing on it is billable (and is not read), and a gated one is
 * refused until the operator enables its family. The walk goes over each
 * upstream endpoint the table names, as its SDK calls it.
 */
const ENDPOINTS: readonly (readonly [method: string, path: string])[] = [
  ['POST', '/v1/chat/completions'],
  ['POST', '/v1/completions'],
  ['POST', '/v1/embeddings'],
  ['POST', '/v1/moderations'],
  ['GET', '/v1/chat/completions/chatcmpl_1'],
  ['POST', '/v1/chat/completions/chatcmpl_1'],
  ['GET', '/v1/chat/completions/chatcmpl_1/messages'],
  ['POST', '/v1/responses'],
  ['GET', '/v1/responses/resp_1'],
  ['POST', '/v1/responses/resp_1/cancel'],
  ['POST', '/v1/responses/input_tokens'],
  ['POST', '/v1/responses/compact'],
  ['DELETE', '/v1/responses/resp_1'],
  ['GET', '/v1/responses/resp_1/input_items'],
  ['POST', '/v1/batches'],
  ['GET', '/v1/batches/batch_1'],
  ['POST', '/v1/batches/batch_1/cancel'],
  ['POST', '/v1/files'],
  ['GET', '/v1/files/file-1/content'],
  ['POST', '/v1/uploads'],
  ['POST', '/v1/uploads/upload_1/parts'],
  ['POST', '/v1beta/openai/chat/completions'],
  ['POST', '/v1beta/openai/embeddings'],
  ['POST', '/v1beta/openai/batches'],
  ['GET', '/v1beta/openai/batches/batch_1'],
  ['POST', '/v1beta/openai/files'],
  ['GET', '/v1beta/openai/files/file-1'],
  ['GET', '/v1beta/openai/models'],
  ['POST', '/v1/messages'],
  ['POST', '/v1/messages/count_tokens'],
  ['POST', '/v1/messages/batches'],
  ['GET', '/v1/messages/batches/msgbatch_1/results'],
  ['POST', '/v1beta/models/gemini-2.5-flash:generateContent'],
  ['POST', '/v1/models/gemini-2.5-flash:streamGenerateContent'],
  ['POST', '/v1beta/models/gemini-2.5-flash:countTokens'],
  ['POST', '/v1beta/models/text-embedding-004:embedContent'],
  ['POST', '/v1beta/models/text-embedding-004:batchEmbedContents'],
  ['POST', '/v1beta/models/gemini-2.5-flash:batchGenerateContent'],
  ['POST', '/v1beta/models/text-embedding-004:asyncBatchEmbedContent'],
  ['GET', '/v1beta/batches/batch-1'],
  ['POST', '/v1beta/batches/batch-1:cancel'],
  ['GET', '/v1beta/files'],
  ['GET', '/v1beta/files/file-1'],
  ['POST', '/upload/v1beta/files'],
  ['POST', '/v1beta/files:register'],
  ['POST', '/upload/v1beta/fileSearchStores/store-1:uploadToFileSearchStore'],
  ['POST', '/v1alpha/models/gemini-2.5-flash:generateContent'],
  ['POST', '/v1alpha/models/gemini-2.5-flash:batchGenerateContent'],
  ['GET', '/v1/models'],
  ['GET', '/v1beta/models/gemini-2.5-flash'],
];

/** The family and route an endpoint falls in: the first family with a matching route, as classification decides. */
function routeOf(method: string, path: string): { family: KeyedFamily; spec: RouteSpec } | undefined {
  for (const family of KEYED_FAMILIES) {
    const spec = DEFAULT_ROUTE_SPECS[family].find((candidate) => compilePathMatcher(candidate).matches(method, path));
    if (spec) return { family, spec };
  }
  return undefined;
}

const ALL_SPECS = KEYED_FAMILIES.flatMap((family) => DEFAULT_ROUTE_SPECS[family].map((spec) => ({ family, spec })));
const describeSpec = (spec: RouteSpec) => compilePathMatcher(spec).describe;
const BY_DEFAULT = buildRouteTable({}, []);
const ALL_ENABLED = buildRouteTable({}, [], GATED_ROUTE_FAMILIES);

describe('the route table declares how each route is billed', () => {
  it.each(ALL_SPECS.map(({ family, spec }) => [`${family}: ${describeSpec(spec)}`, spec] as const))(
    '%s meters, says why it is not billable, or is refused',
    (_name, spec) => {
      const billing = spec.billing as RouteSpec['billing'] | undefined;
      switch (billing?.decision) {
        case 'metered':
          expect(billing.how.length).toBeGreaterThan(20);
          return;
        case 'unmetered':
          expect(billing.why.length).toBeGreaterThan(20);
          return;
        case 'refused-unless-enabled':
          expect(GATED_ROUTE_FAMILIES).toContain(billing.family);
          return;
        default:
          throw new Error(`${describeSpec(spec)} declares no billing decision`);
      }
    },
  );

  it('the walk reaches every route of the table', () => {
    const reached = new Set(ENDPOINTS.map(([method, path]) => routeOf(method, path)?.spec));
    expect(ALL_SPECS.filter(({ spec }) => !reached.has(spec)).map(({ spec }) => describeSpec(spec))).toEqual([]);
  });
});

describe('each endpoint is billed as its route declares', () => {
  it.each(ENDPOINTS)('%s %s', (method, path) => {
    const route = routeOf(method, path);
    if (!route) throw new Error(`${method} ${path} is in no route of the table`);
    const { family, spec } = route;
    switch (spec.billing.decision) {
      case 'metered':
        expect(isMeteredRequest(family, method, path)).toBe(true);
        expect(refusedRouteFamily(BY_DEFAULT, method, path)).toBeUndefined();
        return;
      case 'unmetered':
        expect(isMeteredRequest(family, method, path)).toBe(false);
        expect(refusedRouteFamily(BY_DEFAULT, method, path)).toBeUndefined();
        return;
      case 'refused-unless-enabled':
        expect(refusedRouteFamily(BY_DEFAULT, method, path)).toBe(spec.billing.family);
        expect(refusedRouteFamily(ALL_ENABLED, method, path)).toBeUndefined();
        expect(isMeteredRequest(family, method, path)).toBe(false);
        return;
    }
  });

  it('a gated route is refused whatever family routes the operator sets, and however its path is spelled', () => {
    const overridden = buildRouteTable({ 'chat-completions': [{ prefix: '/v1/' }], messages: [{ prefix: '/v1/messages' }] }, []);
    expect(refusedRouteFamily(overridden, 'POST', '/v1/batches')).toBe('batches');
    expect(refusedRouteFamily(overridden, 'POST', '/v1/messages/batches')).toBe('batches');
    expect(refusedRouteFamily(BY_DEFAULT, 'POST', '/v1/./files')).toBe('files');
    expect(refusedRouteFamily(BY_DEFAULT, 'POST', '/v1/%62atches')).toBe('batches');
    expect(refusedRouteFamily(BY_DEFAULT, 'POST', '/v1/messages/batches/')).toBe('batches');
  });

  // Check classifies `/v1/messages/` as the messages route: metering reads the same form, or the answer would be free.
  it.each([
    ['messages', 'POST', '/v1/messages/'],
    ['chat-completions', 'POST', '/v1/chat/completions/'],
    ['chat-completions', 'POST', '/v1//responses'],
    ['generative-content', 'POST', '/v1beta/models/gemini-2.5-flash:generateContent/'],
    ['generative-content', 'POST', '/v1beta/models/%67emini-2.5-flash:streamGenerateContent'],
  ] as const)('%s %s %s, a spelling Check routes, is metered', (family, method, path) => {
    expect(isMeteredRequest(family, method, path)).toBe(true);
  });

  it('a path no route names is refused until unlisted is enabled', () => {
    expect(BY_DEFAULT.refusesUnlisted).toBe(true);
    expect(buildRouteTable({}, [], ['batches', 'files']).refusesUnlisted).toBe(true);
    expect(ALL_ENABLED.refusesUnlisted).toBe(false);
  });

  it('enabling one gated family leaves the other refused', () => {
    const batchesOnly = buildRouteTable({}, [], ['batches']);
    expect(refusedRouteFamily(batchesOnly, 'POST', '/v1/batches')).toBeUndefined();
    expect(refusedRouteFamily(batchesOnly, 'POST', '/v1/files')).toBe('files');
  });
});
