import type { KeyEnvironment } from '../keys/customer-key';
import type { KeyIds } from './key-records';
import type { LimitHit, LimitState, RatePlan } from './rate-limits';

/**
 * What the decision pipeline asks of a store: which key a hash is, and the
 * verdict on that key. Both stores (Redis, in-memory) implement these and
 * pass the same contract tests in test/store/.
 */
export interface KeyIndex {
  /** Null when no key has this hash. Rejects when the store cannot answer. */
  resolveKeyHash(keyHash: string): Promise<KeyIds | null>;
}

export interface AuthorizeRequest extends KeyIds {
  /** The operator's default plan; account and key overrides are applied by the store. */
  defaultPlan: RatePlan;
}

/**
 * The store's verdict on a known key, decided atomically in this order:
 * key status → billing → rate limits. A refused request consumes nothing;
 * an allowed one consumes one request from every limit that applies.
 */
export type AuthorizeOutcome =
  | { kind: 'allow'; prefix: string; environment: KeyEnvironment; tightest?: LimitState }
  | { kind: 'unknown_key' }
  | { kind: 'key_revoked'; prefix: string }
  | { kind: 'key_expired'; prefix: string }
  | { kind: 'account_suspended'; prefix: string }
  | { kind: 'credit_exhausted'; prefix: string }
  | { kind: 'rate_limited'; prefix: string; hit: LimitHit };

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
