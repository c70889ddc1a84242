import { STATUS_CODES } from 'node:http';
import { restrictionOf } from '../check/deny-reasons';
import type { RestrictionKind } from '../keys/key-restrictions';

const RESTRICTION_WORDS: Readonly<Record<RestrictionKind, string>> = {
  address: 'source address',
  endpoint: 'endpoint (or read-only)',
  model: 'model',
};
import { QUERY_KEY_PARAMETER } from '../check/credentials/extract-credential';
import { CUSTOMER_KEY_PATTERN, DISPLAY_PREFIX_LENGTH } from '../keys/customer-key';
import { headerNamesFor } from '../check/routes/header-names';
import { headerPairs, type CheckResponseMessage, type EnvoyView } from './check-client';
import { cell } from './output';

/**
 * What `gateway-authz check` prints: the request as sent (credentials
 * masked) and the decision, as one object that `--json` prints as is and
 * the text form renders.
 */

/** Envoy answers 403 to a denial without denied_response. */
const ENVOY_DEFAULT_DENY_STATUS = 403;

interface RequestView {
  grpcTarget: string;
  method: string;
  path: string;
  authority: string;
  requestId: string;
  headers: Record<string, string>;
}

export interface AllowView {
  decision: 'allow';
  request: RequestView;
  /** Set on the request Envoy forwards upstream (the identity headers). */
  headers: Record<string, string>;
  /** Names only: their values are the caller's credentials. */
  headersToRemove: string[];
  queryParametersToRemove: string[];
  /** Added to the response sent back to the client (rate-limit headers). */
  responseHeadersToAdd: Record<string, string>;
}

export interface DenyView {
  decision: 'deny';
  request: RequestView;
  httpStatus: number;
  /** x-gateway-error-code; null if the answer has none. */
  code: string | null;
  headers: Record<string, string>;
  body: string;
  /** CheckResponse.status: the gRPC code Envoy sees (16 for 401, 7 for 402, …). */
  grpcStatus: { code: number; message: string };
  /** Which of the key's restrictions decided (docs/concepts/key-restrictions.md); null when none did. */
  restriction: RestrictionKind | null;
}

export type CheckView = AllowView | DenyView;

/** Every header that can carry a customer credential, in every spelling. */
const CREDENTIAL_HEADERS: ReadonlySet<string> = new Set(headerNamesFor(true).allCredentialHeaders);

/** Secrets this short are masked where they stand, not searched for in text (they would match everywhere). */
const MIN_SEARCHED_SECRET = 8;

/** `gk_live_AbC4xyz…` → `gk_live_AbC4…`: the display prefix, and never more than half of the value. */
export function maskSecret(secret: string): string {
  return `${secret.slice(0, Math.min(DISPLAY_PREFIX_LENGTH, Math.floor(secret.length / 2)))}…`;
}

/** `Bearer <token>` keeps its scheme; other credential headers are masked whole. Comma-joined repeats one by one. */
function maskCredentialValue(name: string, value: string): string {
  return value
    .split(',')
    .map((part) => {
      const scheme = name === 'authorization' ? /^(\s*\S+\s+)(\S.*)$/.exec(part) : null;
      if (scheme) return `${scheme[1]}${maskSecret(scheme[2]!)}`;
      const leading = /^\s*/.exec(part)![0];
      return part.trim() === '' ? part : `${leading}${maskSecret(part.trim())}`;
    })
    .join(',');
}

/** The credential parts of a credential header's value: the token after a scheme, or the whole value. */
function credentialTokens(name: string, value: string): string[] {
  return value
    .split(',')
    .map((part) => (name === 'authorization' ? (/^\s*\S+\s+(\S.*)$/.exec(part)?.[1] ?? part) : part).trim())
    .filter((token) => token !== '');
}

function decodedName(raw: string): string {
  try {
    return decodeURIComponent(raw.replace(/\+/g, ' '));
  } catch {
    return raw;
  }
}

/** The path with the value of every `?key=` (by its decoded name) and every customer-key shape masked. */
function maskPath(path: string): { path: string; secrets: string[] } {
  const secrets: string[] = [];
  const query = path.indexOf('?');
  let masked = path;
  if (query >= 0) {
    const parameters = path
      .slice(query + 1)
      .split('&')
      .map((parameter) => {
        const equals = parameter.indexOf('=');
        if (equals < 0 || decodedName(parameter.slice(0, equals)).toLowerCase() !== QUERY_KEY_PARAMETER) return parameter;
        const value = parameter.slice(equals + 1);
        if (value === '') return parameter;
        secrets.push(value, decodedName(value));
        return `${parameter.slice(0, equals + 1)}${maskSecret(value)}`;
      });
    masked = `${path.slice(0, query)}?${parameters.join('&')}`;
  }
  return { path: masked.replace(CUSTOMER_KEY_PATTERN, maskSecret), secrets };
}

