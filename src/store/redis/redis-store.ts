import { randomUUID } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import type { RedisTopology, UsageDurability } from '../../platform/settings';
import type { AuthorizeOutcome, AuthorizeRequest, CarriesDecisionClock, CheckPathTimer, TimesCheckPath } from '../../check/ports';
import type { Account, KeyIds, StoredKey } from '../../keys/key-records';
import { DEFAULT_MAX_ACTIVE_KEYS } from '../../keys/active-key-cap';
import { CREDIT_LIMIT_MINOR_UNITS } from '../../accounts/credit';
import { OPERATOR, type CustomerIdentity, type MemberRole, type Membership } from '../../accounts/customer-identity';
import { MAX_MEMBERS_PER_ACCOUNT, normalizeEmail, principalKey, type Member, type MemberPrincipal } from '../../accounts/members';
import { compareCodeUnits } from '../ordering';
import type { TokenBudget, TokenBudgetPlan, TokenBudgetState } from '../../accounts/limits/token-budgets';
import type { LimitScope } from '../../accounts/limits/rate-limits';
import { totalTokens } from '../../metering/usage';
import { bucketExpiresAtMs, periodMs, periodName, periodStart, usageMonthOf, type UsageGranularity } from '../../metering/usage-periods';
import type { UsageApplyOutcome, UsageRecord } from '../../metering/usage-record';
import { effectiveTokenBudgets, tokenBudgetState } from '../../accounts/limits/token-budget';
import { COUNTED_BATCH_MEMORY_MS, DAILY_RETENTION_MS, dayStartOf, HOURLY_RETENTION_MS } from '../../keys/request-counts';
import {
  USAGE_MARKER_TTL_MS,
  CREDIT_IDEMPOTENCY_TTL_MS,
  CorruptRecordError,
  StoreOutcomeUnknownError,
  StoreUnavailableError,
  type AccountListing,
  type AccountPatch,
  type AddMemberResult,
  type AccountAuditQuery,
  type AuditEntry,
  type AuditEntryInput,
  type AuditPage,
  type AuditQuery,
  type AuditTrailEntry,
  type OperatorAuditEntry,
  type OperatorAuditEntryInput,
  type CreditResult,
  type InsertKeyResult,
  type InvitationBinding,
  type KeyPatch,
  type CountedBatch,
  type LastUse,
  type RequestCountsByKey,
  type MemberChangeResult,
  type RotateKeyRequest,
  type RotateKeyResult,
  type Store,
  type UnreadableRecord,
  type UsageBucket,
  type UsageQuery,
  type UsageStreamEntry,
} from '../../ports/store';
import {
  accountToFields,
  actorToText,
  fieldsOf,
  keyToFields,
  memberToJson,
  parseAccount,
  parseActor,
  parseKey,
  parseMember,
  parsePackedTokenBuckets,
  restrictionsFields,
} from './redis-records';
import type { CheckChannel } from './check-connection';
import { usageAggregateIncrements, usageBucketOf } from '../usage-aggregates';
import { DEFAULT_USAGE_STREAM_MAX_LENGTH } from '../../platform/settings';
import { usageStreamFields } from '../usage-stream-fields';
import { redisKeys } from './redis-keys';
import { BinaryArgument, type ScriptArgument } from './resp';
import { RedisClock } from './redis-clock';
import { closeClient, describeTopology, openCheckChannel, openClient, type ScriptedRedis } from './redis-client';
import { ACTIVE_KEYS_NOT_INDEXED, REDIS_SCRIPTS as scripts, parseAuthorizeReply } from './scripts';
import { AUTHORIZE_SCRIPT, authorizePlanArgument } from './authorize-plan';
import type { RestrictionsSent } from '../../check/ports';
import { formatPlacedHold, holdSlotAt, type CreditHold, type PlacedHold } from '../../accounts/credit-holds';
import type { OutboxEvent } from '../../ports/webhook-store';
import { eventsJson, RedisWebhookStore } from './redis-webhook-store';

/** Audit entries kept (approximately): old ones are trimmed as new ones arrive. */
const AUDIT_MAX_ENTRIES = 100_000;
/** Entries kept (approximately) in each account's own trail. */
const ACCOUNT_AUDIT_MAX_ENTRIES = 10_000;
/** Key records per script when an account's active keys are first indexed: a few ms of Redis time each, so Checks never wait long. */
const INDEX_BATCH_KEYS = 500;

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
  /** Tests only: the local monotonic clock (ms) on which Redis's clock is carried between samples (RedisClock). */
  localClockMs?: () => number;
  /** Tests only: between samples of Redis's clock (default 1 s). */
  clockSampleIntervalMs?: number;
  /** Deadline for admin calls, last-used batches and usage records (default 2 s). */
  adminCommandTimeoutMs?: number;
  /** The active-key cap of accounts without their own (default DEFAULT_MAX_ACTIVE_KEYS). */
  defaultMaxActiveKeys?: number;
  /** Entries the usage stream keeps, approximately (USAGE_STREAM_MAX_LEN). */
  usageStreamMaxLength?: number;
  /** When an applied usage record is durable enough to leave the buffer (USAGE_DURABILITY; default acknowledged). */
  usageDurability?: UsageDurability;
}

const DEFAULT_ADMIN_TIMEOUT_MS = 2000;

/** A write whose reply was lost is sent at most this many times in all (see callUntilAnswered). */
const LOST_REPLY_MAX_ATTEMPTS = 6;
/** Pause before the first repeat, doubled before each next one: long enough for ioredis to reconnect (50 ms). */
const LOST_REPLY_FIRST_PAUSE_MS = 50;

/**
 * Two connections: Checks run on one with the tight deadline Envoy's timeout
 * needs (the pipelined Check channel, check-connection.ts); admin calls and
 * last-used batches run on another (ioredis) with a looser one, so a busy
 * moment neither fails an operator's change nor queues behind the hot path.
 */
export class RedisStore implements Store, TimesCheckPath, CarriesDecisionClock {
  readonly description: string;

  /** Told when the hold of a Check allowed after its deadline cannot be let go (ReleasesLateHolds). */
  private onLateReleaseFailed: (error: unknown) => void = () => undefined;

  private constructor(
    private readonly checks: CheckChannel,
    private readonly redis: ScriptedRedis,
    where: string,
    /** On a Cluster a script's keys must share a slot. */
    private readonly slotted: boolean,
    private readonly clockOverride: (() => number) | undefined,
    /** What Checks decide on: Redis's clock as this replica carries it, or the tests' override. */
    private readonly decisionClock: DecisionClock,
    private readonly checkDeadlineMs: number,
    private readonly adminDeadlineMs: number,
    private readonly defaultMaxActiveKeys: number,
    private readonly usageStreamMaxLength: number,
    /** Usage records go on this connection, and so does the WAIT (or WAITAOF) that must follow them on it. */
    private readonly usage: UsageConnection,
    private readonly usageDurability: UsageDurability,
  ) {
    this.description = where;
    this.streamsOnApply = !slotted;
    this.webhooks = new RedisWebhookStore(redis, (command) => this.call(command));
  }

