import { categoryOf } from '../../domain/deny-reasons';
import { limitFactsOf, type ErrorBodyInput } from './error-body-input';

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
      type: `${categoryOf(decision.reason)}_error`,
      code: decision.reason,
      message: decision.message,
      request_id: requestId === '' ? null : requestId,
      ...(limit && { rate_limit: limit }),
    },
  };
}
