import { systemClock, type Clock } from '../domain/clock';
import { authorizeAccountState } from '../limits/authorize-account-state';
import type { AccountPatch, AuditEntry, AuditEntryInput, CreditResult, KeyPatch, LastUse, RotateKeyRequest, RotateKeyResult, Store } from './store';
import type { Account, KeyIds, StoredKey } from '../domain/key-records';
import type { AuthorizeOutcome, AuthorizeRequest } from '../domain/authorization';

const AUDIT_MAX_ENTRIES = 10_000;

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
  private readonly audit: AuditEntry[] = [];
  private auditSequence = 0;

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
    if (patch.expiresAt === null) delete key.expiresAt;
    else if (patch.expiresAt !== undefined) key.expiresAt = patch.expiresAt;
    return structuredClone(key);
  }

  async listAccounts(): Promise<Account[]> {
    return [...this.accounts.values()].sort((a, b) => a.id.localeCompare(b.id)).map((account) => structuredClone(account));
  }

  async listKeys(accountId: string): Promise<StoredKey[] | null> {
    if (!this.accounts.has(accountId)) return null;
    return [...this.keys.values()]
      .filter((key) => key.accountId === accountId)
      .sort((a, b) => b.createdAt.localeCompare(a.createdAt) || a.id.localeCompare(b.id))
      .map((key) => structuredClone(key));
  }

  async rotateKey(request: RotateKeyRequest): Promise<RotateKeyResult> {
    const old = this.keys.get(request.oldKeyId);
    if (!old || old.accountId !== request.newKey.accountId) return { kind: 'key_not_found' };
    const { nowMs } = request;
    if (old.status === 'revoked' || (old.revokeAt !== undefined && Date.parse(old.revokeAt) <= nowMs)) return { kind: 'key_revoked' };
    if (old.replacedBy !== undefined) return { kind: 'key_already_rotated', replacedBy: old.replacedBy };
    if (old.expiresAt !== undefined && Date.parse(old.expiresAt) <= nowMs) return { kind: 'key_expired' };
    if (request.graceSeconds === 0) {
      old.status = 'revoked';
      old.revokedAt = new Date(nowMs).toISOString();
    } else {
      old.revokeAt = new Date(nowMs + request.graceSeconds * 1000).toISOString();
    }
    old.replacedBy = request.newKey.id;
    this.keys.set(request.newKey.id, structuredClone(request.newKey));
    this.idsByHash.set(request.newKeyHash, { keyId: request.newKey.id, accountId: request.newKey.accountId });
    return { kind: 'rotated', oldKey: structuredClone(old), newKey: structuredClone(request.newKey) };
  }

  async revokeKey(keyId: string, nowMs: number): Promise<StoredKey | null> {
    const key = this.keys.get(keyId);
    if (!key) return null;
    key.status = 'revoked';
    key.revokedAt ??= new Date(nowMs).toISOString();
    return structuredClone(key);
  }

  async recordLastUsed(uses: readonly LastUse[]): Promise<void> {
    for (const use of uses) {
      const key = this.keys.get(use.keyId);
      if (!key || key.accountId !== use.accountId) continue;
      if (key.lastUsedAt === undefined || Date.parse(key.lastUsedAt) < use.atMs) key.lastUsedAt = new Date(use.atMs).toISOString();
    }
  }

  async appendAudit(entry: AuditEntryInput, nowMs: number): Promise<void> {
    this.auditSequence += 1;
    this.audit.push({ id: `${nowMs}-${this.auditSequence}`, time: new Date(nowMs).toISOString(), ...structuredClone(entry) });
    if (this.audit.length > AUDIT_MAX_ENTRIES) this.audit.shift();
  }

  async readAudit(options: { limit: number; before?: string }): Promise<{ entries: AuditEntry[]; next: string | null }> {
    const newestFirst = [...this.audit].reverse();
    const start = options.before === undefined ? 0 : newestFirst.findIndex((entry) => entry.id === options.before) + 1;
    const entries = start === 0 && options.before !== undefined ? [] : newestFirst.slice(start, start + options.limit);
    return { entries: structuredClone(entries), next: entries.length === options.limit ? (entries.at(-1)?.id ?? null) : null };
  }

  async ping(): Promise<void> {}

  async close(): Promise<void> {}
}
