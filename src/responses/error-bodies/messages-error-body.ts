import { categoryOf } from '../../domain/deny-reasons';
import type { ErrorBodyInput } from './error-body-input';

const TYPE_BY_CATEGORY = {
  authentication: 'authentication_error',
  invalid_request: 'invalid_request_error',
  unavailable: 'api_error',
} as const;

/**
 * Anthropic-style `{"type":"error","error":{type,message,details},"request_id"}`.
 * SDK 1.x maps `details.error_code` to typed subclasses, so the reason code
 * goes there unchanged.
 */
export function messagesErrorBody({ decision, requestId }: ErrorBodyInput): object {
  return {
    type: 'error',
    error: {
      type: TYPE_BY_CATEGORY[categoryOf(decision.reason)],
      message: decision.message,
      details: { error_code: decision.reason },
    },
    request_id: requestId === '' ? null : requestId,
  };
}
