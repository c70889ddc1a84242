import { categoryOf } from '../../domain/deny-reasons';
import type { ErrorBodyInput } from './error-body-input';

const TYPE_BY_CATEGORY = {
  authentication: 'authentication_error',
  invalid_request: 'invalid_request_error',
  unavailable: 'server_error',
} as const;

/**
 * OpenAI-style `{"error":{message,type,param,code}}`. The SDK reads
 * `error.code` into `APIError.code`, so the reason code goes there unchanged.
 */
export function chatErrorBody({ decision }: ErrorBodyInput): object {
  return {
    error: {
      message: decision.message,
      type: TYPE_BY_CATEGORY[categoryOf(decision.reason)],
      param: decision.param ?? null,
      code: decision.reason,
    },
  };
}
