import type { GatedRouteFamily, RouteFamily } from './route';

/** How an operator describes a path in the config file. Exactly one of exact/prefix/regex. */
export interface PathMatchSpec {
  exact?: string;
  prefix?: string;
  regex?: string;
  /** Upper-case HTTP methods; absent means any method. */
  methods?: readonly string[];
}

export type KeyedFamily = Exclude<RouteFamily, 'other' | 'public'>;

/** Checked in this order; the first family with a matching path wins. */
export const KEYED_FAMILIES: readonly KeyedFamily[] = ['messages', 'chat-completions', 'generative-content', 'models'];

/**
 * Whether a route's answers cost money and how that is captured: the one
 * place each default route says so (docs/concepts/billable-routes.md is its table).
 * - metered: ext_proc counts its usage (`how`);
 * - unmetered: it generates nothing billable (`why`);
 * - refused-unless-enabled: refused with route_not_enabled until the
 *   operator enables its family.
 */
export type RouteBilling =
  | { readonly decision: 'metered'; readonly how: string }
  | { readonly decision: 'unmetered'; readonly why: string }
  | { readonly decision: 'refused-unless-enabled'; readonly family: GatedRouteFamily };

export interface RouteSpec extends PathMatchSpec {
  readonly billing: RouteBilling;
}

const GENERATION: RouteBilling = {
  decision: 'metered',
  how: "POST: ext_proc reads the answer's usage (whole or streamed); without usable usage a chat-completions answer is estimated",
};
const BATCHES: RouteBilling = { decision: 'refused-unless-enabled', family: 'batches' };
const FILES: RouteBilling = { decision: 'refused-unless-enabled', family: 'files' };

export const DEFAULT_ROUTE_SPECS: Readonly<Record<KeyedFamily, readonly RouteSpec[]>> = Object.freeze({
  'chat-completions': [
    { exact: '/v1/chat/completions', billing: GENERATION },
    {
      regex: '^/v1/chat/completions/[^/]+(/messages)?$',
      methods: ['GET', 'POST', 'DELETE'],
      billing: {
        decision: 'unmetered',
        why: 'retrieving, updating the metadata of or deleting a stored chat completion, or listing its messages: metered when it was created',
      },
    },
    { exact: '/v1/completions', billing: GENERATION },
    { exact: '/v1/embeddings', billing: GENERATION },
    {
      exact: '/v1/moderations',
      methods: ['POST'],
      billing: { decision: 'unmetered', why: 'moderation is free upstream and generates nothing billable' },
    },
    { exact: '/v1/responses', billing: GENERATION },
    // Compaction runs a model over a conversation and reports its usage, as a generation does.
    { exact: '/v1/responses/compact', billing: GENERATION },
    {
      exact: '/v1/responses/input_tokens',
      methods: ['POST'],
      billing: { decision: 'unmetered', why: 'token counting is free upstream and generates nothing' },
    },
    {
      regex: '^/v1/responses/[^/]+(/input_items)?$',
      methods: ['GET', 'DELETE'],
      billing: {
        decision: 'unmetered',
        why: 'retrieving or deleting a stored response, or listing its input items: the generation was metered when POST /v1/responses created it',
      },
    },
    {
      regex: '^/v1/responses/[^/]+/cancel$',
      methods: ['POST'],
      billing: { decision: 'unmetered', why: 'cancelling a background response generates nothing more' },
    },
    { exact: '/v1/batches', billing: BATCHES },
    { prefix: '/v1/batches/', billing: BATCHES },
    { exact: '/v1/files', billing: FILES },
    { prefix: '/v1/files/', billing: FILES },
    { exact: '/v1/uploads', billing: FILES },
    { prefix: '/v1/uploads/', billing: FILES },
    // Gemini's OpenAI-compatible endpoint is used through the OpenAI SDK.
    { exact: '/v1beta/openai/chat/completions', billing: GENERATION },
    { exact: '/v1beta/openai/embeddings', billing: GENERATION },
    { exact: '/v1beta/openai/batches', billing: BATCHES },
    { prefix: '/v1beta/openai/batches/', billing: BATCHES },
    { exact: '/v1beta/openai/files', billing: FILES },
    { prefix: '/v1beta/openai/files/', billing: FILES },
    {
      regex: '^/v1beta/openai/models(/[^/]+)?$',
      methods: ['GET'],
      billing: { decision: 'unmetered', why: 'listing or describing models generates nothing' },
    },
  ],
  messages: [
    { exact: '/v1/messages', billing: GENERATION },
    {
      exact: '/v1/messages/count_tokens',
      billing: { decision: 'unmetered', why: 'token counting is free upstream and generates nothing' },
    },
    { exact: '/v1/messages/batches', billing: BATCHES },
    { prefix: '/v1/messages/batches/', billing: BATCHES },
  ],
  'generative-content': [
    { regex: '^/(v1alpha|v1beta|v1)/models/[^/:]+:(generateContent|streamGenerateContent)$', billing: GENERATION },
    {
      regex: '^/(v1alpha|v1beta|v1)/models/[^/:]+:countTokens$',
      billing: { decision: 'unmetered', why: 'token counting is free upstream and generates nothing' },
    },
    {
      regex: '^/(v1alpha|v1beta|v1)/models/[^/:]+:(embedContent|batchEmbedContents)$',
      billing: {
        decision: 'metered',
        how: 'POST: the answer reports no usage, so ext_proc charges the estimate of its input (request bytes ÷ 4), marked estimated',
      },
    },
    { regex: '^/(v1alpha|v1beta|v1)/models/[^/:]+:(batchGenerateContent|asyncBatchEmbedContent)$', billing: BATCHES },
    { regex: '^/(v1alpha|v1beta|v1)/batches(/.*)?$', billing: BATCHES },
    { regex: '^/(v1alpha|v1beta|v1)/(files|fileSearchStores)([/:].*)?$', billing: FILES },
    { regex: '^/upload/(v1alpha|v1beta|v1)/(files|fileSearchStores)([/:].*)?$', billing: FILES },
  ],
  models: [
    {
      regex: '^/(v1alpha|v1beta|v1)/models(/[^/:]+)?$',
      methods: ['GET'],
      billing: { decision: 'unmetered', why: 'listing or describing models generates nothing' },
    },
  ],
});

