import type { DenyDecision } from '../decision';
import { denial } from '../deny-reasons';
import { describeWindow } from '../../accounts/limits/rate-limit';
import type { AuthorizeOutcome } from '../ports';
import { formatMoney, type Currency } from '../../accounts/money';

/** Restriction outcomes are decide()'s: it holds the refusal it sent, and decides again on changed restrictions. */
type Refusal = Exclude<AuthorizeOutcome, { kind: 'allow' | 'unknown_key' | 'restrictions_changed' | 'restricted' }>;

/** The store's refusals as deny reasons with their customer-facing words (from the catalogue). */
export function accountOutcomeToDecision(
  outcome: Refusal,
  currency: Currency,
): Pick<DenyDecision, 'reason' | 'message' | 'rateLimit' | 'tokenBudget'> {
  const keyPrefix = outcome.prefix;
  switch (outcome.kind) {
    case 'key_revoked':
    case 'key_expired':
    case 'account_suspended':
    case 'credit_exhausted':
      return denial(outcome.kind, { keyPrefix });
    case 'rate_limited': {
      const { hit } = outcome;
      return {
        rateLimit: hit,
        ...denial('rate_limited', {
          limit: hit.limit,
          window: describeWindow(hit.windowSeconds),
          scope: hit.scope,
          retryInSeconds: Math.max(1, Math.ceil(hit.retryAfterMs / 1000)),
        }),
      };
    }
    case 'budget_exceeded':
      return denial('budget_exceeded', { keyPrefix, scope: outcome.scope, cap: formatMoney(outcome.cap, currency) });
    case 'token_budget_exhausted': {
      const { budget } = outcome;
      return {
        tokenBudget: budget,
        ...denial('token_budget_exhausted', {
          tokens: budget.tokens,
          window: describeWindow(budget.windowSeconds),
          scope: budget.scope,
          retryInSeconds: Math.max(1, Math.ceil(budget.retryAfterMs / 1000)),
        }),
      };
    }
  }
}
