import type { DenyDecision } from '../domain/decision';
import { describeWindow } from '../limits/rate-limit';
import type { AuthorizeOutcome } from '../domain/authorization';

type Refusal = Exclude<AuthorizeOutcome, { kind: 'allow' } | { kind: 'unknown_key' }>;

const NEW_KEY_HINT = "Create a new key in the dashboard's API Keys section.";

/** Customer-facing words for the store's refusals: what happened and what to do, nothing more. */
export function accountOutcomeToDecision(outcome: Refusal): Pick<DenyDecision, 'reason' | 'message' | 'rateLimit'> {
  const key = `${outcome.prefix}…`;
  switch (outcome.kind) {
    case 'key_revoked':
      return { reason: 'key_revoked', message: `The API key ${key} has been revoked. ${NEW_KEY_HINT}` };
    case 'key_expired':
      return { reason: 'key_expired', message: `The API key ${key} has expired. ${NEW_KEY_HINT}` };
    case 'account_suspended':
      return {
        reason: 'account_suspended',
        message: `The account of API key ${key} is suspended. Contact billing to reactivate it; retrying will not help until then.`,
      };
    case 'credit_exhausted':
      return {
        reason: 'credit_exhausted',
        message: `The prepaid credit of the account of API key ${key} is used up. Top up the account's credit to continue; retrying will not help until then.`,
      };
    case 'rate_limited': {
      const { hit } = outcome;
      const seconds = Math.max(1, Math.ceil(hit.retryAfterMs / 1000));
      return {
        reason: 'rate_limited',
        rateLimit: hit,
        message: `Rate limit reached: ${hit.limit} requests per ${describeWindow(hit.windowSeconds)} for this ${hit.scope === 'key' ? 'API key' : 'account'}. Retry in ${seconds} s.`,
      };
    }
  }
}