  readonly webhooks: RedisWebhookStore;

  /** Not on a Cluster: there the one usage stream cannot share a script's slot with every account. */
  readonly streamsOnApply: boolean;

  /** Connects and waits until Redis answers, so start-up fails loudly on a bad URL. */
  static async connect(options: RedisStoreOptions): Promise<RedisStore> {
    const topology: RedisTopology | undefined = options.topology ?? (options.url ? { mode: 'standalone', url: options.url } : undefined);
    if (!topology) throw new StoreUnavailableError('no Redis given: set a URL or a topology');
    const where = describeTopology(topology);
    const adminDeadlineMs = options.adminCommandTimeoutMs ?? DEFAULT_ADMIN_TIMEOUT_MS;
    const admin = openClient(topology, adminDeadlineMs);
    const usageDurability = options.usageDurability ?? { mode: 'acknowledged' };
    // A WAIT blocks its connection for up to its timeout: on a connection of their own, usage records hold up no admin call.
    const waits = usageDurability.mode === 'wait-replicas' || usageDurability.mode === 'waitaof';
    const usage = new UsageConnection(waits ? openClient(topology, adminDeadlineMs) : admin);
    let checks: CheckChannel | undefined;
    let decisionClock: DecisionClock;
    try {
      await admin.connect();
      await admin.ping();
      if (usage.redis !== admin) await usage.redis.connect();
      checks = await openCheckChannel(topology, admin, options.commandTimeoutMs);
      await checks.ping(options.commandTimeoutMs * 10);
      decisionClock = await startDecisionClock(options, admin);
    } catch (error) {
      admin.disconnect();
      usage.redis.disconnect();
      await checks?.close();
      throw new StoreUnavailableError(`cannot reach ${where}: ${messageOf(error)}`, { cause: error });
    }
    const refusal = await usageDurabilityRefusal(usageDurability, topology, admin, usage.redis, where);
    if (refusal !== undefined) {
      decisionClock.stop();
      admin.disconnect();
      usage.redis.disconnect();
      await checks.close();
      throw new StoreUnavailableError(refusal);
    }
    return new RedisStore(
      checks,
      admin,
      where,
      topology.mode === 'cluster',
      options.clockOverride,
      decisionClock,
      options.commandTimeoutMs,
      adminDeadlineMs,
      options.defaultMaxActiveKeys ?? DEFAULT_MAX_ACTIVE_KEYS,
      options.usageStreamMaxLength ?? DEFAULT_USAGE_STREAM_MAX_LENGTH,
      usage,
      usageDurability,
    );
  }

  reportLateHoldReleaseFailuresTo(report: (error: unknown) => void): void {
    this.onLateReleaseFailed = report;
  }

  timeCheckPathWith(timer: CheckPathTimer): void {
    this.checks.timeWith(timer);
  }

  decisionClockUncertaintyUs(): number | undefined {
    return this.decisionClock.uncertaintyUs();
  }

  resolveKeyHash(keyHash: string): Promise<KeyIds | null> {
    return this.checks.get(redisKeys.keyIdsByHash(keyHash), parseKeyIndexEntry, 'resolve_key');
  }

  authorize(request: AuthorizeRequest): Promise<AuthorizeOutcome> {
    const { accountId, keyId, hold } = request;
    // The key id; the script names the key's fields from it. Then the decision time on Redis's clock and the hold,
    // and the plan.
    const nowUs = this.decisionClock.nowUs();
    const slot = holdSlotAt(nowUs);
    const keyTimeAndPlan = [
      keyId,
      timeAndHoldArgument(nowUs, hold, slot),
      authorizePlanArgument(request.defaultPlan, request.defaultTokenBudgets),
    ];
    const keys = [redisKeys.account(accountId), redisKeys.key(accountId, keyId)];
    const args = authorizeArguments(keyTimeAndPlan, request.restrictions);
    if (hold === undefined) return this.checks.script(AUTHORIZE_SCRIPT, keys, args, parseAuthorizeReply, 'authorize');
    // A Check failed at its deadline whose script ran all the same and held: its hold is let go (the Check was refused).
    const late = (outcome: AuthorizeOutcome) => {
      if (outcome.kind === 'allow' && outcome.held) {
        this.releaseHold(accountId, keyId, hold.requestId, outcome.held, `late-${randomUUID()}`).catch((error: unknown) =>
          this.onLateReleaseFailed(error),
        );
      }
    };
    return this.checks.script(AUTHORIZE_SCRIPT, keys, args, (reply) => parseAuthorizeReply(reply, hold, slot), 'authorize', late);
  }

  async createAccount(account: Account): Promise<boolean> {
    // A new account has no keys: its (empty) active-keys set is complete from the start.
    const fields = [...accountToFields(account), redisKeys.activeKeysIndexedField(), '1'];
    const reply = await this.call(() => this.redis.gwaCreateAccount(redisKeys.account(account.id), ...fields));
    const created = scripts.gwaCreateAccount.parseReply(reply);
    // The listing index is global (another cluster slot), so it follows the record.
    if (created) await this.call(() => this.redis.sadd(redisKeys.accounts(), account.id));
    return created;
  }

  async listAccounts(): Promise<AccountListing> {
    const ids = (await this.call(() => this.redis.smembers(redisKeys.accounts()))).sort(compareCodeUnits);
    const listing: AccountListing = { accounts: [], unreadable: [] };
    const read = await Promise.all(
      ids.map(async (id): Promise<Account | UnreadableRecord | null> => {
        try {
          return await this.getAccount(id);
        } catch (error) {
          // One bad record is named, never allowed to hide every other account.
          if (error instanceof CorruptRecordError) return { id, problem: error.problem };
          throw error;
        }
      }),
    );
    for (const entry of read) {
      if (entry === null) continue;
      if ('problem' in entry) listing.unreadable.push(entry);
      else listing.accounts.push(entry);
    }
    return listing;
  }

  async listKeys(accountId: string): Promise<StoredKey[] | null> {
    if ((await this.getAccount(accountId)) === null) return null;
    const keyIds = await this.call(() => this.redis.smembers(redisKeys.accountKeys(accountId)));
    const records = await this.call(() => Promise.all(keyIds.map((keyId) => this.redis.hgetall(redisKeys.key(accountId, keyId)))));
    return records
      .filter((fields) => Object.keys(fields).length > 0)
      .map(parseKey)
      .sort((a, b) => compareCodeUnits(b.createdAt, a.createdAt) || compareCodeUnits(a.id, b.id));
  }

