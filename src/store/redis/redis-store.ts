import type { RedisTopology } from '../../settings/settings';
import type { AuthorizeOutcome, AuthorizeRequest } from '../../domain/authorization';
import type { Account, KeyIds, StoredKey } from '../../domain/key-records';
import {
  StoreUnavailableError,
  type AccountPatch,
  type AuditEntry,
  type AuditEntryInput,
  type CreditResult,
  type KeyPatch,
  type LastUse,
  type RotateKeyRequest,
  type RotateKeyResult,
  type Store,
} from '../store';
import { accountToFields, fieldsOf, keyToFields, parseAccount, parseKey } from './redis-records';
import { withinDeadline } from './deadline';
import { redisKeys } from './redis-keys';
import { closeClient, describeTopology, openClient, writesBatchedPerTurn, type ScriptedRedis } from './redis-client';
import { REDIS_SCRIPTS as scripts } from './scripts';

/** Audit entries kept (approximately): old ones are trimmed as new ones arrive. */
const AUDIT_MAX_ENTRIES = 100_000;

export interface RedisStoreOptions {
  /** Standalone Redis; or give `topology` for Sentinel or Cluster. */
  url?: string;
  topology?: RedisTopology;
  /** Per-command deadline; far below Envoy's ext_authz timeout so we answer in time. */
  commandTimeoutMs: number;
  /**
   * Tests only: decide with this clock (ms) instead of Redis's own TIME.
   * In production every replica uses Redis's clock, so skewed hosts agree.
   */
  clockOverride?: () => number;
  /** Deadline for admin calls and last-used batches (default 2 s). */
  adminCommandTimeoutMs?: number;
}

const DEFAULT_ADMIN_TIMEOUT_MS = 2000;

/**
 * Two connections: Checks run on one with the tight deadline Envoy's timeout
 * needs; admin calls and last-used batches run on another with a looser one,
 * so a busy moment neither fails an operator's change nor queues behind the
 * hot path.
 */
export class RedisStore implements Store {
  readonly description: string;

  /** Called before each Check command, so that a turn's Check commands leave in one write. */
  private readonly batchWrites: () => void;

  private constructor(
    private readonly checks: ScriptedRedis,
    private readonly redis: ScriptedRedis,
    where: string,
    private readonly clockOverride: (() => number) | undefined,
    private readonly checkDeadlineMs: number,
  ) {
    this.description = where;
    this.batchWrites = writesBatchedPerTurn(checks);
  }

  /** Connects and waits until Redis answers, so start-up fails loudly on a bad URL. */
  static async connect(options: RedisStoreOptions): Promise<RedisStore> {
    const topology: RedisTopology | undefined = options.topology ?? (options.url ? { mode: 'standalone', url: options.url } : undefined);
    if (!topology) throw new StoreUnavailableError('no Redis given: set a URL or a topology');
    const where = describeTopology(topology);
    // The Check connection keeps its deadline itself (withinDeadline), so a
    // reply that arrived during a busy moment is never counted as a timeout.
    const checks = openClient(topology, undefined);
    const admin = openClient(topology, options.adminCommandTimeoutMs ?? DEFAULT_ADMIN_TIMEOUT_MS);
    try {
      await Promise.all([checks.connect(), admin.connect()]);
      await Promise.all([checks.ping(), admin.ping()]);
    } catch (error) {
      checks.disconnect();
      admin.disconnect();
      throw new StoreUnavailableError(`cannot reach ${where}: ${messageOf(error)}`, { cause: error });
    }
    return new RedisStore(checks, admin, where, options.clockOverride, options.commandTimeoutMs);
  }

  async resolveKeyHash(keyHash: string): Promise<KeyIds | null> {
    this.batchWrites();
    const value = await this.call(() => withinDeadline(this.checks.get(redisKeys.keyIdsByHash(keyHash)), this.checkDeadlineMs));
    if (value === null) return null;
    const [keyId, accountId] = value.split(' ');
    if (!keyId || !accountId) throw new StoreUnavailableError('corrupt key index entry');
    return { keyId, accountId };
  }

  async authorize(request: AuthorizeRequest): Promise<AuthorizeOutcome> {
    this.batchWrites();
    const reply = await this.call(() =>
      withinDeadline(
        this.checks.gwaAuthorize(
          redisKeys.account(request.accountId),
          redisKeys.key(request.accountId, request.keyId),
          planJson(request.defaultPlan),
          this.clockOverride ? String(Math.round(this.clockOverride() * 1000)) : '',
          redisKeys.keyBucketPrefix(request.accountId, request.keyId),
          redisKeys.accountBucketPrefix(request.accountId),
        ),
        this.checkDeadlineMs,
      ),
    );
    return scripts.gwaAuthorize.parseReply(reply);
  }

