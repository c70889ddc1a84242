import type { ClientStyle, RouteFamily } from './route';
import type { HeaderNames } from './header-names';

/**
 * Where each route family takes its credential from and which extra headers
 * it requires. This is the one place these rules live.
 */
export type CredentialSource = 'authorization-bearer' | 'x-api-key' | 'vendorg-api-key';

export interface FamilyHeaderRules {
  style: ClientStyle;
  /** In order of preference; the first one is what error messages recommend. */
  credentialSources: readonly CredentialSource[];
  /** Messages style needs a date-form version header from the accepted list. */
  requiresVersionHeader: boolean;
  /** Whether `?key=` may carry the key (only if the operator also turns it on). */
  queryKeyAllowed: boolean;
}

const ANY_CREDENTIAL: readonly CredentialSource[] = ['authorization-bearer', 'x-api-key', 'vendorg-api-key'];

export const FAMILY_HEADER_RULES: Readonly<Record<Exclude<RouteFamily, 'models'>, FamilyHeaderRules>> = Object.freeze({
  'chat-completions': {
    style: 'chat',
    credentialSources: ['authorization-bearer'],
    requiresVersionHeader: false,
    queryKeyAllowed: false,
  },
  messages: {
    style: 'messages',
    // SDKs up to 0.137 send x-api-key; 1.x sends Authorization: Bearer.
    credentialSources: ['x-api-key', 'authorization-bearer'],
    requiresVersionHeader: true,
    queryKeyAllowed: false,
  },
  'generative-content': {
    style: 'generative',
    credentialSources: ['vendorg-api-key', 'authorization-bearer', 'x-api-key'],
    requiresVersionHeader: false,
    queryKeyAllowed: true,
  },
  other: { style: 'generic', credentialSources: ANY_CREDENTIAL, requiresVersionHeader: false, queryKeyAllowed: false },
  public: { style: 'generic', credentialSources: [], requiresVersionHeader: false, queryKeyAllowed: false },
});

/** A chat client's rules for the models route: it may send its key the ways any client does. */
const CHAT_MODELS_RULES: FamilyHeaderRules = Object.freeze({
  ...FAMILY_HEADER_RULES['chat-completions'],
  credentialSources: ANY_CREDENTIAL,
});

/**
 * `GET /v1/models` is called by all three SDK families, so its style comes
 * from the headers: a version header means messages, a generative key header
 * (or a /v1beta path, which only generative clients use) means generative,
 * anything else chat.
 */
export function rulesForModelsRoute(
  headers: Readonly<Record<string, string>>,
  pathWithoutQuery: string,
  names: HeaderNames,
): FamilyHeaderRules {
  if (hasVersionHeader(headers, names)) return FAMILY_HEADER_RULES.messages;
  if (names.vendorgKeyHeaders.some((name) => headers[name] !== undefined) || pathWithoutQuery.startsWith('/v1beta/')) {
    return FAMILY_HEADER_RULES['generative-content'];
  }
  return CHAT_MODELS_RULES;
}

/**
 * `/v1/files…` is OpenAI's Files API and Anthropic's alike (the chat-completions family routes it): a request with a
 * version header is an Anthropic client's, which sends its key and reads errors the messages way.
 */
export function rulesForFilesRoute(headers: Readonly<Record<string, string>>, names: HeaderNames): FamilyHeaderRules {
  return hasVersionHeader(headers, names) ? FAMILY_HEADER_RULES.messages : FAMILY_HEADER_RULES['chat-completions'];
}

/** A messages version header (`anthropic-version`, `vendora-version`): what only an Anthropic-style client sends. */
function hasVersionHeader(headers: Readonly<Record<string, string>>, names: HeaderNames): boolean {
  return names.versionHeaders.some((name) => headers[name] !== undefined);
}

/** The path of the Files API both OpenAI and Anthropic serve (rulesForFilesRoute). */
export function isSharedFilesPath(routingPath: string): boolean {
  return routingPath === '/v1/files' || routingPath.startsWith('/v1/files/');
}

/** The header names behind a credential source, given the accepted spellings. */
export function headersOfSource(source: CredentialSource, names: HeaderNames): readonly string[] {
  switch (source) {
    case 'authorization-bearer':
      return ['authorization'];
    case 'x-api-key':
      return ['x-api-key'];
    case 'vendorg-api-key':
      return names.vendorgKeyHeaders;
  }
}

/** How to tell a customer to send the key for a source, e.g. `Authorization: Bearer <key>`. */
export function describeSource(source: CredentialSource, names: HeaderNames): string {
  switch (source) {
    case 'authorization-bearer':
      return 'Authorization: Bearer <key>';
    case 'x-api-key':
      return 'x-api-key: <key>';
    case 'vendorg-api-key':
      return `${names.vendorgKeyHeaders[0]}: <key>`;
  }
}

/** Every way a route's rules accept a key, best first, as error messages name them. */
export function describeSources(rules: FamilyHeaderRules, names: HeaderNames): string[] {
  return rules.credentialSources.map((source) => describeSource(source, names));
}