  /**
   * The new key's indexes first, then the script that stores its record and
   * marks the old key: until the script has run the old key is untouched, so
   * any failure before it leaves the old key working and the rotation safe to
   * retry. The grace end and the expiry check use Redis's clock (TIME). A
   * lost reply is resolved by repeating the same script, which answers an
   * applied rotation as the first run did (callUntilAnswered).
   */
  async rotateKey(request: RotateKeyRequest): Promise<RotateKeyResult> {
    const accountId = await this.call(() => this.redis.get(redisKeys.accountIdByKeyId(request.oldKeyId)));
    if (accountId === null || accountId !== request.newKey.accountId) return { kind: 'key_not_found' };
    await this.writeKeyIndexes(request.newKeyHash, request.newKey);
    const result = await this.withActiveKeysIndexed(accountId, async () => {
      const reply = await this.callUntilAnswered(() =>
        this.redis.gwaRotateKey(
          redisKeys.key(accountId, request.oldKeyId),
          redisKeys.key(accountId, request.newKey.id),
          redisKeys.accountKeys(accountId),
          redisKeys.account(accountId),
          redisKeys.activeKeys(accountId),
          redisKeys.webhookOutbox(accountId),
          redisKeys.webhookEndpoints(accountId),
          this.nowMsOverride(),
          String(request.graceSeconds * 1000),
          String(this.defaultMaxActiveKeys),
          redisKeys.activeKeysIndexedField(),
          request.newKey.id,
          eventsJson(request.events),
          ...keyToFields(request.newKey),
        ),
      );
      return scripts.gwaRotateKey.parseReply(reply);
    });
    if (result.kind !== 'rotated') await this.removeUnusedKeyIndexes(request.newKeyHash, request.newKey);
    else await this.webhooks.noticeEvents(accountId, request.events);
    return result;
  }

  async revokeKey(keyId: string, nowMs: number, events?: readonly OutboxEvent[]): Promise<StoredKey | null> {
    const accountId = await this.call(() => this.redis.get(redisKeys.accountIdByKeyId(keyId)));
    if (accountId === null) return null;
    const reply = await this.call(() =>
      this.redis.gwaRevokeKey(
        redisKeys.key(accountId, keyId),
        redisKeys.activeKeys(accountId),
        redisKeys.webhookOutbox(accountId),
        redisKeys.webhookEndpoints(accountId),
        new Date(nowMs).toISOString(),
        keyId,
        eventsJson(events),
      ),
    );
    const revoked = scripts.gwaRevokeKey.parseReply(reply);
    if (revoked) await this.webhooks.noticeEvents(accountId, events);
    return revoked;
  }

  /**
   * One script per batch (off the hot path), or on a Cluster one per account
   * in it, since a script's keys must share a slot there. Each script call has
   * its own marker for the batch (named by its first account), so a batch sent
   * again, split the same way, is counted once per call.
   */
  async recordLastUsed(uses: readonly LastUse[], batch?: CountedBatch): Promise<void> {
    if (uses.length === 0) return;
    let batches: (readonly LastUse[])[] = [uses];
    if (this.slotted) {
      const byAccount = new Map<string, LastUse[]>();
      for (const use of uses) {
        const batch = byAccount.get(use.accountId);
        if (batch) batch.push(use);
        else byAccount.set(use.accountId, [use]);
      }
      batches = [...byAccount.values()];
    }
    const hourStartMs = batch?.hourStartMs ?? 0;
    const dayStartMs = dayStartOf(hourStartMs);
    const counts = batch !== undefined && uses.some((use) => (use.requests ?? 0) > 0);
    // Lifetimes relative to now (PEXPIRE), so that the tests' clock override applies to them as to everything else.
    const nowMs = this.clockOverride ? Math.round(this.clockOverride()) : Date.now();
    await this.call(() =>
      Promise.all(
        batches.map((part) =>
          this.redis.gwaRecordLastUsed(
            1 + 3 * part.length,
            redisKeys.countedBatch(part[0]!.accountId, batch?.id ?? 'none'),
            ...part.map((use) => redisKeys.key(use.accountId, use.keyId)),
            ...part.map((use) => redisKeys.requestCounts(use.accountId, 'hour', hourStartMs)),
            ...part.map((use) => redisKeys.requestCounts(use.accountId, 'day', dayStartMs)),
            String(counts ? COUNTED_BATCH_MEMORY_MS : 0),
            String(hourStartMs + HOURLY_RETENTION_MS - nowMs),
            String(dayStartMs + DAILY_RETENTION_MS - nowMs),
            ...part.flatMap((use) => [String(use.atMs), new Date(use.atMs).toISOString(), String(use.requests ?? 0), use.keyId]),
          ),
        ),
      ),
    );
  }

  async readRequestCounts(
    accountId: string,
    granularity: UsageGranularity,
    bucketStartsMs: readonly number[],
  ): Promise<RequestCountsByKey[]> {
    const hashes = await this.call(() =>
      Promise.all(bucketStartsMs.map((startMs) => this.redis.hgetall(redisKeys.requestCounts(accountId, granularity, startMs)))),
    );
    return hashes.map((hash) => {
      const counts: RequestCountsByKey = {};
      for (const [keyId, value] of Object.entries(hash)) {
        const requests = Number(value);
        if (!Number.isSafeInteger(requests) || requests < 0)
          throw new CorruptRecordError('key', `request count of ${keyId} is not a whole number`);
        counts[keyId] = requests;
      }
      return counts;
    });
  }

  /** The global trail first, then the account's own (two slots on a Cluster, so two commands, sent together). */
  async appendAudit(entry: AuditEntryInput, nowMs: number): Promise<void> {
    const fields = auditFields(entry, nowMs);
    await this.call(() =>
      Promise.all([
        this.redis.xadd(redisKeys.audit(), 'MAXLEN', '~', String(AUDIT_MAX_ENTRIES), '*', ...fields),
        this.redis.xadd(redisKeys.accountAudit(entry.accountId), 'MAXLEN', '~', String(ACCOUNT_AUDIT_MAX_ENTRIES), '*', ...fields),
      ]),
    );
  }

  /** The global trail only: it is the operator level's own trail, as an account's is its own (redisKeys.audit). */
  async appendOperatorAudit(entry: OperatorAuditEntryInput, nowMs: number): Promise<void> {
    const fields = auditFields(entry, nowMs);
    await this.call(() => this.redis.xadd(redisKeys.audit(), 'MAXLEN', '~', String(AUDIT_MAX_ENTRIES), '*', ...fields));
  }

