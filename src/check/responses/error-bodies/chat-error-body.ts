import { categoryOf, type DenyCategory, type DenyReason } from '../../deny-reasons';
import type { ErrorBodyInput } from './error-body-input';

const TYPE_BY_CATEGORY = {
  authentication: 'authentication_error',
  // OpenAI's own answer to a restricted key: 401, type invalid_request_error (its code is null; ours goes there).
  permission: 'invalid_request_error',
  billing: 'billing_error',
  // OpenAI's own 429 says `"type":"requests"` (the kind of limit: requests, not tokens).
  rate_limit: 'requests',
  invalid_request: 'invalid_request_error',
  not_found: 'invalid_request_error',
  unavailable: 'server_error',
} as const satisfies Record<DenyCategory, string>;

/** Where OpenAI has a fixed code of its own for a kind of error, SDKs and client code match on it. */
const CODE_BY_CATEGORY: Partial<Record<DenyCategory, string>> = { rate_limit: 'rate_limit_exceeded' };
/** A 404 for a model OpenAI does not serve; its 404 for an endpoint it does not offer has no code, so route_not_enabled keeps ours. */
const CODE_BY_REASON: Partial<Record<DenyReason, string>> = { model_not_priced: 'model_not_found' };

/**
 * OpenAI-style `{"error":{message,type,param,code}}`. The SDK reads
 * `error.code` into `APIError.code`, so the reason code goes there unchanged,
 * except where OpenAI has its own value (429: `rate_limit_exceeded`; 404 for
 * a model it does not serve: `model_not_found`, with type
 * `invalid_request_error`, as OpenAI answers one; our reason still travels
 * in `x-gateway-error-code`). Nothing beyond OpenAI's four fields: which
 * limit refused a 429 is in the message and headers.
 */
export function chatErrorBody({ decision }: ErrorBodyInput): object {
  const category = categoryOf(decision.reason);
  return {
    error: {
      message: decision.message,
      // OpenAI's token rate limits answer `"type":"tokens"`, the kind of limit that refused.
      type: decision.reason === 'token_budget_exhausted' ? 'tokens' : TYPE_BY_CATEGORY[category],
      param: decision.param ?? null,
      code: CODE_BY_REASON[decision.reason] ?? CODE_BY_CATEGORY[category] ?? decision.reason,
    },
  };
}
