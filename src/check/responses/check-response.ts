import type { AllowDecision, Decision, DenyDecision } from '../decision';
import { grpcCodeOf, httpStatusOf, RPC_CODE, type StoreFailureMode } from '../deny-reasons';
import { errorBodyFor } from './error-bodies';
import { ALL_IDENTITY_HEADERS, IDENTITY_HEADERS } from './identity-headers';
import { formatPlacedHold, HOLD_HEADER } from '../../accounts/credit-holds';
import { limitHitHeaders, rateLimitHeaders, tokenBudgetHeaders, type HeaderPair, type RateLimitHeaderContext } from './rate-limit-headers';

/**
 * The one place a Decision becomes Envoy's CheckResponse (plain object for
 * proto-loader with keepCase). Envoy rules this follows (its ext_authz HTTP
 * filter with a gRPC v3 service):
 *  - a denial is a successful RPC with status.code != 0 and denied_response;
 *    a gRPC error would become status_on_error or, worse, failure_mode_allow;
 *  - headers are sent with `append: false` AND OVERWRITE_IF_EXISTS_OR_ADD, so
 *    both Envoy <= 1.36 (reads `append`) and newer (reads `append_action`)
 *    overwrite instead of appending to a client-supplied value;
 *  - content-type is always set, or Envoy labels the body text/plain.
 */

export type { StoreFailureMode } from '../deny-reasons';

export type CheckAnswer =
  { kind: 'response'; response: CheckResponse; httpStatus: number } | { kind: 'rpc-error'; grpcCode: number; details: string };

export interface HeaderValueOption {
  header: { key: string; value: string };
  append: { readonly value: boolean };
  append_action: 'OVERWRITE_IF_EXISTS_OR_ADD';
}

export interface CheckResponse {
  status: { code: number; message: string };
  denied_response?: { status: { code: number }; headers: HeaderValueOption[]; body: string };
  ok_response?: {
    headers: HeaderValueOption[];
    headers_to_remove: string[];
    query_parameters_to_remove: string[];
    /** Added to the response sent back to the client (rate-limit headers). */
    response_headers_to_add: HeaderValueOption[];
  };
}

export interface CheckAnswerContext extends RateLimitHeaderContext {
  requestId: string;
  storeFailureMode: StoreFailureMode;
}

/** Shared by every header option: nothing reads it but the encoders. */
const NO_APPEND: { readonly value: false } = Object.freeze({ value: false });

export function overwrite(key: string, value: string): HeaderValueOption {
  return { header: { key, value }, append: NO_APPEND, append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' };
}

function overwriteAll(pairs: readonly HeaderPair[]): HeaderValueOption[] {
  return pairs.map(([key, value]) => overwrite(key, value));
}

export function toCheckAnswer(decision: Decision, context: CheckAnswerContext): CheckAnswer {
  if (decision.kind === 'allow') return { kind: 'response', response: allowResponse(decision, context), httpStatus: 200 };
  if (decision.reason === 'store_unavailable' && context.storeFailureMode === 'grpc-unavailable') {
    // Lets Envoy's failure_mode_allow / status_on_error decide; never an allow from us.
    return { kind: 'rpc-error', grpcCode: RPC_CODE.UNAVAILABLE, details: 'key store unavailable' };
  }
  const httpStatus = httpStatusOf(decision.reason, decision.route.style);
  return { kind: 'response', response: denyResponse(decision, httpStatus, context), httpStatus };
}

function allowResponse(decision: AllowDecision, context: RateLimitHeaderContext): CheckResponse {
  const { identity } = decision;
  const headers = identity
    ? [
        overwrite(IDENTITY_HEADERS.accountId, identity.accountId),
        overwrite(IDENTITY_HEADERS.keyId, identity.keyId),
        overwrite(IDENTITY_HEADERS.keyPrefix, identity.keyPrefix),
        overwrite(IDENTITY_HEADERS.routeFamily, decision.route.family),
      ]
    : [];
  // The hold, set where one was placed and removed everywhere else, so no client can name one for metering to release.
  if (decision.held) headers.push(overwrite(HOLD_HEADER, formatPlacedHold(decision.held)));
  const removed = identity ? [...decision.strip.headers] : [...decision.strip.headers, ...ALL_IDENTITY_HEADERS];
  if (!decision.held) removed.push(HOLD_HEADER);
  return {
    status: { code: RPC_CODE.OK, message: '' },
    ok_response: {
      headers,
      headers_to_remove: removed,
      query_parameters_to_remove: [...decision.strip.queryParameters],
      response_headers_to_add: overwriteAll([
        ...(decision.rateLimit ? rateLimitHeaders(decision.route.style, decision.rateLimit, context) : []),
        ...(decision.tokenBudget ? tokenBudgetHeaders(decision.route.style, decision.tokenBudget, context) : []),
      ]),
    },
  };
}

function denyResponse(decision: DenyDecision, httpStatus: number, context: CheckAnswerContext): CheckResponse {
  const { requestId } = context;
  const headers = [overwrite('content-type', 'application/json'), overwrite('x-gateway-error-code', decision.reason)];
  if (httpStatus === 401) {
    // RFC 6750: no error attribute when the request carried no credential at all.
    const error = decision.reason === 'missing_credential' ? '' : ', error="invalid_token"';
    headers.push(overwrite('www-authenticate', `Bearer realm="gateway-authz"${error}`));
  }
  if (httpStatus < 500 && httpStatus !== 429) {
    // Retrying a credential, billing or request-shape error cannot succeed; tell the SDKs so.
    headers.push(overwrite('x-should-retry', 'false'));
  }
  if (httpStatus === 429 && decision.rateLimit) {
    // A 429 is worth retrying: the SDKs wait for retry-after(-ms), so no x-should-retry.
    headers.push(...overwriteAll(limitHitHeaders(decision.rateLimit)));
    headers.push(...overwriteAll(rateLimitHeaders(decision.route.style, decision.rateLimit, context)));
  }
  if (httpStatus === 429 && decision.tokenBudget) {
    headers.push(...overwriteAll(limitHitHeaders(decision.tokenBudget)));
    headers.push(...overwriteAll(tokenBudgetHeaders(decision.route.style, decision.tokenBudget, context)));
  }
  if (requestId !== '') {
    headers.push(overwrite('x-request-id', requestId));
    if (decision.route.style === 'messages') headers.push(overwrite('request-id', requestId));
  }
  return {
    status: { code: grpcCodeOf(decision.reason), message: decision.reason },
    denied_response: {
      status: { code: httpStatus },
      headers,
      body: errorBodyFor(decision.route.style, { decision, httpStatus, requestId }),
    },
  };
}
