/**
 * Every reason a request can be refused, with the HTTP status it maps to.
 * The code travels unchanged from the pipeline into logs, metrics and the
 * error body of every client style, so operators and customers can grep for it.
 */
export const DENY_REASONS = {
  missing_credential: { httpStatus: 401 },
  invalid_authorization_scheme: { httpStatus: 401 },
  malformed_authorization_header: { httpStatus: 401 },
  conflicting_credentials: { httpStatus: 401 },
  query_key_not_accepted: { httpStatus: 401 },
  malformed_key: { httpStatus: 401 },
  upstream_key_not_accepted: { httpStatus: 401 },
  unknown_key: { httpStatus: 401 },
  key_revoked: { httpStatus: 401 },
  key_expired: { httpStatus: 401 },
  account_suspended: { httpStatus: 402 },
  credit_exhausted: { httpStatus: 402 },
  rate_limited: { httpStatus: 429 },
  missing_version_header: { httpStatus: 400 },
  unsupported_version: { httpStatus: 400 },
  store_unavailable: { httpStatus: 503 },
} as const satisfies Record<string, { httpStatus: number }>;

export type DenyReason = keyof typeof DENY_REASONS;

export type DenyCategory = 'authentication' | 'billing' | 'rate_limit' | 'invalid_request' | 'unavailable';

export function httpStatusOf(reason: DenyReason): number {
  return DENY_REASONS[reason].httpStatus;
}

export function categoryOf(reason: DenyReason): DenyCategory {
  switch (httpStatusOf(reason)) {
    case 401:
      return 'authentication';
    case 402:
      return 'billing';
    case 429:
      return 'rate_limit';
    case 400:
      return 'invalid_request';
    default:
      return 'unavailable';
  }
}
