import { categoryOf, type DenyCategory, type DenyReason } from '../../domain/deny-reasons';
import type { ErrorBodyInput } from './error-body-input';

const TYPE_BY_CATEGORY = {
  authentication: 'authentication_error',
  billing: 'billing_error',
  // OpenAI's own 429 says `"type":"requests"` (the kind of limit: requests, not tokens).
  rate_limit: 'requests',
  invalid_request: 'invalid_request_error',
  unavailable: 'server_error',
} as const satisfies Record<DenyCategory, string>;

/** Where OpenAI has a fixed code of its own, SDKs and client code match on it. */
const CODE_BY_REASON: Partial<Record<DenyReason, string>> = { rate_limited: 'rate_limit_exceeded' };

/**
 * OpenAI-style `{"error":{message,type,param,code}}`. The SDK reads
 * `error.code` into `APIError.code`, so the reason code goes there unchanged,
 * except where OpenAI has its own value (429: `rate_limit_exceeded`; our
 * reason still travels in `x-gateway-error-code`). Nothing beyond OpenAI's
 * four fields: which limit refused a 429 is in the message and headers.
 */
export function chatErrorBody({ decision }: ErrorBodyInput): object {
  return {
    error: {
      message: decision.message,
      type: TYPE_BY_CATEGORY[categoryOf(decision.reason)],
      param: decision.param ?? null,
      code: CODE_BY_REASON[decision.reason] ?? decision.reason,
    },
  };
}
