import type { OperatorTokenStore } from '../ports/operator-tokens';
import type { OperatorTokenRecord } from '../operators/operator-token';

/** Operator API tokens in process, for the embedded store: lost on a restart, one replica only (as MemoryStore). */
export class MemoryOperatorTokens implements OperatorTokenStore {
  private readonly records = new Map<string, { record: OperatorTokenRecord; tokenHash: string }>();
  private readonly idsByHash = new Map<string, string>();

  async insertOperatorToken(tokenHash: string, record: OperatorTokenRecord): Promise<void> {
    this.records.set(record.id, { record: structuredClone(record), tokenHash });
    this.idsByHash.set(tokenHash, record.id);
  }

  async findOperatorToken(tokenHash: string): Promise<OperatorTokenRecord | null> {
    const id = this.idsByHash.get(tokenHash);
    const entry = id === undefined ? undefined : this.records.get(id);
    return entry && entry.record.revokedAt === undefined ? structuredClone(entry.record) : null;
  }

  async getOperatorToken(tokenId: string): Promise<OperatorTokenRecord | null> {
    const entry = this.records.get(tokenId);
    return entry ? structuredClone(entry.record) : null;
  }

  async listOperatorTokens(): Promise<OperatorTokenRecord[]> {
    return [...this.records.values()]
      .map((entry) => structuredClone(entry.record))
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id));
  }

  async revokeOperatorToken(tokenId: string, revokedAt: string): Promise<OperatorTokenRecord | null> {
    const entry = this.records.get(tokenId);
    if (!entry) return null;
    this.idsByHash.delete(entry.tokenHash);
    entry.record.revokedAt ??= revokedAt;
    return structuredClone(entry.record);
  }

  async close(): Promise<void> {
    this.records.clear();
    this.idsByHash.clear();
  }
}
