import type { DenyDecision } from '../../decision';
import { describeWindow } from '../../../accounts/limits/rate-limit';
import type { LimitHit, LimitScope } from '../../../accounts/limits/rate-limits';

/** What every client style's error body is built from. */
export interface ErrorBodyInput {
  decision: DenyDecision;
  httpStatus: number;
  requestId: string;
}

/** Which limit refused a request, as every style's body names it. */
export interface LimitFacts {
  scope: LimitScope;
  /** `"1m"`, `"1h"`, … (describeWindow). */
  window: string;
  limit: number;
}

/** The limit behind a 429, when the decision names one: a request limit, or a token budget (its tokens as the limit). */
export function limitFactsOf(decision: DenyDecision): LimitFacts | undefined {
  const hit: LimitHit | undefined = decision.reason === 'rate_limited' ? decision.rateLimit : undefined;
  if (hit) return { scope: hit.scope, window: describeWindow(hit.windowSeconds), limit: hit.limit };
  const budget = decision.reason === 'token_budget_exhausted' ? decision.tokenBudget : undefined;
  return budget && { scope: budget.scope, window: describeWindow(budget.windowSeconds), limit: budget.tokens };
}

/** Milliseconds until a 429's request limit or token budget lets the caller in again. */
export function retryAfterMsOf(decision: DenyDecision): number | undefined {
  return decision.rateLimit?.retryAfterMs ?? decision.tokenBudget?.retryAfterMs;
}