  readAudit(options: AccountAuditQuery): Promise<AuditPage<AuditEntry>>;
  readAudit(options: AuditQuery): Promise<AuditPage<AuditTrailEntry>>;
  async readAudit(options: AuditQuery): Promise<AuditPage<AuditTrailEntry>> {
    // Nothing is older than the first possible id (and Redis refuses the exclusive range "(0-0").
    if (options.before === '0-0') return { entries: [], next: null };
    const end = options.before ? `(${options.before}` : '+';
    const stream = options.accountId === undefined ? redisKeys.audit() : redisKeys.accountAudit(options.accountId);
    const rows = await this.call(() => this.redis.xrevrange(stream, end, '-', 'COUNT', options.limit));
    const entries = rows.map(([id, flat]): AuditTrailEntry => {
      const fields = fieldsOf(flat);
      // An entry without an account is an operator-level one (every account entry has always had its account).
      if (fields.accountId === undefined && fields.operatorTokenId !== undefined) return operatorAuditEntryOf(id, fields);
      const entry: AuditEntry = {
        id,
        time: fields.time ?? '',
        action: fields.action as AuditEntry['action'],
        accountId: fields.accountId ?? '',
        // Entries from before actors were recorded came from the admin API.
        actor: fields.actor ? parseActor(fields.actor, 'account', 'audit actor') : OPERATOR,
      };
      if (fields.keyId) entry.keyId = fields.keyId;
      if (fields.keyPrefix) entry.keyPrefix = fields.keyPrefix;
      if (fields.memberId) entry.memberId = fields.memberId;
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
          ...(typeof patch.maxActiveKeys === 'number' ? { maxActiveKeys: String(patch.maxActiveKeys) } : {}),
          ...(typeof patch.monthlySpendCap === 'number' ? { monthlySpendCap: String(patch.monthlySpendCap) } : {}),
          // Pre-encoded: the text and its stamp, written together (redisKeys.restrictionsStampField).
          ...(patch.keyRestrictions ? { restrictionsFields: restrictionsFields(patch.keyRestrictions) } : {}),
        }),
      ),
    );
    return scripts.gwaUpdateAccount.parseReply(reply);
  }

  /**
   * Without an idempotency key a lost reply is not repeated: the adjustment
   * may have been applied, and applying it again would double it. With one,
   * the script is safe to repeat (the marker answers every repeat), so a lost
   * reply is resolved as in rotateKey; the call's own id tells its repeats
   * from another request with the same key.
   */
  async adjustCredit(accountId: string, amount: number, idempotencyKey?: string): Promise<CreditResult> {
    const account = redisKeys.account(accountId);
    const argv = [String(amount), String(CREDIT_LIMIT_MINOR_UNITS)] as const;
    if (idempotencyKey === undefined) {
      const reply = await this.call(() => this.redis.gwaAdjustCredit(1, account, ...argv, '', '', ''));
      return scripts.gwaAdjustCredit.parseReply(reply);
    }
    const marker = redisKeys.creditIdempotency(accountId, idempotencyKey);
    const attemptId = randomUUID();
    const reply = await this.callUntilAnswered(() =>
      this.redis.gwaAdjustCredit(2, account, marker, ...argv, this.nowMsOverride(), String(CREDIT_IDEMPOTENCY_TTL_MS), attemptId),
    );
    return scripts.gwaAdjustCredit.parseReply(reply);
  }

  async claimCreditAudit(accountId: string, idempotencyKey: string): Promise<boolean> {
    const claim = redisKeys.creditAuditClaim(accountId, idempotencyKey);
    // Not repeated on a lost reply (the repeat of a claim that landed would read as someone else's): the caller treats
    // a failed claim as its own, so an entry may be written twice, never left out.
    const reply = await this.call(() => this.redis.set(claim, '1', 'PX', CREDIT_IDEMPOTENCY_TTL_MS, 'NX'));
    return reply === 'OK';
  }

  /** Indexes first, record last: see writeKeyIndexes. A lost reply is resolved as in rotateKey. */
  async insertKey(keyHash: string, key: StoredKey, events?: readonly OutboxEvent[]): Promise<InsertKeyResult> {
    await this.writeKeyIndexes(keyHash, key);
    const { accountId } = key;
    const result = await this.withActiveKeysIndexed(accountId, async () => {
      const reply = await this.callUntilAnswered(() =>
        this.redis.gwaInsertKey(
          redisKeys.account(accountId),
          redisKeys.key(accountId, key.id),
          redisKeys.accountKeys(accountId),
          redisKeys.activeKeys(accountId),
          redisKeys.webhookOutbox(accountId),
          redisKeys.webhookEndpoints(accountId),
          this.nowMsOverride(),
          String(this.defaultMaxActiveKeys),
          redisKeys.activeKeysIndexedField(),
          key.id,
          eventsJson(events),
          ...keyToFields(key),
        ),
      );
      return scripts.gwaInsertKey.parseReply(reply);
    });
    if (result !== 'created') await this.removeUnusedKeyIndexes(keyHash, key);
    else await this.webhooks.noticeEvents(accountId, events);
    return result;
  }

  /**
   * Runs a capped write (insert, rotation); if the account's active keys
   * were never indexed (its keys predate the cap), indexes them and runs it
   * once more.
   */
  private async withActiveKeysIndexed<R>(accountId: string, write: () => Promise<R | typeof ACTIVE_KEYS_NOT_INDEXED>): Promise<R> {
    const first = await write();
    if (first !== ACTIVE_KEYS_NOT_INDEXED) return first;
    await this.indexActiveKeys(accountId);
    const second = await write();
    if (second !== ACTIVE_KEYS_NOT_INDEXED) return second;
    throw new StoreUnavailableError(`the active keys of account '${accountId}' could not be indexed; nothing was written`);
  }

  /**
   * Once per account whose keys predate the cap: its key records (listed
   * from the key set and passed in KEYS, as every key a script touches is
   * declared) go into its active keys, INDEX_BATCH_KEYS per script, and the
   * last batch marks the set complete. A key added meanwhile (by a rotation)
   * added itself.
   */
  private async indexActiveKeys(accountId: string): Promise<void> {
    const keyIds = await this.call(() => this.redis.smembers(redisKeys.accountKeys(accountId)));
    for (let start = 0; start === 0 || start < keyIds.length; start += INDEX_BATCH_KEYS) {
      const batch = keyIds.slice(start, start + INDEX_BATCH_KEYS).map((keyId) => redisKeys.key(accountId, keyId));
      const keys = [redisKeys.account(accountId), redisKeys.activeKeys(accountId), ...batch];
      const last = start + INDEX_BATCH_KEYS >= keyIds.length ? '1' : '0';
      const reply = await this.call(() => this.redis.gwaIndexActiveKeys(keys.length, ...keys, redisKeys.activeKeysIndexedField(), last));
      scripts.gwaIndexActiveKeys.parseReply(reply);
    }
  }

  /** '' means the script takes Redis TIME; tests decide on an injected clock. */
  private nowMsOverride(): string {
    return this.clockOverride ? String(Math.round(this.clockOverride())) : '';
  }

  /**
   * The principal's global index first, then the member record (as keys
   * do), then the index again: a removal that ran in between (which takes
   * the record out first, the index after) cannot leave a member without
   * its index entry. The script run twice with the same member answers
   * 'added' both times, so a lost reply is repeated.
   */
  async addMember(member: Member, events?: readonly OutboxEvent[]): Promise<AddMemberResult> {
    const index = redisKeys.principalAccounts(principalKey(member.principal));
    await this.call(() => this.redis.sadd(index, member.accountId));
    const reply = await this.callUntilAnswered(() =>
      this.redis.gwaAddMember(
        redisKeys.account(member.accountId),
        redisKeys.members(member.accountId),
        redisKeys.memberPrincipals(member.accountId),
        redisKeys.webhookOutbox(member.accountId),
        redisKeys.webhookEndpoints(member.accountId),
        member.id,
        principalKey(member.principal),
        memberToJson(member),
        String(MAX_MEMBERS_PER_ACCOUNT),
        eventsJson(events),
      ),
    );
    const result = scripts.gwaAddMember.parseReply(reply);
    if (result.kind === 'added' || result.kind === 'already_member') await this.call(() => this.redis.sadd(index, member.accountId));
    else await this.unindex(member.accountId, member.principal);
    if (result.kind === 'added') await this.webhooks.noticeEvents(member.accountId, events);
    return result;
  }

  async listMembers(accountId: string): Promise<Member[] | null> {
    if ((await this.getAccount(accountId)) === null) return null;
    const records = await this.call(() => this.redis.hvals(redisKeys.members(accountId)));
    return records.map(parseMember).sort((a, b) => compareCodeUnits(a.addedAt, b.addedAt) || compareCodeUnits(a.id, b.id));
  }

  async getMember(accountId: string, memberId: string): Promise<Member | null> {
    const json = await this.call(() => this.redis.hget(redisKeys.members(accountId), memberId));
    return json === null ? null : parseMember(json);
  }

  async findMember(accountId: string, principal: MemberPrincipal): Promise<Member | null> {
    const reply = await this.call(() =>
      this.redis.gwaMemberOf(redisKeys.members(accountId), redisKeys.memberPrincipals(accountId), principalKey(principal)),
    );
    return scripts.gwaMemberOf.parseReply(reply);
  }

  async changeMemberRole(accountId: string, memberId: string, role: MemberRole): Promise<MemberChangeResult> {
    const reply = await this.callUntilAnswered(() => this.redis.gwaChangeMemberRole(redisKeys.members(accountId), memberId, role));
    return scripts.gwaChangeMemberRole.parseReply(reply);
  }

  async removeMember(accountId: string, memberId: string, events?: readonly OutboxEvent[]): Promise<MemberChangeResult> {
    const reply = await this.call(() =>
      this.redis.gwaRemoveMember(
        redisKeys.members(accountId),
        redisKeys.memberPrincipals(accountId),
        redisKeys.webhookOutbox(accountId),
        redisKeys.webhookEndpoints(accountId),
        memberId,
        eventsJson(events),
      ),
    );
    const result = scripts.gwaRemoveMember.parseReply(reply);
    if (result.kind === 'changed') await this.unindex(accountId, result.member.principal);
    if (result.kind === 'changed') await this.webhooks.noticeEvents(accountId, events);
    return result;
  }

  /**
   * For each account the verified email is invited to: the identity's index
   * entry first, then the script that turns the invitation into the
   * identity's membership, then the index again and the email's entry out
   * (as addMember and removeMember order them).
   */
  async bindInvitations(identity: CustomerIdentity, nowMs: number): Promise<InvitationBinding[]> {
    if (identity.verifiedEmail === undefined) return [];
    const invitation: MemberPrincipal = { kind: 'invitation', email: normalizeEmail(identity.verifiedEmail) };
    const self: MemberPrincipal = { kind: 'identity', issuer: identity.issuer, subject: identity.subject };
    const selfIndex = redisKeys.principalAccounts(principalKey(self));
    const accountIds = (await this.call(() => this.redis.smembers(redisKeys.principalAccounts(principalKey(invitation))))).sort(
      compareCodeUnits,
    );
    const bindings: InvitationBinding[] = [];
    for (const accountId of accountIds) {
      await this.call(() => this.redis.sadd(selfIndex, accountId));
      const reply = await this.call(() =>
        this.redis.gwaBindInvitation(
          redisKeys.members(accountId),
          redisKeys.memberPrincipals(accountId),
          principalKey(invitation),
          principalKey(self),
          identity.issuer,
          identity.subject,
          new Date(nowMs).toISOString(),
        ),
      );
      const result = scripts.gwaBindInvitation.parseReply(reply);
      if (result.kind === 'no_invitation') {
        // A stale entry (the invitation was removed): both index entries are checked against the account.
        await Promise.all([this.unindex(accountId, self), this.unindex(accountId, invitation)]);
        continue;
      }
      await this.call(() => this.redis.sadd(selfIndex, accountId));
      await this.unindex(accountId, invitation);
      bindings.push(result);
    }
    return bindings;
  }

  async accountsOf(identity: Pick<CustomerIdentity, 'issuer' | 'subject'>): Promise<Membership[]> {
    const self: MemberPrincipal = { kind: 'identity', issuer: identity.issuer, subject: identity.subject };
    const accountIds = await this.call(() => this.redis.smembers(redisKeys.principalAccounts(principalKey(self))));
    // The index may name an account the principal has just left: the account's own record decides.
    const members = await Promise.all(accountIds.map((accountId) => this.findMember(accountId, self)));
    return members
      .flatMap((member) => (member ? [{ accountId: member.accountId, role: member.role }] : []))
      .sort((a, b) => compareCodeUnits(a.accountId, b.accountId));
  }

  /**
   * Takes an account out of a principal's index after its record went, then
   * checks the record again: an add that ran in between (index, record,
   * index) may have had its entry taken out, and gets it back.
   */
  private async unindex(accountId: string, principal: MemberPrincipal): Promise<void> {
    const index = redisKeys.principalAccounts(principalKey(principal));
    await this.call(() => this.redis.srem(index, accountId));
    if (await this.findMember(accountId, principal)) await this.call(() => this.redis.sadd(index, accountId));
  }

  /**
   * The global indexes live outside the account's slot, so they cannot be
   * written atomically with the record. They are written first: an index
   * without its record resolves to a key whose record is missing, which the
   * authorize script answers unknown_key (never an allow), and nobody holds
   * that key, since it is handed out only after the record exists. Written
   * last instead, a failure would leave a record (and, in a rotation, a
   * revoked old key) for a key that cannot be used.
   */
  private async writeKeyIndexes(keyHash: string, key: StoredKey): Promise<void> {
    await this.call(() =>
      Promise.all([
        this.redis.set(redisKeys.keyIdsByHash(keyHash), `${key.id} ${key.accountId}`),
        this.redis.set(redisKeys.accountIdByKeyId(key.id), key.accountId),
      ]),
    );
  }

  /**
   * After a definite refusal (no record was written) the indexes are removed.
   * Best effort: one left behind is harmless (see writeKeyIndexes). After a
   * failed or timed-out script nothing is removed, because the record may
   * exist, and removing its index would make a rotated-to key unusable.
   */
  private async removeUnusedKeyIndexes(keyHash: string, key: StoredKey): Promise<void> {
    try {
      // One DEL each: the two live in different cluster slots.
      await Promise.all([this.redis.del(redisKeys.keyIdsByHash(keyHash)), this.redis.del(redisKeys.accountIdByKeyId(key.id))]);
    } catch {
      // Harmless leftover; the refusal is still the answer.
    }
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
        redisKeys.account(accountId),
        JSON.stringify({
          ...patch,
          // Pre-encoded: Lua's cjson would turn an empty list into {}.
          ...(Array.isArray(patch.limits) ? { limitsJson: JSON.stringify(patch.limits) } : {}),
          ...(Array.isArray(patch.tokenBudgets) ? { tokenBudgetsJson: JSON.stringify(patch.tokenBudgets) } : {}),
          ...(typeof patch.monthlySpendCap === 'number' ? { monthlySpendCap: String(patch.monthlySpendCap) } : {}),
          ...(typeof patch.expiresAt === 'string' ? { expiresAtMs: String(Date.parse(patch.expiresAt)) } : {}),
          // Pre-encoded: the text and its stamp, written together (redisKeys.restrictionsStampField).
          ...(patch.restrictions ? { restrictionsFields: restrictionsFields(patch.restrictions) } : {}),
        }),
        redisKeys.keyBucketField(keyId),
      ),
    );
    return scripts.gwaUpdateKey.parseReply(reply);
  }

  /**
   * One script call per record, on the usage connection (the admin
   * connection unless a WAIT must follow: its looser deadline, off the Check
   * path). The recorder sends a batch at once, so ioredis pipelines them.
   * Standalone and Sentinel: the record and its stream entry in one script
   * (gwaApplyAndStreamUsage); Cluster: the record alone (gwaApplyUsage), the
   * stream entry being appendUsageStream's.
   */
  async applyUsage(record: UsageRecord, budgets: TokenBudgetPlan): Promise<UsageApplyOutcome> {
    const { accountId, keyId, atMs } = record;
    const month = usageMonthOf(atMs);
    const accountKeys = [
      redisKeys.account(accountId),
      redisKeys.key(accountId, keyId),
      redisKeys.usageApplied(accountId, record.requestId),
      redisKeys.usageHour(accountId, periodName(atMs, 'hour')),
      redisKeys.usageDay(accountId, periodName(atMs, 'day')),
      redisKeys.holdReleased(accountId, record.requestId),
      // A prepaid balance's crossing appends its webhook event in the same step (lua/apply-usage.lua).
      redisKeys.webhookOutbox(accountId),
      redisKeys.webhookEndpointState(accountId),
      redisKeys.webhookEndpoints(accountId),
    ] as const;
    const fixedArguments = [
      this.clockOverride ? String(Math.round(this.clockOverride() * 1000)) : '',
      String(USAGE_MARKER_TTL_MS),
      String(record.costMinorUnits),
      String(totalTokens(record.tokens)),
      redisKeys.accountSpendField(month),
      redisKeys.keySpendField(keyId, month),
      redisKeys.keyTokenBucketField(keyId),
      redisKeys.accountTokenBucketField(),
      String(CREDIT_LIMIT_MINOR_UNITS),
      String(bucketExpiresAtMs(atMs, 'hour')),
      String(bucketExpiresAtMs(atMs, 'day')),
      String(budgets.key.length),
      String(budgets.account.length),
      record.requestId,
      // The hold this answer's Check placed, released with the debit.
      record.hold ? formatPlacedHold(record.hold) : '',
      redisKeys.keyBucketField(keyId),
    ] as const;
    const planAndAggregates = [
      ...[...budgets.key, ...budgets.account].flatMap((budget) => [String(budget.tokens), String(budget.windowSeconds)]),
      ...usageAggregateIncrements(record).flatMap(([field, increment]) => [field, String(increment)]),
    ];
    const redis = this.usage.redis;
    if (!this.streamsOnApply) {
      const reply = await this.call(() =>
        this.usage.write(() => redis.gwaApplyUsage(...accountKeys, ...fixedArguments, ...planAndAggregates)),
      );
      const outcome = scripts.gwaApplyUsage.parseReply(reply);
      await this.webhooks.noticeAppended(accountId, reply);
      return outcome;
    }
    // The script fills in how it billed the record.
    const streamFields = usageStreamFields(record, BILLED_BY_THE_SCRIPT).flat();
    const reply = await this.call(() =>
      this.usage.write(() =>
        redis.gwaApplyAndStreamUsage(
          ...accountKeys,
          redisKeys.usageStream(),
          redisKeys.usageStreamed(accountId, record.requestId),
          ...fixedArguments,
          String(this.usageStreamMaxLength),
          String(streamFields.length),
          ...streamFields,
          ...planAndAggregates,
        ),
      ),
    );
    const outcome = scripts.gwaApplyAndStreamUsage.parseReply(reply);
    await this.webhooks.noticeAppended(accountId, reply);
    return outcome;
  }

  async releaseHold(accountId: string, keyId: string, requestId: string, hold: PlacedHold, attempt?: string): Promise<void> {
    await this.call(() =>
      this.redis.gwaReleaseHold(
        redisKeys.account(accountId),
        redisKeys.holdReleased(accountId, attempt === undefined ? requestId : `${requestId} ${attempt}`),
        redisKeys.keyBucketField(keyId),
        formatPlacedHold(hold),
        String(USAGE_MARKER_TTL_MS),
      ),
    );
  }

  async appendUsageStream(record: UsageRecord, applied: UsageApplyOutcome): Promise<'appended' | 'duplicate'> {
    const redis = this.usage.redis;
    const reply = await this.call(() =>
      this.usage.write(() =>
        redis.gwaAppendUsageStream(
          redisKeys.usageStream(),
          redisKeys.usageStreamed(record.accountId, record.requestId),
          String(USAGE_MARKER_TTL_MS),
          String(this.usageStreamMaxLength),
          ...usageStreamFields(record, applied).flat(),
        ),
      ),
    );
    return scripts.gwaAppendUsageStream.parseReply(reply);
  }

  /**
   * Sent after a batch of usage writes has been answered, on their connection:
   * undefined once they are durable as USAGE_DURABILITY asks, else why not.
   * WAIT and WAITAOF count only what this connection wrote, so writes
   * answered on a connection since lost are never counted as durable: the
   * recorder sends them again, and a repeat writes (see gwaApplyAndStreamUsage).
   */
  async usageDurabilityShortfall(): Promise<string | undefined> {
    const durability = this.usageDurability;
    const allOnThisConnection = this.usage.beginDurabilityCheck();
    switch (durability.mode) {
      case 'acknowledged':
        return undefined;
      case 'appendfsync-always': {
        // On a Cluster every master was checked at start; elsewhere each batch also finds a failover to a master set otherwise.
        if (this.slotted) return undefined;
        const config = await this.call(() => this.usage.redis.config('GET', 'append*'));
        return appendfsyncShortfall(config as unknown[]);
      }
      case 'wait-replicas': {
        const acknowledged = await this.call(() => this.usage.redis.wait(durability.replicas, durability.timeoutMs));
        if (!allOnThisConnection()) return 'the usage connection was re-established since the writes';
        if (acknowledged < durability.replicas) {
          return `WAIT ${durability.replicas}: ${acknowledged} replica(s) acknowledged within ${durability.timeoutMs} ms`;
        }
        return undefined;
      }
      case 'waitaof': {
        const reply = await this.call(() => this.usage.redis.call('WAITAOF', 1, durability.replicas, durability.timeoutMs));
        if (!allOnThisConnection()) return 'the usage connection was re-established since the writes';
        const [local, replicas] = (Array.isArray(reply) ? reply : []) as unknown[];
        if (local !== 1 || typeof replicas !== 'number' || replicas < durability.replicas) {
          return `WAITAOF 1 ${durability.replicas}: local AOF ${local === 1 ? 'fsynced' : 'not fsynced'}, ${String(replicas)} replica AOF(s) within ${durability.timeoutMs} ms`;
        }
        return undefined;
      }
    }
  }

  async readUsage(query: UsageQuery): Promise<UsageBucket[] | null> {
    const { accountId, granularity } = query;
    if ((await this.call(() => this.redis.exists(redisKeys.account(accountId)))) === 0) return null;
    const nowMs = Math.floor((await this.redisNowUs()) / 1000);
    const starts: number[] = [];
    for (let start = periodStart(query.fromMs, granularity); start < query.toMs; start += periodMs(granularity)) starts.push(start);
    const bucketKey = (start: number) =>
      granularity === 'hour'
        ? redisKeys.usageHour(accountId, periodName(start, 'hour'))
        : redisKeys.usageDay(accountId, periodName(start, 'day'));
    // A bucket past its retention reads as empty even before Redis has evicted it, as in the in-memory store.
    const kept = (start: number) => bucketExpiresAtMs(start, granularity) > nowMs;
    const counters = await this.call(() =>
      Promise.all(starts.map((start) => (kept(start) ? this.redis.hgetall(bucketKey(start)) : Promise.resolve({})))),
    );
    return starts.map((start, index) => usageBucketOf(start, counters[index]!));
  }

  async readTokenBudgets(keyId: string, plan: TokenBudgetPlan): Promise<TokenBudgetState[] | null> {
    const key = await this.getKey(keyId);
    const account = key && (await this.getAccount(key.accountId));
    if (!key || !account) return null;
    const budgets = effectiveTokenBudgets(plan, account.tokenBudgets, key.tokenBudgets);
    if (budgets.key.length + budgets.account.length === 0) return [];
    const [[keyBuckets, accountBuckets], nowUs] = await Promise.all([
      this.call(() =>
        this.redis.hmgetBuffer(redisKeys.account(account.id), redisKeys.keyTokenBucketField(key.id), redisKeys.accountTokenBucketField()),
      ),
      this.redisNowUs(),
    ]);
    const stateOf = (scope: LimitScope, packed: Buffer | null | undefined) => {
      const buckets = parsePackedTokenBuckets(packed);
      return (budget: TokenBudget) => tokenBudgetState(scope, buckets?.get(budget.windowSeconds), nowUs, budget);
    };
    return [...budgets.key.map(stateOf('key', keyBuckets)), ...budgets.account.map(stateOf('account', accountBuckets))];
  }

  async readUsageStream(options: { count: number; after?: string }): Promise<UsageStreamEntry[]> {
    const start = options.after === undefined ? '-' : `(${options.after}`;
    const rows = await this.call(() => this.redis.xrange(redisKeys.usageStream(), start, '+', 'COUNT', options.count));
    return rows.map(([id, flat]) => ({ id, fields: fieldsOf(flat) }));
  }

  /** Redis's clock (µs) read with TIME, the one the usage script decides on; the test override if set. */
  private async redisNowUs(): Promise<number> {
    if (this.clockOverride) return Math.round(this.clockOverride() * 1000);
    const [seconds, micros] = await this.call(() => this.redis.time());
    return Number(seconds) * 1_000_000 + Number(micros);
  }

  async ping(): Promise<void> {
    // On the Check connection: health is about whether Checks can be answered.
    await this.call(() => this.checks.ping(this.checkDeadlineMs * 10));
  }

  async close(): Promise<void> {
    this.decisionClock.stop();
    await Promise.all([
      this.checks.close(),
      closeClient(this.redis),
      this.usage.redis !== this.redis ? closeClient(this.usage.redis) : undefined,
    ]);
  }

  /**
   * For a script that is safe to run twice with the same arguments. A reply
   * lost to a dropped connection or a timeout says nothing about whether Redis
   * applied the script; repeating the same call does find out, so it is
   * repeated (after 50, 100, 200 … ms) until Redis answers: at most
   * LOST_REPLY_MAX_ATTEMPTS calls in all, none started later than one more
   * admin deadline after the first failure. An error that Redis itself answered (ReplyError: a refused
   * or failed command) is definite and not repeated. When no call got an
   * answer, StoreOutcomeUnknownError says that the write may have been applied.
   */
  private async callUntilAnswered<T>(write: () => Promise<T>): Promise<T> {
    let repeatsEnd: AbortSignal | undefined;
    for (let attempt = 1; ; attempt += 1) {
      try {
        return await write();
      } catch (error) {
        if (error instanceof Error && error.name === 'ReplyError') throw asStoreError(error);
        repeatsEnd ??= AbortSignal.timeout(this.adminDeadlineMs);
        if (attempt >= LOST_REPLY_MAX_ATTEMPTS || repeatsEnd.aborted) {
          throw new StoreOutcomeUnknownError(
            `Redis did not answer ${attempt} attempts (last: ${messageOf(error)}); the write may or may not have been applied`,
            { cause: error },
          );
        }
        await sleep(LOST_REPLY_FIRST_PAUSE_MS * 2 ** (attempt - 1));
      }
    }
  }

  private async call<T>(command: () => Promise<T>): Promise<T> {
    try {
      return await command();
    } catch (error) {
      throw asStoreError(error);
    }
  }
}

