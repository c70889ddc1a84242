import Redis from 'ioredis';
import { KEY_ENVIRONMENTS, type KeyEnvironment } from '../keys/customer-key';
import { StoreUnavailableError, type Account, type AccountStatus, type KeyStatus, type Store, type StoredKey } from './store';

/** Every Redis key this service writes, in one place. */
export const redisKeys = {
  keyByHash: (keyHash: string) => `gwa:key:${keyHash}`,
  keyHashById: (keyId: string) => `gwa:keyid:${keyId}`,
  account: (accountId: string) => `gwa:account:${accountId}`,
  accountKeys: (accountId: string) => `gwa:account:${accountId}:keys`,
};

// Create-if-absent in one step so two admins racing on the same id cannot
// overwrite each other.
const CREATE_ACCOUNT_LUA = `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV))
return 1`;

// The key record, its id index and the account's key set change together or
// not at all, and only for an account that exists.
const INSERT_KEY_LUA = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 'account_not_found' end
redis.call('HSET', KEYS[2], unpack(ARGV, 3))
redis.call('SET', KEYS[3], ARGV[1])
redis.call('SADD', KEYS[4], ARGV[2])
return 'created'`;

interface ScriptedRedis extends Redis {
  gwaCreateAccount(account: string, ...fields: string[]): Promise<number>;
  gwaInsertKey(account: string, keyRecord: string, keyIdIndex: string, accountKeys: string, ...args: string[]): Promise<string>;
}

export interface RedisStoreOptions {
  url: string;
  /** Per-command deadline; far below Envoy's ext_authz timeout so we answer in time. */
  commandTimeoutMs: number;
}

export class RedisStore implements Store {
  readonly description: string;
  private readonly redis: ScriptedRedis;

  private constructor(redis: ScriptedRedis, url: string) {
    this.redis = redis;
    this.description = `Redis at ${redactUrl(url)}`;
  }

  /** Connects and waits until Redis answers, so start-up fails loudly on a bad URL. */
  static async connect(options: RedisStoreOptions): Promise<RedisStore> {
    const redis = new Redis(options.url, {
      lazyConnect: true,
      commandTimeout: options.commandTimeoutMs,
      // Fail fast instead of queueing while disconnected: a queued Check
      // would outlive Envoy's deadline anyway.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      connectTimeout: 2000,
      // After a failed connect, ioredis otherwise keeps a 2 s timer alive on close.
      disconnectTimeout: 100,
      retryStrategy: (attempt) => Math.min(50 * attempt, 1000),
    }) as ScriptedRedis;
    redis.defineCommand('gwaCreateAccount', { numberOfKeys: 1, lua: CREATE_ACCOUNT_LUA });
    redis.defineCommand('gwaInsertKey', { numberOfKeys: 4, lua: INSERT_KEY_LUA });
    // Errors surface per command; without a listener ioredis would print them.
    redis.on('error', () => undefined);
    try {
      await redis.connect();
      await redis.ping();
    } catch (error) {
      redis.disconnect();
      throw new StoreUnavailableError(`cannot reach Redis at ${redactUrl(options.url)}: ${messageOf(error)}`, { cause: error });
    }
    return new RedisStore(redis, options.url);
  }

  async findKeyByHash(keyHash: string): Promise<StoredKey | null> {
    const fields = await this.call(() => this.redis.hgetall(redisKeys.keyByHash(keyHash)));
    if (Object.keys(fields).length === 0) return null;
    return parseStoredKey(fields);
  }

  async createAccount(account: Account): Promise<boolean> {
    const created = await this.call(() =>
      this.redis.gwaCreateAccount(redisKeys.account(account.id), ...flatten(account)),
    );
    return created === 1;
  }

  async getAccount(accountId: string): Promise<Account | null> {
    const fields = await this.call(() => this.redis.hgetall(redisKeys.account(accountId)));
    if (Object.keys(fields).length === 0) return null;
    return parseAccount(fields);
  }

  async insertKey(keyHash: string, key: StoredKey): Promise<'created' | 'account_not_found'> {
    const result = await this.call(() =>
      this.redis.gwaInsertKey(
        redisKeys.account(key.accountId),
        redisKeys.keyByHash(keyHash),
        redisKeys.keyHashById(key.id),
        redisKeys.accountKeys(key.accountId),
        keyHash,
        key.id,
        ...flatten(key),
      ),
    );
    if (result !== 'created' && result !== 'account_not_found') {
      throw new StoreUnavailableError(`unexpected reply from Redis: ${String(result)}`);
    }
    return result;
  }

  async close(): Promise<void> {
    try {
      await this.redis.quit();
    } catch {
      this.redis.disconnect();
    }
  }

  private async call<T>(command: () => Promise<T>): Promise<T> {
    try {
      return await command();
    } catch (error) {
      throw new StoreUnavailableError(`Redis command failed: ${messageOf(error)}`, { cause: error });
    }
  }
}

function flatten(record: object): string[] {
  return Object.entries(record).flatMap(([field, value]) => (value === undefined ? [] : [field, String(value)]));
}

function required(fields: Record<string, string>, name: string, what: string): string {
  const value = fields[name];
  if (value === undefined || value === '') throw new StoreUnavailableError(`corrupt ${what} record: no ${name}`);
  return value;
}

function parseStoredKey(fields: Record<string, string>): StoredKey {
  const environment = required(fields, 'environment', 'key');
  const status = required(fields, 'status', 'key');
  if (!KEY_ENVIRONMENTS.includes(environment as KeyEnvironment) || !['active', 'revoked'].includes(status)) {
    throw new StoreUnavailableError('corrupt key record: bad environment or status');
  }
  const key: StoredKey = {
    id: required(fields, 'id', 'key'),
    accountId: required(fields, 'accountId', 'key'),
    prefix: required(fields, 'prefix', 'key'),
    name: fields.name ?? '',
    environment: environment as KeyEnvironment,
    status: status as KeyStatus,
    createdAt: required(fields, 'createdAt', 'key'),
  };
  if (fields.expiresAt) key.expiresAt = fields.expiresAt;
  return key;
}

function parseAccount(fields: Record<string, string>): Account {
  return {
    id: required(fields, 'id', 'account'),
    name: fields.name ?? '',
    status: (fields.status ?? 'active') as AccountStatus,
    createdAt: required(fields, 'createdAt', 'account'),
  };
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Redis URLs may carry a password; never print it. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(unparseable URL)';
  }
}
