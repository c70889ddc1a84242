import type { Account, Store, StoredKey } from './store';

/**
 * The embedded default when no REDIS_URL is configured, so `npm start` works
 * on a fresh machine. Keeps nothing across restarts and is not shared between
 * replicas: for development only.
 */
export class MemoryStore implements Store {
  readonly description = 'in-memory store (REDIS_URL not set): keeps nothing across restarts, not shared between replicas';
  private readonly accounts = new Map<string, Account>();
  private readonly keysByHash = new Map<string, StoredKey>();

  async findKeyByHash(keyHash: string): Promise<StoredKey | null> {
    const key = this.keysByHash.get(keyHash);
    return key ? { ...key } : null;
  }

  async createAccount(account: Account): Promise<boolean> {
    if (this.accounts.has(account.id)) return false;
    this.accounts.set(account.id, { ...account });
    return true;
  }

  async getAccount(accountId: string): Promise<Account | null> {
    const account = this.accounts.get(accountId);
    return account ? { ...account } : null;
  }

  async insertKey(keyHash: string, key: StoredKey): Promise<'created' | 'account_not_found'> {
    if (!this.accounts.has(key.accountId)) return 'account_not_found';
    this.keysByHash.set(keyHash, { ...key });
    return 'created';
  }

  async close(): Promise<void> {}
}
