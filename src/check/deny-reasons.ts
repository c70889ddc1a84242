/**
 * The one catalogue of reasons a request can be refused. Each reason is
 * declared once, with everything that follows from it: the HTTP status the
 * client sees, the google.rpc.Code of CheckResponse.status, the category that
 * each client style turns into its own error type words, and the
 * customer-facing message template. (After fastify's lib/errors.js, where code,
 * text and status live in one entry and so cannot drift apart.)
 *
 * The code travels unchanged from the pipeline into logs, metrics, the
 * `x-gateway-error-code` header and the error body of every client style, so
 * operators and customers can grep for it. Messages say what happened and what
 * to do, and never carry secret material: templates only ever receive display
 * prefixes, header names and operator settings. They are built only when a
 * request is denied.
 */

import type { ClientStyle, GatedRouteFamily } from './routes/route';
import type { RestrictionKind } from '../keys/key-restrictions';

/** google.rpc.Code values used in CheckResponse.status. */
export const RPC_CODE = {
  OK: 0,
  INVALID_ARGUMENT: 3,
  NOT_FOUND: 5,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
} as const;

export type RpcCode = (typeof RPC_CODE)[keyof typeof RPC_CODE];

/** What each client style's error body turns into its own type words. */
export type DenyCategory = 'authentication' | 'permission' | 'billing' | 'rate_limit' | 'invalid_request' | 'not_found' | 'unavailable';

/** How a store_unavailable denial reaches Envoy: our 503 body, or a gRPC UNAVAILABLE left to Envoy's own failure settings. */
export type StoreFailureMode = 'deny' | 'grpc-unavailable';

export type DenyHttpStatus = 400 | 401 | 402 | 403 | 404 | 429 | 503;

interface DenyReasonSpec {
  readonly httpStatus: DenyHttpStatus;
  readonly grpcCode: RpcCode;
  readonly category: DenyCategory;
  /** Where a client style's upstream answers the same case with another status, that style's. */
  readonly httpStatusByStyle?: Partial<Record<ClientStyle, DenyHttpStatus>>;
  /** For a refusal by the key's restrictions: which kind decided (what `gateway-authz check` shows). */
  readonly restriction?: RestrictionKind;
  /** Customer-facing text. Parameters differ per reason; `never` lets every shape in. */
  readonly message: (params: never) => string;
}

const NEW_KEY_HINT = "Create a new key in the dashboard's API Keys section.";
const COPY_KEY_HINT = "Copy the whole key from the dashboard's API Keys section.";
const GET_A_KEY = 'Create a customer API key in the dashboard under API Keys.';

const MALFORMED_KEY_PROBLEMS = {
  prefix: 'does not start with gk_live_ or gk_test_',
  length: 'has the wrong length',
  alphabet: 'contains characters that never appear in keys',
  checksum: 'fails its checksum (a typo or a truncated copy)',
} as const;

/** `'A'` / `'A', 'B' or 'C'`: the ways a route accepts a key, best first. */
function oneOf(ways: readonly string[]): string {
  const quoted = ways.map((way) => `'${way}'`);
  return quoted.length === 1 ? quoted[0]! : `${quoted.slice(0, -1).join(', ')} or ${quoted.at(-1)}`;
}

function sendItAs(ways: readonly string[]): string {
  return `Send it as ${oneOf(ways)}.`;
}

function acceptedValues(accepted: readonly string[]): string {
  return `Accepted values: ${accepted.map((value) => `'${value}'`).join(', ')}.`;
}

const AUTHENTICATION = { httpStatus: 401, grpcCode: RPC_CODE.UNAUTHENTICATED, category: 'authentication' } as const;
const BILLING = { httpStatus: 402, grpcCode: RPC_CODE.PERMISSION_DENIED, category: 'billing' } as const;
const INVALID_REQUEST = { httpStatus: 400, grpcCode: RPC_CODE.INVALID_ARGUMENT, category: 'invalid_request' } as const;
/**
 * A valid key that may not do this (its restrictions, docs/concepts/key-restrictions.md): 403, as Anthropic
 * (`permission_error`) and Gemini (`PERMISSION_DENIED`) answer a key lacking a permission; OpenAI answers a
 * restricted key 401 "You have insufficient permissions for this operation. Missing scopes: …", so its style gets 401
 * (the OpenAI SDK's AuthenticationError, as from OpenAI itself). Never retried by any SDK.
 */
