import { categoryOf } from '../../domain/deny-reasons';
import type { ErrorBodyInput } from './error-body-input';

/**
 * For paths outside the three client styles: a flat, self-explanatory object
 * wrapped in `error` (the wrapper is what most HTTP clients and the OpenAI
 * SDK expect to find).
 */
export function genericErrorBody({ decision, httpStatus, requestId }: ErrorBodyInput): object {
  return {
    error: {
      status: httpStatus,
      type: `${categoryOf(decision.reason)}_error`,
      code: decision.reason,
      message: decision.message,
      request_id: requestId === '' ? null : requestId,
    },
  };
}
