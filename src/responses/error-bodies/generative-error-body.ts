import { categoryOf } from '../../domain/deny-reasons';
import type { ErrorBodyInput } from './error-body-input';

const STATUS_BY_CATEGORY = {
  authentication: 'UNAUTHENTICATED',
  invalid_request: 'INVALID_ARGUMENT',
  unavailable: 'UNAVAILABLE',
} as const;

export const ERROR_INFO_DOMAIN = 'gateway-authz';

/**
 * Google-style `{"error":{code,message,status,details}}` (AIP-193), with an
 * ErrorInfo detail whose `reason` is our reason code unchanged.
 */
export function generativeErrorBody({ decision, httpStatus, requestId }: ErrorBodyInput): object {
  const metadata: Record<string, string> = {};
  if (decision.param !== undefined) metadata.param = decision.param;
  if (requestId !== '') metadata.request_id = requestId;
  return {
    error: {
      code: httpStatus,
      message: decision.message,
      status: STATUS_BY_CATEGORY[categoryOf(decision.reason)],
      details: [
        {
          '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
          reason: decision.reason,
          domain: ERROR_INFO_DOMAIN,
          metadata,
        },
      ],
    },
  };
}
