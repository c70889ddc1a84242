import { categoryOf, type DenyCategory } from '../../deny-reasons';
import { limitFactsOf, type ErrorBodyInput } from './error-body-input';

const TYPE_BY_CATEGORY = {
  authentication: 'authentication_error',
  permission: 'permission_error',
  billing: 'billing_error',
  rate_limit: 'rate_limit_error',
  invalid_request: 'invalid_request_error',
  not_found: 'not_found_error',
  unavailable: 'unavailable_error',
} as const satisfies Record<DenyCategory, string>;

/**
 * For paths outside the three client styles: a flat, self-explanatory object
 * wrapped in `error` (the wrapper is what most HTTP clients and the OpenAI
 * SDK expect to find). A 429 adds `rate_limit: {scope, window, limit}`.
 */
export function genericErrorBody({ decision, httpStatus, requestId }: ErrorBodyInput): object {
  const limit = limitFactsOf(decision);
  return {
    error: {
      status: httpStatus,
      type: TYPE_BY_CATEGORY[categoryOf(decision.reason)],
      code: decision.reason,
      message: decision.message,
      request_id: requestId === '' ? null : requestId,
      ...(limit && { rate_limit: limit }),
    },
  };
}
