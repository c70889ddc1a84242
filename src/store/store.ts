import type { KeyEnvironment } from '../keys/customer-key';

/**
 * Narrow storage interfaces. The pipeline sees only `KeyLookup`; the admin
 * API sees `AdminStore`. Both implementations (Redis, in-memory) pass the
 * same contract tests in test/store/.
 */
export type KeyStatus = 'active' | 'revoked';

export interface StoredKey {
  id: string;
  accountId: string;
  /** Display prefix: the only part of the key that is ever shown or logged. */
  prefix: string;
  name: string;
  environment: KeyEnvironment;
  status: KeyStatus;
  /** ISO-8601. */
  createdAt: string;
  /** ISO-8601; absent means the key does not expire. */
  expiresAt?: string;
}

export type AccountStatus = 'active' | 'suspended';

export interface Account {
  id: string;
  name: string;
  status: AccountStatus;
  createdAt: string;
}

export interface KeyLookup {
  /** One round trip; null when no key has this hash. Rejects when the store cannot answer. */
  findKeyByHash(keyHash: string): Promise<StoredKey | null>;
}

export interface AdminStore {
  /** False when an account with this id already exists (nothing is changed then). */
  createAccount(account: Account): Promise<boolean>;
  getAccount(accountId: string): Promise<Account | null>;
  /** Stores the key under its hash, atomically with the account's key index. */
  insertKey(keyHash: string, key: StoredKey): Promise<'created' | 'account_not_found'>;
}

export interface Store extends KeyLookup, AdminStore {
  /** For the start-up log line: where data lives and whether it survives a restart. */
  readonly description: string;
  close(): Promise<void>;
}

/** Thrown by stores when the backing service is down, slow or answers garbage. */
export class StoreUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StoreUnavailableError';
  }
}