/** The request as `check` echoes it, and every secret it holds (to be masked wherever else it might appear). */
function requestViewOf(grpcTarget: string, sent: EnvoyView): { request: RequestView; secrets: string[] } {
  const { path, secrets } = maskPath(sent.path);
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(sent.headers)) {
    if (CREDENTIAL_HEADERS.has(name)) {
      secrets.push(...credentialTokens(name, value));
      headers[name] = maskCredentialValue(name, value);
    } else {
      headers[name] = value.replace(CUSTOMER_KEY_PATTERN, maskSecret);
    }
  }
  for (const text of [sent.path, sent.authority, ...Object.values(sent.headers)]) secrets.push(...(text.match(CUSTOMER_KEY_PATTERN) ?? []));
  const request = { grpcTarget, method: sent.method, path, authority: sent.authority, requestId: sent.requestId, headers };
  return { request, secrets };
}

function headerRecord(pairs: readonly [string, string][]): Record<string, string> {
  const record: Record<string, string> = {};
  for (const [name, value] of pairs) record[name] = record[name] === undefined ? value : `${record[name]},${value}`;
  return record;
}

/** Replaces every secret (longest first) in every string of a view: whatever the service answers, no credential is printed whole. */
function redact<T>(value: T, secrets: readonly string[]): T {
  if (secrets.length === 0) return value;
  const mask = (text: string) => secrets.reduce((result, secret) => result.split(secret).join(maskSecret(secret)), text);
  const walk = (node: unknown): unknown => {
    if (typeof node === 'string') return mask(node);
    if (Array.isArray(node)) return node.map(walk);
    if (node && typeof node === 'object') return Object.fromEntries(Object.entries(node).map(([key, child]) => [mask(key), walk(child)]));
    return node;
  };
  return walk(value) as T;
}

/** The decision in a CheckResponse, as Envoy would apply it: status 0 allows, anything else denies. */
export function checkViewOf(grpcTarget: string, sent: EnvoyView, response: CheckResponseMessage): CheckView {
  const { request, secrets } = requestViewOf(grpcTarget, sent);
  const searched = [...new Set(secrets.filter((secret) => secret.length >= MIN_SEARCHED_SECRET))].sort((a, b) => b.length - a.length);
  const grpcCode = response.status?.code ?? 0;
  if (grpcCode === 0) {
    const ok = response.ok_response;
    return redact<AllowView>(
      {
        decision: 'allow',
        request,
        headers: headerRecord(headerPairs(ok?.headers)),
        headersToRemove: [...(ok?.headers_to_remove ?? [])],
        queryParametersToRemove: [...(ok?.query_parameters_to_remove ?? [])],
        responseHeadersToAdd: headerRecord(headerPairs(ok?.response_headers_to_add)),
      },
      searched,
    );
  }
  const denied = response.denied_response;
  const headers = headerRecord(headerPairs(denied?.headers));
  return redact<DenyView>(
    {
      decision: 'deny',
      request,
      httpStatus: denied?.status?.code || ENVOY_DEFAULT_DENY_STATUS,
      code: headers['x-gateway-error-code'] ?? null,
      headers,
      body: denied?.body ?? '',
      grpcStatus: { code: grpcCode, message: response.status?.message ?? '' },
      restriction: restrictionOf(headers['x-gateway-error-code'] ?? '') ?? null,
    },
    searched,
  );
}

function headerLines(headers: Record<string, string>, none = '(none)'): string {
  const entries = Object.entries(headers);
  return entries.length === 0 ? `  ${none}\n` : entries.map(([name, value]) => `  ${cell(name)}: ${cell(value)}\n`).join('');
}

function renderRequest(request: RequestView): string {
  return (
    `Check sent to ${cell(request.grpcTarget)}: ${cell(request.method)} ${cell(request.path)}\n` +
    headerLines({ ':authority': request.authority, ...request.headers })
  );
}

/** `401` → `401 Unauthorized`. */
function statusLine(status: number): string {
  const phrase = STATUS_CODES[status];
  return phrase ? `${status} ${phrase}` : String(status);
}

export function renderCheckView(view: CheckView): string {
  const request = renderRequest(view.request);
  if (view.decision === 'allow') {
    const list = (names: readonly string[]) => (names.length === 0 ? '(none)' : names.map(cell).join(', '));
    return [
      request,
      '\nALLOW: Envoy forwards the request upstream.\n',
      'Headers set on the upstream request:\n',
      headerLines(view.headers),
      `Headers removed: ${list(view.headersToRemove)}\n`,
      `Query parameters removed: ${list(view.queryParametersToRemove)}\n`,
      'Headers added to the response:\n',
      headerLines(view.responseHeadersToAdd),
    ].join('');
  }
  return [
    request,
    `\nDENY: ${statusLine(view.httpStatus)}, ${cell(view.code ?? 'no x-gateway-error-code')}. Envoy answers the client:\n`,
    view.restriction === null
      ? ''
      : `Decided by the key's restrictions (its own or its account's): ${RESTRICTION_WORDS[view.restriction]}.\n`,
    headerLines(view.headers),
    '\n',
    `${cell(view.body)}\n`,
  ].join('');
}