export interface PathMatcher {
  readonly describe: string;
  matches(method: string, pathWithoutQuery: string): boolean;
}

export function compilePathMatcher(spec: PathMatchSpec): PathMatcher {
  const methods = spec.methods?.map((m) => m.toUpperCase());
  const methodOk = (method: string) => !methods || methods.includes(method.toUpperCase());
  if (spec.exact !== undefined) {
    const exact = spec.exact;
    return { describe: `exact ${exact}`, matches: (m, p) => methodOk(m) && p === exact };
  }
  if (spec.prefix !== undefined) {
    const prefix = spec.prefix;
    return { describe: `prefix ${prefix}`, matches: (m, p) => methodOk(m) && p.startsWith(prefix) };
  }
  if (spec.regex !== undefined) {
    const regex = new RegExp(spec.regex);
    return { describe: `regex ${spec.regex}`, matches: (m, p) => methodOk(m) && regex.test(p) };
  }
  throw new Error('a path matcher needs one of exact, prefix or regex');
}

export interface GatedRoute {
  readonly family: GatedRouteFamily;
  readonly matcher: PathMatcher;
}

export interface RouteTable {
  readonly families: readonly { family: KeyedFamily; matchers: readonly PathMatcher[] }[];
  /** Operator-listed routes that need no key (default: none). */
  readonly publicRoutes: readonly PathMatcher[];
  /**
   * The default routes of the gated families the operator has not enabled:
   * refused whatever the operator's own family routes say, so an override
   * cannot let one through unmetered.
   */
  readonly refusedRoutes: readonly GatedRoute[];
  /** Paths no route names (family `other`) are refused: `unlisted` is not enabled. */
  readonly refusesUnlisted: boolean;
  /** The gated families the operator let through: their answers are not metered. */
  readonly enabled: readonly GatedRouteFamily[];
}

export function buildRouteTable(
  overrides: Partial<Record<KeyedFamily, readonly PathMatchSpec[]>>,
  publicRoutes: readonly PathMatchSpec[],
  enabled: readonly GatedRouteFamily[] = [],
): RouteTable {
  const refusedRoutes: GatedRoute[] = [];
  for (const family of KEYED_FAMILIES) {
    for (const spec of DEFAULT_ROUTE_SPECS[family]) {
      if (spec.billing.decision === 'refused-unless-enabled' && !enabled.includes(spec.billing.family)) {
        refusedRoutes.push({ family: spec.billing.family, matcher: compilePathMatcher(spec) });
      }
    }
  }
  return Object.freeze({
    families: KEYED_FAMILIES.map((family) => ({
      family,
      matchers: (overrides[family] ?? DEFAULT_ROUTE_SPECS[family]).map(compilePathMatcher),
    })),
    publicRoutes: publicRoutes.map(compilePathMatcher),
    refusedRoutes,
    refusesUnlisted: !enabled.includes('unlisted'),
    enabled: [...new Set(enabled)],
  });
}