  async createAccount(account: Account): Promise<boolean> {
    const reply = await this.call(() => this.redis.gwaCreateAccount(redisKeys.account(account.id), ...accountToFields(account)));
    const created = scripts.gwaCreateAccount.parseReply(reply);
    // The listing index is global (another cluster slot), so it follows the record.
    if (created) await this.call(() => this.redis.sadd(redisKeys.accounts(), account.id));
    return created;
  }

  async listAccounts(): Promise<Account[]> {
    const ids = (await this.call(() => this.redis.smembers(redisKeys.accounts()))).sort();
    const accounts = await Promise.all(ids.map((id) => this.getAccount(id)));
    return accounts.filter((account): account is Account => account !== null);
  }

  async listKeys(accountId: string): Promise<StoredKey[] | null> {
    if ((await this.getAccount(accountId)) === null) return null;
    const keyIds = await this.call(() => this.redis.smembers(redisKeys.accountKeys(accountId)));
    const records = await this.call(() => Promise.all(keyIds.map((keyId) => this.redis.hgetall(redisKeys.key(accountId, keyId)))));
    return records
      .filter((fields) => Object.keys(fields).length > 0)
      .map(parseKey)
      .sort((a, b) => b.createdAt.localeCompare(a.createdAt) || a.id.localeCompare(b.id));
  }

  async rotateKey(request: RotateKeyRequest): Promise<RotateKeyResult> {
    const accountId = await this.call(() => this.redis.get(redisKeys.accountIdByKeyId(request.oldKeyId)));
    if (accountId === null || accountId !== request.newKey.accountId) return { kind: 'key_not_found' };
    const graceMs = request.graceSeconds * 1000;
    const reply = await this.call(() =>
      this.redis.gwaRotateKey(
        redisKeys.key(accountId, request.oldKeyId),
        redisKeys.key(accountId, request.newKey.id),
        redisKeys.accountKeys(accountId),
        String(request.nowMs),
        new Date(request.nowMs).toISOString(),
        String(graceMs),
        new Date(request.nowMs + graceMs).toISOString(),
        request.newKey.id,
        ...keyToFields(request.newKey),
      ),
    );
    const result = scripts.gwaRotateKey.parseReply(reply);
    if (result.kind !== 'rotated') return result;
    await this.writeKeyIndexes(request.newKeyHash, request.newKey);
    const [oldKey, newKey] = await Promise.all([this.getKey(request.oldKeyId), this.getKey(request.newKey.id)]);
    if (!oldKey || !newKey) throw new StoreUnavailableError('rotated keys vanished');
    return { kind: 'rotated', oldKey, newKey };
  }

  async revokeKey(keyId: string, nowMs: number): Promise<StoredKey | null> {
    const accountId = await this.call(() => this.redis.get(redisKeys.accountIdByKeyId(keyId)));
    if (accountId === null) return null;
    const reply = await this.call(() => this.redis.gwaRevokeKey(redisKeys.key(accountId, keyId), new Date(nowMs).toISOString()));
    return scripts.gwaRevokeKey.parseReply(reply);
  }

  async recordLastUsed(uses: readonly LastUse[]): Promise<void> {
    if (uses.length === 0) return;
    // One pipelined batch, off the hot path.
    await this.call(() =>
      Promise.all(
        uses.map((use) =>
          this.redis.gwaRecordLastUsed(redisKeys.key(use.accountId, use.keyId), String(use.atMs), new Date(use.atMs).toISOString()),
        ),
      ),
    );
  }

  async appendAudit(entry: AuditEntryInput, nowMs: number): Promise<void> {
    const fields = Object.entries({ time: new Date(nowMs).toISOString(), ...entry }).flatMap(([name, value]) =>
      value === undefined ? [] : [name, String(value)],
    );
    await this.call(() => this.redis.xadd(redisKeys.audit(), 'MAXLEN', '~', String(AUDIT_MAX_ENTRIES), '*', ...fields));
  }

  async readAudit(options: { limit: number; before?: string }): Promise<{ entries: AuditEntry[]; next: string | null }> {
    const end = options.before ? `(${options.before}` : '+';
    const rows = await this.call(() => this.redis.xrevrange(redisKeys.audit(), end, '-', 'COUNT', options.limit));
    const entries = rows.map(([id, flat]) => {
      const fields = fieldsOf(flat);
      const entry: AuditEntry = {
        id,
        time: fields.time ?? '',
        action: fields.action as AuditEntry['action'],
        accountId: fields.accountId ?? '',
      };
      if (fields.keyId) entry.keyId = fields.keyId;
      if (fields.keyPrefix) entry.keyPrefix = fields.keyPrefix;
      if (fields.detail) entry.detail = fields.detail;
      return entry;
    });
    return { entries, next: entries.length === options.limit ? (entries.at(-1)?.id ?? null) : null };
  }

