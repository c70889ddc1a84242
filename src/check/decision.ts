import type { PlacedHold } from '../accounts/credit-holds';
import type { LimitHit, LimitState } from '../accounts/limits/rate-limits';
import type { DenyReason } from './deny-reasons';
import type { ClassifiedRoute } from './routes/route';
import type { TokenBudgetState } from '../accounts/limits/token-budgets';

/** Who the caller is, once the key is known. Carries only the display prefix, never the key. */
export interface CallerIdentity {
  accountId: string;
  keyId: string;
  keyPrefix: string;
  environment: string;
}

/** What must not reach the upstream, whatever the decision. */
export interface CredentialStripping {
  headers: readonly string[];
  queryParameters: readonly string[];
}

export interface AllowDecision {
  kind: 'allow';
  route: ClassifiedRoute;
  /** Absent only for operator-listed public routes. */
  identity?: CallerIdentity;
  strip: CredentialStripping;
  /** The most constrained limit after this request, for rate-limit response headers. */
  rateLimit?: LimitState;
  /** The token budget with the fewest tokens left, for token rate-limit response headers. */
  tokenBudget?: TokenBudgetState;
  /** The credit hold placed, told to the usage processor (HOLD_HEADER), which releases it with the answer. */
  held?: PlacedHold;
}

export interface DenyDecision {
  kind: 'deny';
  route: ClassifiedRoute;
  reason: DenyReason;
  /** Customer-facing text: says what happened and what to do; never secret material. */
  message: string;
  /** The header or parameter at fault, when there is one. */
  param?: string;
  /** Known once the key's format parsed; safe to show. */
  keyPrefix?: string;
  accountId?: string;
  /** For rate_limited: which limit (key or account, and its window) refused the request. */
  rateLimit?: LimitHit;
  /** For token_budget_exhausted: which budget refused the request, and when one token is back. */
  tokenBudget?: TokenBudgetState;
  /** For operators' logs only (e.g. why the store failed); never sent to the client. */
  internalDetail?: string;
}

export type Decision = AllowDecision | DenyDecision;
