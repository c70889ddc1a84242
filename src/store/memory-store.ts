import { systemClock, type Clock } from '../domain/clock';
import { authorizeAccountState } from '../limits/authorize-account-state';
import type {
  Account,
  AccountPatch,
  AuthorizeOutcome,
  AuthorizeRequest,
  CreditResult,
  KeyIds,
  KeyPatch,
  Store,
  StoredKey,
} from './store';

interface Bucket {
  tatUs: number;
  expiresAtMs: number;
}

/**
 * The embedded default when no REDIS_URL is configured, so `npm start` works
 * on a fresh machine. Keeps nothing across restarts and is not shared between
 * replicas: for development only. Decides with the same rules as the Redis
 * script (authorizeAccountState) on the injected clock.
 */
export class MemoryStore implements Store {
  readonly description = 'in-memory store (REDIS_URL not set): keeps nothing across restarts, not shared between replicas';
  private readonly accounts = new Map<string, Account>();
  private readonly keys = new Map<string, StoredKey>();
  private readonly idsByHash = new Map<string, KeyIds>();
  /** Rate-limit buckets per account. */
  private readonly buckets = new Map<string, Map<string, Bucket>>();

  constructor(private readonly clock: Clock = systemClock) {}

  async resolveKeyHash(keyHash: string): Promise<KeyIds | null> {
    const ids = this.idsByHash.get(keyHash);
    return ids ? { ...ids } : null;
  }

  async authorize(request: AuthorizeRequest): Promise<AuthorizeOutcome> {
    const nowMs = this.clock.now();
    const key = this.keys.get(request.keyId) ?? null;
    const buckets = this.buckets.get(request.accountId) ?? new Map<string, Bucket>();
    const tats = new Map<string, number>();
    for (const [name, bucket] of buckets) {
      if (bucket.expiresAtMs > nowMs) tats.set(name, bucket.tatUs);
      else buckets.delete(name);
    }
    const { outcome, writes } = authorizeAccountState(
      { key: key?.accountId === request.accountId ? key : null, account: this.accounts.get(request.accountId) ?? null, tats },
      nowMs * 1000,
      request.defaultPlan,
    );
    for (const write of writes) buckets.set(write.bucket, { tatUs: write.tatUs, expiresAtMs: nowMs + write.ttlMs });
    if (buckets.size > 0) this.buckets.set(request.accountId, buckets);
    return outcome;
  }

  async createAccount(account: Account): Promise<boolean> {
    if (this.accounts.has(account.id)) return false;
    this.accounts.set(account.id, structuredClone(account));
    return true;
  }

  async getAccount(accountId: string): Promise<Account | null> {
    const account = this.accounts.get(accountId);
    return account ? structuredClone(account) : null;
  }

  async updateAccount(accountId: string, patch: AccountPatch): Promise<Account | null> {
    const account = this.accounts.get(accountId);
    if (!account) return null;
    if (patch.name !== undefined) account.name = patch.name;
    if (patch.status !== undefined) account.status = patch.status;
    if (patch.creditBalance === null) delete account.creditBalance;
    else if (patch.creditBalance !== undefined) account.creditBalance = patch.creditBalance;
    if (patch.limits !== undefined) {
      const limits = { ...account.limits };
      for (const scope of ['key', 'account'] as const) {
        const value = patch.limits[scope];
        if (value === null) delete limits[scope];
        else if (value !== undefined) limits[scope] = structuredClone(value);
      }
      if (Object.keys(limits).length === 0) delete account.limits;
      else account.limits = limits;
    }
    return structuredClone(account);
  }

  async adjustCredit(accountId: string, amount: number): Promise<CreditResult> {
    const account = this.accounts.get(accountId);
    if (!account) return { kind: 'account_not_found' };
    if (account.creditBalance === undefined) return { kind: 'not_prepaid' };
    account.creditBalance += amount;
    return { kind: 'ok', creditBalance: account.creditBalance };
  }

  async insertKey(keyHash: string, key: StoredKey): Promise<'created' | 'account_not_found'> {
    if (!this.accounts.has(key.accountId)) return 'account_not_found';
    this.keys.set(key.id, structuredClone(key));
    this.idsByHash.set(keyHash, { keyId: key.id, accountId: key.accountId });
    return 'created';
  }

  async getKey(keyId: string): Promise<StoredKey | null> {
    const key = this.keys.get(keyId);
    return key ? structuredClone(key) : null;
  }

  async updateKey(keyId: string, patch: KeyPatch): Promise<StoredKey | null> {
    const key = this.keys.get(keyId);
    if (!key) return null;
    if (patch.name !== undefined) key.name = patch.name;
    if (patch.limits === null) delete key.limits;
    else if (patch.limits !== undefined) key.limits = structuredClone(patch.limits);
    return structuredClone(key);
  }

  async close(): Promise<void> {}
}
