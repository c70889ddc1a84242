import type { RouteFamily } from '../domain/route';

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

export const DEFAULT_ROUTE_SPECS: Readonly<Record<KeyedFamily, readonly PathMatchSpec[]>> = Object.freeze({
  'chat-completions': [
    { exact: '/v1/chat/completions' },
    { exact: '/v1/completions' },
    { exact: '/v1/embeddings' },
    { exact: '/v1/responses' },
    { prefix: '/v1/responses/' },
    // Gemini's OpenAI-compatible endpoint is used through the OpenAI SDK.
    { prefix: '/v1beta/openai/' },
  ],
  messages: [
    { exact: '/v1/messages' },
    { exact: '/v1/messages/count_tokens' },
    { exact: '/v1/messages/batches' },
    { prefix: '/v1/messages/batches/' },
  ],
  'generative-content': [
    {
      regex: '^/(v1beta|v1)/models/[^/:]+:(generateContent|streamGenerateContent|countTokens|embedContent|batchEmbedContents)$',
    },
  ],
  models: [{ regex: '^/(v1|v1beta)/models(/[^/:]+)?$', methods: ['GET'] }],
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

export interface RouteTable {
  readonly families: readonly { family: KeyedFamily; matchers: readonly PathMatcher[] }[];
  /** Operator-listed routes that need no key (default: none). */
  readonly publicRoutes: readonly PathMatcher[];
}

export function buildRouteTable(
  overrides: Partial<Record<KeyedFamily, readonly PathMatchSpec[]>>,
  publicRoutes: readonly PathMatchSpec[],
): RouteTable {
  return Object.freeze({
    families: KEYED_FAMILIES.map((family) => ({
      family,
      matchers: (overrides[family] ?? DEFAULT_ROUTE_SPECS[family]).map(compilePathMatcher),
    })),
    publicRoutes: publicRoutes.map(compilePathMatcher),
  });
}
