import { categoryOf, type DenyCategory } from '../../deny-reasons';
import { limitFactsOf, type ErrorBodyInput } from './error-body-input';

const TYPE_BY_CATEGORY = {
  authentication: 'authentication_error',
  permission: 'permission_error',
  billing: 'billing_error',
  rate_limit: 'rate_limit_error',
  invalid_request: 'invalid_request_error',
  not_found: 'not_found_error',
  unavailable: 'api_error',
} as const satisfies Record<DenyCategory, string>;

/**
 * Anthropic-style `{"type":"error","error":{type,message,details},"request_id"}`.
 * SDK 1.x maps `details.error_code` to typed subclasses, so the reason code
 * goes there unchanged; a 429 adds the limit's scope, window and size.
 */
export function messagesErrorBody({ decision, requestId }: ErrorBodyInput): object {
  return {
    type: 'error',
    error: {
      type: TYPE_BY_CATEGORY[categoryOf(decision.reason)],
      message: decision.message,
      details: { error_code: decision.reason, ...limitFactsOf(decision) },
    },
    request_id: requestId === '' ? null : requestId,
  };
}