/**
 * The connection usage records go on, and which of its connections (ioredis
 * reconnects it) answered each write: a WAIT or WAITAOF counts only the
 * writes of the connection it is sent on.
 */
class UsageConnection {
  private connection = 0;
  private writtenOn = new Set<number>();

  constructor(readonly redis: ScriptedRedis) {
    redis.on('ready', () => {
      this.connection += 1;
    });
  }

  async write<T>(command: () => Promise<T>): Promise<T> {
    const reply = await command();
    this.writtenOn.add(this.connection);
    return reply;
  }

  /** Starts a check: once its WAIT is answered, tells whether every write since the last check was on the connection the WAIT went on. */
  beginDurabilityCheck(): () => boolean {
    const writtenOn = this.writtenOn;
    this.writtenOn = new Set();
    return () => [...writtenOn].every((connection) => connection === this.connection);
  }
}

/**
 * The placeholder billing of a stream entry that gwaApplyAndStreamUsage
 * writes: the script replaces both values with how it billed the record.
 */
const BILLED_BY_THE_SCRIPT: UsageApplyOutcome = { kind: 'applied', billing: 'prepaid', creditShortfall: 0 };

/** Why Redis's AOF settings fall short of appendfsync-always, from `CONFIG GET append*`; undefined when they do not. */
function appendfsyncShortfall(config: unknown[]): string | undefined {
  const value = (name: string) => {
    const at = config.indexOf(name);
    return at >= 0 ? String(config[at + 1]) : '(not reported)';
  };
  const appendonly = value('appendonly');
  const appendfsync = value('appendfsync');
  if (appendonly === 'yes' && appendfsync === 'always') return undefined;
  return `Redis runs appendonly ${appendonly}, appendfsync ${appendfsync}; USAGE_DURABILITY=appendfsync-always needs appendonly yes and appendfsync always`;
}

