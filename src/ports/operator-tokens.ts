import type { OperatorTokenRecord } from '../operators/operator-token';

/**
 * Where operator API tokens are kept: Redis, shared by every replica, so a
 * revocation on one is seen by all on their next request (nothing is cached),
 * or the embedded memory store. Tokens are found by their hash only.
 */
export interface OperatorTokenStore {
  insertOperatorToken(tokenHash: string, record: OperatorTokenRecord): Promise<void>;
  /** The token's record while it is not revoked; null for an unknown or revoked token (expiry is the caller's check). */
  findOperatorToken(tokenHash: string): Promise<OperatorTokenRecord | null>;
  /** The token's record by its id, revoked or expired; null for an unknown id. */
  getOperatorToken(tokenId: string): Promise<OperatorTokenRecord | null>;
  /** Every token, revoked and expired ones included, oldest first. */
  listOperatorTokens(): Promise<OperatorTokenRecord[]>;
  /** Marks it revoked (at once for lookups); null for an unknown id. A revoked token keeps its first revocation time. */
  revokeOperatorToken(tokenId: string, revokedAt: string): Promise<OperatorTokenRecord | null>;
  close(): Promise<void>;
}
