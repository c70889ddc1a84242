import type { OperatorTokenStore } from '../../ports/operator-tokens';
import { StoreUnavailableError } from '../../ports/store';
import type { OperatorTokenRecord } from '../../operators/operator-token';
import type { RedisTopology } from '../../platform/settings';
import { closeClient, connectedClient, type ScriptedRedis } from './redis-client';
import { redisKeys } from './redis-keys';

type StoredToken = OperatorTokenRecord & { tokenHash: string };

/**
 * Operator API tokens in Redis, on a connection of their own (the Check path
 * is untouched). Every admin request with a token reads it here: no replica
 * keeps a copy, so a revocation (which deletes the hash → id entry first)
 * refuses the token on every replica's next request.
 */
export class RedisOperatorTokens implements OperatorTokenStore {
  private constructor(private readonly redis: ScriptedRedis) {}

  static async connect(topology: RedisTopology, commandTimeoutMs: number): Promise<RedisOperatorTokens> {
    return new RedisOperatorTokens(await connectedClient(topology, commandTimeoutMs, 'operator tokens'));
  }

  async insertOperatorToken(tokenHash: string, record: OperatorTokenRecord): Promise<void> {
    const stored: StoredToken = { ...record, tokenHash };
    // The record and the listing first: a token that can authenticate is always listed, so it can be revoked.
    await this.call(() => this.redis.set(redisKeys.operatorToken(record.id), JSON.stringify(stored)));
    await this.call(() => this.redis.sadd(redisKeys.operatorTokens(), record.id));
    // No time to live: expiry is judged on the service's clock (operatorTokenIsLive), as every other expiry of an admin record.
    await this.call(() => this.redis.set(redisKeys.operatorTokenIdByHash(tokenHash), record.id));
  }

  async findOperatorToken(tokenHash: string): Promise<OperatorTokenRecord | null> {
    const id = await this.call(() => this.redis.get(redisKeys.operatorTokenIdByHash(tokenHash)));
    if (id === null) return null;
    const stored = await this.read(id);
    return stored && stored.tokenHash === tokenHash && stored.revokedAt === undefined ? recordOf(stored) : null;
  }

  async getOperatorToken(tokenId: string): Promise<OperatorTokenRecord | null> {
    const stored = await this.read(tokenId);
    return stored ? recordOf(stored) : null;
  }

  async listOperatorTokens(): Promise<OperatorTokenRecord[]> {
    const ids = await this.call(() => this.redis.smembers(redisKeys.operatorTokens()));
    const records = await Promise.all(ids.map((id) => this.read(id)));
    return records
      .filter((record): record is StoredToken => record !== null)
      .map(recordOf)
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id));
  }

  async revokeOperatorToken(tokenId: string, revokedAt: string): Promise<OperatorTokenRecord | null> {
    const stored = await this.read(tokenId);
    if (!stored) return null;
    // The lookup entry goes first: from this reply on, no replica finds the token.
    await this.call(() => this.redis.del(redisKeys.operatorTokenIdByHash(stored.tokenHash)));
    if (stored.revokedAt !== undefined) return recordOf(stored);
    const revoked: StoredToken = { ...stored, revokedAt };
    await this.call(() => this.redis.set(redisKeys.operatorToken(tokenId), JSON.stringify(revoked)));
    return recordOf(revoked);
  }

  async close(): Promise<void> {
    await closeClient(this.redis);
  }

  private async read(tokenId: string): Promise<StoredToken | null> {
    const text = await this.call(() => this.redis.get(redisKeys.operatorToken(tokenId)));
    if (text === null) return null;
    try {
      return JSON.parse(text) as StoredToken;
    } catch {
      return null;
    }
  }

  private async call<T>(command: () => Promise<T>): Promise<T> {
    try {
      return await command();
    } catch (error) {
      throw new StoreUnavailableError(`operator tokens: ${(error as Error).message}`, { cause: error });
    }
  }
}

/** The record without its hash: only this file ever holds the hash. */
function recordOf(stored: StoredToken): OperatorTokenRecord {
  const { id, name, displayPrefix, scopes, createdAt, expiresAt, createdBy, revokedAt } = stored;
  return { id, name, displayPrefix, scopes, createdAt, expiresAt, createdBy, ...(revokedAt !== undefined ? { revokedAt } : {}) };
}