/**
 * Why the chosen durability cannot hold on this Redis, found at start (the
 * store then refuses to open): appendfsync-always needs every master to say
 * so (CONFIG GET, which must be allowed: a setting that cannot be read cannot
 * be relied on); waitaof needs Redis 7.2 or later and the master's AOF on.
 */
async function usageDurabilityRefusal(
  durability: UsageDurability,
  topology: RedisTopology,
  admin: ScriptedRedis,
  usage: ScriptedRedis,
  where: string,
): Promise<string | undefined> {
  switch (durability.mode) {
    case 'acknowledged':
    case 'wait-replicas':
      return undefined;
    case 'appendfsync-always': {
      const masters: Redis[] = topology.mode === 'cluster' ? (admin as unknown as Cluster).nodes('master') : [admin];
      const problems: string[] = [];
      for (const master of masters) {
        const name = topology.mode === 'cluster' ? `${master.options.host ?? ''}:${master.options.port ?? ''}` : where;
        try {
          const shortfall = appendfsyncShortfall((await master.config('GET', 'append*')) as unknown[]);
          if (shortfall !== undefined) problems.push(`${name}: ${shortfall}`);
        } catch (error) {
          problems.push(
            `${name}: CONFIG GET is refused (${messageOf(error)}), so appendfsync cannot be checked; allow CONFIG GET to this user, or choose USAGE_DURABILITY=wait-replicas or waitaof, which Redis confirms write by write`,
          );
        }
      }
      return problems.length > 0 ? `USAGE_DURABILITY=appendfsync-always: ${problems.join('; ')}` : undefined;
    }
    case 'waitaof': {
      const info = String(await admin.info('server'));
      const version = /redis_version:(\d+)\.(\d+)/.exec(info);
      const [major, minor] = version ? [Number(version[1]), Number(version[2])] : [0, 0];
      if (major < 7 || (major === 7 && minor < 2)) {
        return `USAGE_DURABILITY=waitaof needs Redis 7.2 or later (WAITAOF); ${where} runs ${version ? `${major}.${minor}` : 'an unknown version'}: choose wait-replicas or appendfsync-always`;
      }
      try {
        // Nothing written on this connection yet: answers at once whether the local AOF is on.
        const reply = await usage.call('WAITAOF', 1, 0, durability.timeoutMs);
        if (!Array.isArray(reply) || reply[0] !== 1) return `USAGE_DURABILITY=waitaof: ${where} did not report its AOF fsynced`;
      } catch (error) {
        return `USAGE_DURABILITY=waitaof: ${where} refused WAITAOF (${messageOf(error)}); it needs appendonly yes`;
      }
      return undefined;
    }
  }
}