const PERMISSION = {
  httpStatus: 403,
  grpcCode: RPC_CODE.PERMISSION_DENIED,
  category: 'permission',
  httpStatusByStyle: { chat: 401 },
} as const;
/** Every restriction refusal names what is missing, never what the key may do, and who can change it. */
const RESTRICTION_HINT = "The key's owner can change its restrictions in the dashboard's API Keys section, or use another key.";

export const DENY_REASONS = {
  missing_credential: {
    ...AUTHENTICATION,
    /** `ways`: how this route accepts a key; `unreadHeader`: a credential header present that this route does not read. */
    message: ({ ways, unreadHeader }: { ways: readonly string[]; unreadHeader?: string }) =>
      unreadHeader === undefined
        ? `Missing API key. ${sendItAs(ways)} ${GET_A_KEY}`
        : `This route does not read the API key from the '${unreadHeader}' header. ${sendItAs(ways)}`,
  },
  invalid_authorization_scheme: {
    ...AUTHENTICATION,
    message: () =>
      "The Authorization header must use the Bearer scheme: 'Authorization: Bearer <key>'. Other schemes (Basic, Token, …) are not accepted.",
  },
  malformed_authorization_header: {
    ...AUTHENTICATION,
    message: () => "The Authorization header must be 'Bearer' followed by exactly one API key.",
  },
  conflicting_credentials: {
    ...AUTHENTICATION,
    message: ({ sources }: { sources: readonly string[] }) =>
      `The request carries different API keys in ${sources.map((source) => `'${source}'`).join(' and ')}. Send exactly one key.`,
  },
  query_key_not_accepted: {
    ...AUTHENTICATION,
    message: ({ parameter, ways }: { parameter: string; ways: readonly string[] }) =>
      `API keys are not accepted in the '?${parameter}=' query parameter here, because URLs end up in logs. ${sendItAs(ways)}`,
  },
  query_key_not_removable: {
    // A request-shape problem, not a credential one: the same request with the name spelled plainly would be judged normally.
    ...INVALID_REQUEST,
    message: ({ rawName, parameter, ways }: { rawName: string; parameter: string; ways: readonly string[] }) =>
      `The query parameter '${rawName}' reads as '${parameter}' once decoded, but is not spelled '${parameter}' literally, so the gateway cannot remove it before the request goes upstream. ` +
      (ways.length > 0 ? `Send the API key in a header instead: ${oneOf(ways)}.` : 'Remove the parameter: this route needs no API key.'),
  },
  upstream_key_not_accepted: {
    ...AUTHENTICATION,
    message: ({ where, provider }: { where: string; provider: string }) =>
      `The credential in '${where}' looks like ${/^[AEIOU]/.test(provider) ? 'an' : 'a'} ${provider} API key. This gateway does not accept upstream provider keys: use your customer API key from the dashboard's API Keys section.`,
  },
  malformed_key: {
    ...AUTHENTICATION,
    message: ({ where, problem }: { where: string; problem: keyof typeof MALFORMED_KEY_PROBLEMS }) =>
      `The API key in '${where}' is malformed: it ${MALFORMED_KEY_PROBLEMS[problem]}. ${COPY_KEY_HINT}`,
  },
  unknown_key: {
    ...AUTHENTICATION,
    message: ({ keyPrefix }: { keyPrefix: string }) =>
      `Invalid API key ${keyPrefix}…. Check that you copied the whole key from the dashboard's API Keys section.`,
  },
  key_revoked: {
    ...AUTHENTICATION,
    message: ({ keyPrefix }: { keyPrefix: string }) => `The API key ${keyPrefix}… has been revoked. ${NEW_KEY_HINT}`,
  },
  key_expired: {
    ...AUTHENTICATION,
    message: ({ keyPrefix }: { keyPrefix: string }) => `The API key ${keyPrefix}… has expired. ${NEW_KEY_HINT}`,
  },
  account_suspended: {
    ...BILLING,
    message: ({ keyPrefix }: { keyPrefix: string }) =>
      `The account of API key ${keyPrefix}… is suspended. Contact billing to reactivate it; retrying will not help until then.`,
  },
  credit_exhausted: {
    ...BILLING,
    message: ({ keyPrefix }: { keyPrefix: string }) =>
      `The prepaid credit of the account of API key ${keyPrefix}… is used up. Top up the account's credit to continue; retrying will not help until then.`,
  },
  budget_exceeded: {
    ...BILLING,
    /** `scope`: whose monthly spend cap is reached, the key's own or its account's; `cap` as money (formatMoney). */
    message: ({ keyPrefix, scope, cap }: { keyPrefix: string; scope: 'key' | 'account'; cap: string }) =>
      `The monthly spend cap of ${scope === 'key' ? `API key ${keyPrefix}…` : `the account of API key ${keyPrefix}…`} (${cap}) is reached. ` +
      'It resets at the start of next month (UTC); raise the cap to continue sooner. Retrying will not help until then.',
  },
  rate_limited: {
    httpStatus: 429,
    grpcCode: RPC_CODE.RESOURCE_EXHAUSTED,
    category: 'rate_limit',
    /** `window` as describeWindow spells it (`1m`, `1d`, …). */
    message: ({
      limit,
      window,
      scope,
      retryInSeconds,
    }: {
      limit: number;
      window: string;
      scope: 'key' | 'account';
      retryInSeconds: number;
    }) =>
      `Rate limit reached: ${limit} requests per ${window} for this ${scope === 'key' ? 'API key' : 'account'}. Retry in ${retryInSeconds} s.`,
  },
  token_budget_exhausted: {
    httpStatus: 429,
    grpcCode: RPC_CODE.RESOURCE_EXHAUSTED,
    category: 'rate_limit',
    /** `window` as describeWindow spells it (`1m`, `1d`, …). */
    message: ({
      tokens,
      window,
      scope,
      retryInSeconds,
    }: {
      tokens: number;
      window: string;
      scope: 'key' | 'account';
      retryInSeconds: number;
    }) =>
      `Token budget reached: ${tokens} tokens per ${window} for this ${scope === 'key' ? 'API key' : 'account'}. Retry in ${retryInSeconds} s.`,
  },
  missing_version_header: {
    ...INVALID_REQUEST,
    message: ({ header, accepted }: { header: string; accepted: readonly string[] }) =>
      `The '${header}' header is required. ${acceptedValues(accepted)}`,
  },
  unsupported_version: {
    ...INVALID_REQUEST,
    message: ({ header, accepted }: { header: string; accepted: readonly string[] }) =>
      `The '${header}' header must be a date-form API version this gateway accepts. ${acceptedValues(accepted)}`,
  },
  model_not_priced: {
    // 404, as the upstream APIs answer a model they do not serve (OpenAI model_not_found, Anthropic not_found_error, Gemini NOT_FOUND).
    httpStatus: 404,
    grpcCode: RPC_CODE.NOT_FOUND,
    category: 'not_found',
    /** `model`: already bounded and sanitised (shownModelName): it comes from the caller. */
    message: ({ model }: { model: string }) =>
      `The model '${model}' is not offered by this gateway. Ask the gateway's operator which models are available; retrying will not help.`,
  },
  route_not_enabled: {
    // 404, as each upstream answers an endpoint it does not offer (OpenAI and Anthropic not_found_error, Gemini NOT_FOUND):
    // to the client this gateway does not offer it, and no retry or other key will help. 403 would suggest the key lacks a
    // permission another key might have.
    httpStatus: 404,
    grpcCode: RPC_CODE.NOT_FOUND,
    category: 'not_found',
    message: ({ routes }: { routes: GatedRouteFamily }) =>
      routes === 'unlisted'
        ? "This endpoint is not offered by this gateway: its usage is not metered here. Ask the gateway's operator to enable it."
        : `The ${routes === 'batches' ? 'batch' : 'file'} API is not enabled on this gateway, because its usage is not metered here. ` +
          "Send requests one at a time instead, or ask the gateway's operator to enable it.",
  },
  malformed_model_name: {
    ...INVALID_REQUEST,
    message: () =>
      "The model name in the request path cannot be read: it must be a model name, percent-encoded at most once, without '/' or control characters.",
  },
  address_not_permitted: {
    ...PERMISSION,
    restriction: 'address',
    message: () =>
      'This API key has insufficient permissions for this request. Missing permission: source address ' +
      `(the key may not be used from this network address). ${RESTRICTION_HINT}`,
  },
  endpoint_not_permitted: {
    ...PERMISSION,
    restriction: 'endpoint',
    /** `readOnly`: the key may only read, and this request is not a read. */
    message: ({ readOnly }: { readOnly: boolean }) =>
      'This API key has insufficient permissions for this request. Missing permission: endpoint ' +
      `(${readOnly ? 'the key is read-only: it may only send GET requests' : 'the key may not call this endpoint'}). ${RESTRICTION_HINT}`,
  },
  model_not_permitted: {
    ...PERMISSION,
    restriction: 'model',
    /** `model`: already bounded and sanitised (shownModelName): it comes from the caller. */
    message: ({ model }: { model: string }) =>
      `This API key has insufficient permissions for this request. Missing permission: model (the key may not use the model '${model}'). ` +
      RESTRICTION_HINT,
  },
  model_not_readable: {
    ...PERMISSION,
    restriction: 'model',
    message: () =>
      'This API key has insufficient permissions for this request. Missing permission: model (the key may only use some models, ' +
      'and the gateway cannot read which model this request names: it reads it from the request path (…/models/{model}:method) ' +
      `or the JSON body's top-level 'model' field). ${RESTRICTION_HINT}`,
  },
  store_unavailable: {
    httpStatus: 503,
    grpcCode: RPC_CODE.UNAVAILABLE,
    category: 'unavailable',
    message: () => 'The gateway cannot verify API keys right now. Retry shortly.',
  },
} as const satisfies Record<string, DenyReasonSpec>;

