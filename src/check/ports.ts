import type { KeyEnvironment } from '../keys/customer-key';
import type { CreditHold, PlacedHold } from '../accounts/credit-holds';
import type { KeyIds } from '../keys/key-records';
import type { RestrictionKind } from '../keys/key-restrictions';
import type { LimitHit, LimitScope, LimitState, RatePlan } from '../accounts/limits/rate-limits';
import type { TokenBudgetPlan, TokenBudgetState } from '../accounts/limits/token-budgets';

/**
 * What the decision pipeline asks of a store: which key a hash is, and the
 * verdict on that key. Both stores (Redis, in-memory) implement these and
 * pass the same contract tests in test/store/.
 */
export interface KeyIndex {
  /** Null when no key has this hash. Rejects when the store cannot answer. */
  resolveKeyHash(keyHash: string): Promise<KeyIds | null>;
  /** Drops what is remembered for this hash (a cache), when the store's decision showed it names another key. */
  forget?(keyHash: string): void;
}

export interface AuthorizeRequest extends KeyIds {
  /** The operator's default plan; account and key overrides are applied by the store. */
  defaultPlan: RatePlan;
  /** The operator's default token budgets; account and key overrides are applied by the store. */
  defaultTokenBudgets: TokenBudgetPlan;
  /**
   * What the request reserves if allowed (src/accounts/credit-holds.ts), on an
   * account that is prepaid or has a spend cap or a token budget; none: the
   * decision reserves nothing (routes whose answers are never metered).
   */
  hold?: CreditHold;
  /** The restrictions the caller decided on (RestrictionsSent); absent: it believes the key and account have none. */
  restrictions?: RestrictionsSent;
}

/**
 * What Check decided about a key's restrictions, and on which: the stamps (src/keys/key-restrictions.ts
 * restrictionsStamp, '' for none) of the key's and the account's stored restriction texts it read them from, and the
 * kind it found missing, if any. The store compares the stamps with the records' inside its atomic step: a change
 * since the replica cached them is answered `restrictions_changed` with the current texts, so a change reaches every
 * replica on its next request, as a revocation does, and no request is decided on restrictions that no longer hold.
 */
export interface RestrictionsSent {
  keyStamp: string;
  accountStamp: string;
  refused?: RestrictionKind;
}

/**
 * The store's verdict on a known key, decided atomically in this order:
 * key status → the key's restrictions (decided by Check, on stamps the store confirms) → billing (credit) → monthly spend caps → request rate limits →
 * token budgets. A refused request consumes nothing and holds nothing; an
 * allowed one consumes one request from every limit that applies, and places
 * its hold. Token budgets are only read: tokens are consumed when the
 * answer's usage arrives (the usage ledger), which releases the hold.
 * Holds in flight count against what is left: a prepaid balance must cover
 * them and this request's hold, as must each spend cap; a token budget must
 * have one token left after them.
 */
export type AuthorizeOutcome =
  | {
      kind: 'allow';
      prefix: string;
      environment: KeyEnvironment;
      tightest?: LimitState;
      /** The token budget with the fewest tokens left, when any applies. */
      tightestBudget?: TokenBudgetState;
      /** What the decision held (money and tokens where something counts them); absent: nothing. */
      held?: PlacedHold;
    }
  | { kind: 'unknown_key' }
  /** The records' restrictions are not those sent: decide again on these texts. Nothing consumed or held. */
  | { kind: 'restrictions_changed'; prefix: string; keyText: string; accountText: string }
  /** The key is valid (status, expiry, account) and the restrictions sent were current and refused. Nothing consumed. */
  | { kind: 'restricted'; prefix: string }
  | { kind: 'key_revoked'; prefix: string }
  | { kind: 'key_expired'; prefix: string }
  | { kind: 'account_suspended'; prefix: string }
  | { kind: 'credit_exhausted'; prefix: string }
  | { kind: 'rate_limited'; prefix: string; hit: LimitHit }
  /** The month's spend of the key (its own cap) or of its account reached the cap, in minor units. */
  | { kind: 'budget_exceeded'; prefix: string; scope: LimitScope; cap: number }
  /** The budget that keeps the caller waiting longest (retryAfterMs: until one token is back). */
  | { kind: 'token_budget_exhausted'; prefix: string; budget: TokenBudgetState };

export interface Authorizer {
  /** One round trip for the Redis store. Rejects when the store cannot answer. */
  authorize(request: AuthorizeRequest): Promise<AuthorizeOutcome>;
}

/** The store calls on the Check path, as metrics name them. */
export type CheckPathOperation = 'resolve_key' | 'authorize';

/** Told how long each Check-path store call took (seconds) and whether it failed. */
export type CheckPathTimer = (operation: CheckPathOperation, seconds: number, failed: boolean) => void;

/**
 * A store that times its own Check-path calls where it already holds their
 * start and end (the Redis store's reply queue), so that timing them adds no
 * wrapper promise per call.
 */
export interface TimesCheckPath {
  timeCheckPathWith(timer: CheckPathTimer): void;
}

/**
 * A store whose Checks decide on a clock it carries between samples of
 * another (the Redis store: Redis's TIME, see redis-clock.ts): how far it can
 * be off, in µs; undefined when it carries none (a test's clock override).
 */
export interface CarriesDecisionClock {
  decisionClockUncertaintyUs(): number | undefined;
}