/** What Checks decide on (µs): Redis's clock as this replica carries it, or the tests' override (exact: no uncertainty). */
interface DecisionClock {
  nowUs(): number;
  uncertaintyUs(): number | undefined;
  stop(): void;
}

async function startDecisionClock(options: RedisStoreOptions, admin: ScriptedRedis): Promise<DecisionClock> {
  const override = options.clockOverride;
  if (override) return { nowUs: () => Math.round(override() * 1000), uncertaintyUs: () => undefined, stop: () => undefined };
  return RedisClock.start({
    readRedisUs: async () => {
      const [seconds, micros] = await admin.time();
      return Number(seconds) * 1_000_000 + Number(micros);
    },
    ...(options.localClockMs ? { localMs: options.localClockMs } : {}),
    ...(options.clockSampleIntervalMs ? { intervalMs: options.clockSampleIntervalMs } : {}),
  });
}

/** The key index entry: `<keyId> <accountId>`. */
function parseKeyIndexEntry(reply: unknown): KeyIds | null {
  if (reply === null) return null;
  if (typeof reply !== 'string') throw new StoreUnavailableError('corrupt key index entry');
  const [keyId, accountId] = reply.split(' ');
  if (!keyId || !accountId) throw new StoreUnavailableError('corrupt key index entry');
  return { keyId, accountId };
}