export type DenyReason = keyof typeof DENY_REASONS;

/** The parameters of a reason's message template (none for fixed texts). */
export type DenyMessageParams<R extends DenyReason> = Parameters<(typeof DENY_REASONS)[R]['message']>;

/** The status a reason is answered with: its own, or its client style's where that style's upstream uses another. */
export function httpStatusOf(reason: DenyReason, style?: ClientStyle): DenyHttpStatus {
  const spec: DenyReasonSpec = DENY_REASONS[reason];
  return (style === undefined ? undefined : spec.httpStatusByStyle?.[style]) ?? spec.httpStatus;
}

/** Which kind of restriction a reason names; undefined for every reason that is not a restriction's (or no reason). */
export function restrictionOf(reason: string): RestrictionKind | undefined {
  const spec: DenyReasonSpec | undefined = Object.hasOwn(DENY_REASONS, reason) ? DENY_REASONS[reason as DenyReason] : undefined;
  return spec?.restriction;
}

export function grpcCodeOf(reason: DenyReason): RpcCode {
  return DENY_REASONS[reason].grpcCode;
}

export function categoryOf(reason: DenyReason): DenyCategory {
  return DENY_REASONS[reason].category;
}

/** A reason with its customer-facing message, filled from the catalogue's template. Call only when denying. */
export function denial<R extends DenyReason>(reason: R, ...params: DenyMessageParams<R>): { reason: R; message: string } {
  const template = DENY_REASONS[reason].message as (...args: DenyMessageParams<R>) => string;
  return { reason, message: template(...params) };
}