  async getAccount(accountId: string): Promise<Account | null> {
    const fields = await this.call(() => this.redis.hgetall(redisKeys.account(accountId)));
    return Object.keys(fields).length === 0 ? null : parseAccount(fields);
  }

  async updateAccount(accountId: string, patch: AccountPatch): Promise<Account | null> {
    const reply = await this.call(() =>
      this.redis.gwaUpdateAccount(
        redisKeys.account(accountId),
        JSON.stringify({
          ...patch,
          // Sent as text: Lua would print a large number as 1e+15.
          ...(typeof patch.creditBalance === 'number' ? { creditBalance: String(patch.creditBalance) } : {}),
        }),
      ),
    );
    return scripts.gwaUpdateAccount.parseReply(reply);
  }

  async adjustCredit(accountId: string, amount: number): Promise<CreditResult> {
    const reply = await this.call(() => this.redis.gwaAdjustCredit(redisKeys.account(accountId), String(amount)));
    return scripts.gwaAdjustCredit.parseReply(reply);
  }

  async insertKey(keyHash: string, key: StoredKey): Promise<'created' | 'account_not_found'> {
    const reply = await this.call(() =>
      this.redis.gwaInsertKey(
        redisKeys.account(key.accountId),
        redisKeys.key(key.accountId, key.id),
        redisKeys.accountKeys(key.accountId),
        key.id,
        ...keyToFields(key),
      ),
    );
    if (scripts.gwaInsertKey.parseReply(reply) === 'account_not_found') return 'account_not_found';
    await this.writeKeyIndexes(keyHash, key);
    return 'created';
  }

  /**
   * The global indexes live outside the account's slot, so they are written
   * after the record: a crash in between leaves an unusable key, never a
   * usable one without a record.
   */
  private async writeKeyIndexes(keyHash: string, key: StoredKey): Promise<void> {
    await this.call(() =>
      Promise.all([
        this.redis.set(redisKeys.keyIdsByHash(keyHash), `${key.id} ${key.accountId}`),
        this.redis.set(redisKeys.accountIdByKeyId(key.id), key.accountId),
      ]),
    );
  }

  async getKey(keyId: string): Promise<StoredKey | null> {
    const accountId = await this.call(() => this.redis.get(redisKeys.accountIdByKeyId(keyId)));
    if (accountId === null) return null;
    const fields = await this.call(() => this.redis.hgetall(redisKeys.key(accountId, keyId)));
    return Object.keys(fields).length === 0 ? null : parseKey(fields);
  }

  async updateKey(keyId: string, patch: KeyPatch): Promise<StoredKey | null> {
    const accountId = await this.call(() => this.redis.get(redisKeys.accountIdByKeyId(keyId)));
    if (accountId === null) return null;
    const reply = await this.call(() =>
      this.redis.gwaUpdateKey(
        redisKeys.key(accountId, keyId),
        JSON.stringify({
          ...patch,
          // Pre-encoded: Lua's cjson would turn an empty list into {}.
          ...(Array.isArray(patch.limits) ? { limitsJson: JSON.stringify(patch.limits) } : {}),
          ...(typeof patch.expiresAt === 'string' ? { expiresAtMs: String(Date.parse(patch.expiresAt)) } : {}),
        }),
      ),
    );
    return scripts.gwaUpdateKey.parseReply(reply);
  }

  async ping(): Promise<void> {
    // On the Check connection: health is about whether Checks can be answered.
    await this.call(() => withinDeadline(this.checks.ping(), this.checkDeadlineMs * 10));
  }

  async close(): Promise<void> {
    await Promise.all([closeClient(this.checks), closeClient(this.redis)]);
  }

  private async call<T>(command: () => Promise<T>): Promise<T> {
    try {
      return await command();
    } catch (error) {
      if (error instanceof StoreUnavailableError) throw error;
      throw new StoreUnavailableError(`Redis command failed: ${messageOf(error)}`, { cause: error });
    }
  }
}

/** The default plan is the frozen settings object, the same on every Check: encode it once. */
const encodedPlans = new WeakMap<object, string>();
function planJson(plan: AuthorizeRequest['defaultPlan']): string {
  if (!Object.isFrozen(plan)) return JSON.stringify(plan);
  let json = encodedPlans.get(plan);
  if (json === undefined) {
    json = JSON.stringify(plan);
    encodedPlans.set(plan, json);
  }
  return json;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