export function asStoreError(error: unknown): StoreUnavailableError {
  if (error instanceof StoreUnavailableError) return error;
  return new StoreUnavailableError(`Redis command failed: ${messageOf(error)}`, { cause: error });
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * The authorize script's ARGV[2]: the decision time in µs, then, when the request brings a hold, its minor units, its
 * tokens and the slot it is held in (holdSlotAt), packed little-endian doubles (struct '<d' or '<dddd'), so the script
 * reads them with one struct.unpack: as text each number would cost it a strtod, and as an argument of its own the
 * hold ~1.5k more instructions.
 */
function timeAndHoldArgument(nowUs: number, hold: CreditHold | undefined, slot: number): BinaryArgument {
  const packed = Buffer.allocUnsafe(hold ? 32 : 8);
  packed.writeDoubleLE(nowUs, 0);
  if (hold) {
    packed.writeDoubleLE(hold.minorUnits, 8);
    packed.writeDoubleLE(hold.tokens, 16);
    packed.writeDoubleLE(slot, 24);
  }
  return new BinaryArgument(packed);
}

/**
 * The authorize script's ARGV after the key id, the time and the plan: for a key Check knows to be restricted, the
 * stamps of the restrictions it decided on, key's then account's, and what it refused, each only when it or one after
 * it is not ''. A key believed unrestricted (what Check sends for a key it holds nothing for) sends nothing more: the
 * script compares its records' stamps only when a record has one.
 */
function authorizeArguments(keyTimeAndPlan: ScriptArgument[], restrictions: RestrictionsSent | undefined): ScriptArgument[] {
  if (restrictions !== undefined) {
    const { keyStamp, accountStamp, refused } = restrictions;
    if (refused !== undefined) return [...keyTimeAndPlan, keyStamp, accountStamp, refused];
    if (accountStamp !== '') return [...keyTimeAndPlan, keyStamp, accountStamp];
    if (keyStamp !== '') return [...keyTimeAndPlan, keyStamp];
  }
  return keyTimeAndPlan;
}

/** An audit entry as stream fields: its time, its own fields (absent ones left out), the actor as JSON. */
function auditFields(entry: AuditEntryInput | OperatorAuditEntryInput, nowMs: number): string[] {
  return Object.entries({ time: new Date(nowMs).toISOString(), ...entry, actor: actorToText(entry.actor) }).flatMap(([name, value]) =>
    value === undefined ? [] : [name, String(value)],
  );
}

function operatorAuditEntryOf(id: string, fields: Record<string, string>): OperatorAuditEntry {
  return {
    id,
    time: fields.time ?? '',
    action: fields.action as OperatorAuditEntry['action'],
    actor: parseActor(fields.actor, 'account', 'audit actor'),
    operatorTokenId: fields.operatorTokenId ?? '',
    operatorTokenName: fields.operatorTokenName ?? '',
    ...(fields.detail ? { detail: fields.detail } : {}),
  };
}
