import { categoryOf, type DenyCategory } from '../../deny-reasons';
import { limitFactsOf, retryAfterMsOf, type ErrorBodyInput } from './error-body-input';

const STATUS_BY_CATEGORY = {
  authentication: 'UNAUTHENTICATED',
  permission: 'PERMISSION_DENIED',
  billing: 'FAILED_PRECONDITION',
  rate_limit: 'RESOURCE_EXHAUSTED',
  invalid_request: 'INVALID_ARGUMENT',
  not_found: 'NOT_FOUND',
  unavailable: 'UNAVAILABLE',
} as const satisfies Record<DenyCategory, string>;

export const ERROR_INFO_DOMAIN = 'gateway-authz';

/**
 * Google-style `{"error":{code,message,status,details}}` (AIP-193), with an
 * ErrorInfo detail whose `reason` is our reason code unchanged. A 429 names
 * the limit in ErrorInfo.metadata (string values only, as in the proto) and
 * adds a RetryInfo detail: Google sends no rate-limit headers.
 */
export function generativeErrorBody({ decision, httpStatus, requestId }: ErrorBodyInput): object {
  const metadata: Record<string, string> = {};
  const limit = limitFactsOf(decision);
  if (limit) Object.assign(metadata, { scope: limit.scope, window: limit.window, limit: String(limit.limit) });
  if (decision.param !== undefined) metadata.param = decision.param;
  if (requestId !== '') metadata.request_id = requestId;
  const details: object[] = [
    { '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: decision.reason, domain: ERROR_INFO_DOMAIN, metadata },
  ];
  const retryAfterMs = retryAfterMsOf(decision);
  if (limit && retryAfterMs !== undefined) {
    details.push({
      '@type': 'type.googleapis.com/google.rpc.RetryInfo',
      // The true wait, not capped at 60 s like retry-after (that cap is for other SDKs' retry loops).
      retryDelay: protoDuration(Math.max(1, retryAfterMs)),
    });
  }
  return {
    error: {
      code: httpStatus,
      message: decision.message,
      status: STATUS_BY_CATEGORY[categoryOf(decision.reason)],
      details,
    },
  };
}

/** google.protobuf.Duration in its JSON form, to the millisecond (rounded up): `"26s"`, `"0.250s"`. */
export function protoDuration(ms: number): string {
  const wholeMs = Math.max(0, Math.ceil(ms));
  const seconds = Math.floor(wholeMs / 1000);
  const millis = wholeMs % 1000;
  return millis === 0 ? `${seconds}s` : `${seconds}.${String(millis).padStart(3, '0')}s`;
}
