import type { Account, AccountStatus, KeyIds, StoredKey } from '../domain/key-records';
import type { Authorizer, KeyIndex } from '../domain/authorization';
import type { RateLimit } from '../domain/rate-limits';

// The adapter side of storage. The pipeline sees only `KeyIndex` and
// `Authorizer` (src/domain/authorization.ts); the admin API sees
// `AdminStore`; the last-used batcher sees `LastUsedSink`. Both
// implementations (Redis, in-memory) pass the same contract tests in
// test/store/.

export interface AccountPatch {
  name?: string;
  status?: AccountStatus;
  /** null makes the account post-paid. */
  creditBalance?: number | null;
  /** null for a scope removes the override. */
  limits?: { key?: readonly RateLimit[] | null; account?: readonly RateLimit[] | null };
}

export interface KeyPatch {
  name?: string;
  /** null removes the per-key override. */
  limits?: readonly RateLimit[] | null;
  /** ISO-8601; null removes the expiry. */
  expiresAt?: string | null;
}

export interface RotateKeyRequest {
  oldKeyId: string;
  /** The replacement, already built (new id, prefix, inherited name, environment, account and limits). */
  newKeyHash: string;
  newKey: StoredKey;
  /** 0 revokes the old key at once; otherwise it keeps working until now + grace. */
  graceSeconds: number;
  nowMs: number;
}

export type RotateKeyResult =
  | { kind: 'rotated'; oldKey: StoredKey; newKey: StoredKey }
  | { kind: 'key_not_found' }
  | { kind: 'key_revoked' }
  | { kind: 'key_expired' }
  | { kind: 'key_already_rotated'; replacedBy: string };

export interface LastUse extends KeyIds {
  atMs: number;
}

export type AuditAction =
  | 'account.create'
  | 'account.update'
  | 'account.credit'
  | 'key.create'
  | 'key.update'
  | 'key.rotate'
  | 'key.revoke';

export interface AuditEntryInput {
  action: AuditAction;
  accountId: string;
  keyId?: string;
  /** Display prefix only: never the key or its hash. */
  keyPrefix?: string;
  /** Short, secret-free facts, e.g. "graceSeconds=3600" or "changes=name,limits". */
  detail?: string;
}

export interface AuditEntry extends AuditEntryInput {
  /** Opaque, ordered (the stream entry id). */
  id: string;
  /** ISO-8601. */
  time: string;
}

export type CreditResult = { kind: 'ok'; creditBalance: number } | { kind: 'account_not_found' } | { kind: 'not_prepaid' };

export interface AdminStore {
  /** False when an account with this id already exists (nothing is changed then). */
  createAccount(account: Account): Promise<boolean>;
  getAccount(accountId: string): Promise<Account | null>;
  /** Null when the account does not exist. Takes effect on the next request on every replica. */
  updateAccount(accountId: string, patch: AccountPatch): Promise<Account | null>;
  /** Adds (or with a negative amount, debits) prepaid credit atomically. */
  adjustCredit(accountId: string, amount: number): Promise<CreditResult>;
  /** Stores the key under its hash, atomically with the account's key index. */
  insertKey(keyHash: string, key: StoredKey): Promise<'created' | 'account_not_found'>;
  getKey(keyId: string): Promise<StoredKey | null>;
  /** Null when the key does not exist. */
  updateKey(keyId: string, patch: KeyPatch): Promise<StoredKey | null>;
  listAccounts(): Promise<Account[]>;
  /** Null when the account does not exist. */
  listKeys(accountId: string): Promise<StoredKey[] | null>;
  /** Atomically marks the old key (revoked now, or at the end of the grace) and stores the new one. */
  rotateKey(request: RotateKeyRequest): Promise<RotateKeyResult>;
  /** Refused from the next request on; idempotent. Null when the key does not exist. */
  revokeKey(keyId: string, nowMs: number): Promise<StoredKey | null>;
  appendAudit(entry: AuditEntryInput, nowMs: number): Promise<void>;
  /** Newest first; `before` is the id of the last entry of the previous page. */
  readAudit(options: { limit: number; before?: string }): Promise<{ entries: AuditEntry[]; next: string | null }>;
}

/** Where the last-used batcher writes: a separate, off-hot-path interface. */
export interface LastUsedSink {
  /** Keeps the later time per key; keys that no longer exist are skipped. */
  recordLastUsed(uses: readonly LastUse[]): Promise<void>;
}

export interface Store extends KeyIndex, Authorizer, AdminStore, LastUsedSink {
  /** For the start-up log line: where data lives and whether it survives a restart. */
  readonly description: string;
  /** Resolves when the backing service answers; drives health. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** Thrown by stores when the backing service is down, slow or answers garbage. */
export class StoreUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StoreUnavailableError';
  }
}
