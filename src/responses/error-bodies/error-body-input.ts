import type { DenyDecision } from '../../domain/decision';
import { describeWindow, type LimitHit, type LimitScope } from '../../limits/rate-limit';

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

/** The limit behind a 429, when the decision names one. */
export function limitFactsOf(decision: DenyDecision): LimitFacts | undefined {
  const hit: LimitHit | undefined = decision.reason === 'rate_limited' ? decision.rateLimit : undefined;
  return hit && { scope: hit.scope, window: describeWindow(hit.windowSeconds), limit: hit.limit };
}
