import { capRefuses, countsTowardCap, DEFAULT_MAX_ACTIVE_KEYS } from '../keys/active-key-cap';
import { systemClock, type Clock } from '../platform/clock';
import { adjustCreditBalance } from '../accounts/credit';
import type { CustomerIdentity, MemberRole, Membership } from '../accounts/customer-identity';
import {
  leavesNoOwner,
  MAX_MEMBERS_PER_ACCOUNT,
  normalizeEmail,
  principalKey,
  type Member,
  type MemberPrincipal,
} from '../accounts/members';
import { compareCodeUnits } from './ordering';
import { MemoryWebhookStore } from './memory-webhook-store';
import { budgetReachedEvent, creditCrossings, tokenBudgetReachedEvent } from '../webhooks/webhook-events';
import type { OutboxEvent } from '../ports/webhook-store';
import { COUNTED_BATCH_MEMORY_MS, DAILY_RETENTION_MS, dayStartOf, HOURLY_RETENTION_MS } from '../keys/request-counts';
import { authorizeAccountState, type HeldAmounts } from '../accounts/limits/authorize-account-state';
import { heldInSlots, holdSlotAt, holdSlotsAt, releaseFromSlots, type HoldSlots, type PlacedHold } from '../accounts/credit-holds';
import { effectiveTokenBudgets, tokenBucketName, tokenBudgetState, type TokenBucket } from '../accounts/limits/token-budget';
import { applyUsageToAccountState, MAX_CREDIT_SHORTFALL } from '../accounts/limits/usage-account-state';
import {
  USAGE_MARKER_TTL_MS,
  CREDIT_IDEMPOTENCY_TTL_MS,
  type AccountListing,
  type AccountPatch,
  type ActiveKeyCapReached,
  type AddMemberResult,
  type AccountAuditQuery,
  type AuditEntry,
  type AuditEntryInput,
  type AuditPage,
  type AuditQuery,
  type AuditTrailEntry,
  type OperatorAuditEntryInput,
  type CreditOutcome,
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
  type UsageBucket,
  type UsageQuery,
  type UsageStreamEntry,
} from '../ports/store';
import { usageAggregateIncrements, usageBucketOf } from './usage-aggregates';
import { DEFAULT_USAGE_STREAM_MAX_LENGTH } from '../platform/settings';
import { usageStreamFields } from './usage-stream-fields';
import type { Account, KeyIds, StoredKey } from '../keys/key-records';
import type { AuthorizeOutcome, AuthorizeRequest } from '../check/ports';
import type { TokenBudgetPlan, TokenBudgetState } from '../accounts/limits/token-budgets';
import {
  bucketExpiresAtMs,
  periodMs,
  periodName,
  periodStart,
  previousMonth,
  usageMonthOf,
  type UsageGranularity,
} from '../metering/usage-periods';
import type { UsageApplyOutcome, UsageBilling, UsageRecord } from '../metering/usage-record';

const AUDIT_MAX_ENTRIES = 10_000;

interface StreamId {
  ms: bigint;
  sequence: bigint;
}

function parseStreamId(id: string): StreamId {
  const [ms = '0', sequence = '0'] = id.split('-');
  return { ms: BigInt(ms), sequence: BigInt(sequence) };
}

function compareStreamIds(a: StreamId, b: StreamId): number {
  if (a.ms !== b.ms) return a.ms < b.ms ? -1 : 1;
  return a.sequence === b.sequence ? 0 : a.sequence < b.sequence ? -1 : 1;
}

/** The next id of a stream, as Redis makes them: strictly increasing even if the clock steps back. */
function nextStreamId(last: StreamId, nowMs: number): StreamId {
  const ms = BigInt(nowMs);
  return ms > last.ms ? { ms, sequence: 0n } : { ms: last.ms, sequence: last.sequence + 1n };
}

function dropExpired<T>(markers: Map<string, Expiring<T>>, nowMs: number): void {
  // Insertion order is expiry order (one TTL for all, on a clock that the tests only move forward).
  for (const [name, marker] of markers) {
    if (marker.expiresAtMs > nowMs) return;
    markers.delete(name);
  }
}

function aggregateName(accountId: string, granularity: UsageGranularity, startMs: number): string {
  return `${accountId} ${granularity} ${periodName(startMs, granularity)}`;
}

interface Bucket {
  tatUs: number;
  /** Token buckets only: the TAT's fraction of a µs (src/accounts/limits/token-budget.ts). */
  fraction?: number;
  expiresAtMs: number;
}

interface Expiring<T> {
  value: T;
  expiresAtMs: number;
}

/** As the Redis usage script: spent token buckets and old months' spend are deleted at most once an hour per account. */
const USAGE_SWEEP_INTERVAL_MS = 3_600_000;

/** The holds in flight of one account, by slot (src/accounts/credit-holds.ts): the account's, and each key's. */
interface AccountHolds {
  account: HoldSlots;
  keys: Map<string, HoldSlots>;
}

export interface MemoryStoreOptions {
  /** The active-key cap of accounts without their own (default DEFAULT_MAX_ACTIVE_KEYS). */
  defaultMaxActiveKeys?: number;
  /** Entries the usage stream keeps (USAGE_STREAM_MAX_LEN). */
  usageStreamMaxLength?: number;
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
  readonly webhooks = new MemoryWebhookStore((accountId) => this.accounts.has(accountId));
  private readonly keys = new Map<string, StoredKey>();
  private readonly idsByHash = new Map<string, KeyIds>();
  /** Account → `granularity:startMs` → key id → requests, as the Redis store's hourly and daily hashes. */
  private readonly requestCounts = new Map<string, Map<string, { counts: Map<string, number>; expiresAtMs: number }>>();
  /** Batch id → when it was counted, for COUNTED_BATCH_MEMORY_MS. */
  private readonly countedBatches = new Map<string, number>();
  /** Rate-limit buckets per account. */
  private readonly buckets = new Map<string, Map<string, Bucket>>();
  /** Members per account, by member id. */
  private readonly members = new Map<string, Map<string, Member>>();
  private readonly audit: AuditTrailEntry[] = [];
  /** The last audit id, as Redis streams make them: `<ms>-<sequence>`, strictly increasing even if the clock steps back. */
  private lastAuditId: StreamId = { ms: 0n, sequence: 0n };
  /** Per account: the spend of each key per month (`<keyId> <month>`); the account's own is on its record. */
  private readonly keySpend = new Map<string, Map<string, number>>();
  private readonly usageSweepAtMs = new Map<string, number>();
  /** Per account, per token bucket name: until when (µs) its budget sends no other budget.reached (lua/apply-usage.lua). */
  private readonly tokenBudgetNotices = new Map<string, Map<string, number>>();
  /** Credit holds in flight per account, summed by slot (as the Redis store's bucket fields carry them). */
  private readonly holds = new Map<string, AccountHolds>();
  /** Holds released, by `<accountId> <requestId>`, oldest first, as the usage markers: each is released once. */
  private readonly holdsReleased = new Map<string, Expiring<true>>();
  /** Usage markers by `<accountId> <requestId>`, oldest first (insertion order), so expired ones are dropped from the front. */
  private readonly usageApplied = new Map<string, Expiring<{ billing: UsageBilling; creditShortfall: number }>>();
  private readonly usageStreamed = new Map<string, Expiring<string>>();
  /** Credit idempotency keys by `<accountId> <key>` (an account id holds no space), oldest first, as the usage markers. */
  private readonly creditMarkers = new Map<string, Expiring<{ amount: number; outcome: CreditOutcome }>>();
  private readonly creditAuditClaims = new Map<string, Expiring<true>>();
  /** Hour and day aggregates by `<accountId> <granularity> <period>`: counters laid out as in Redis. */
  private readonly usageAggregates = new Map<string, Expiring<Map<string, number>>>();
  private readonly usageStream: UsageStreamEntry[] = [];
  private lastUsageStreamId: StreamId = { ms: 0n, sequence: 0n };
  private readonly usageStreamMaxLength: number;

  private readonly defaultMaxActiveKeys: number;

  constructor(
    private readonly clock: Clock = systemClock,
    options: MemoryStoreOptions = {},
  ) {
    this.defaultMaxActiveKeys = options.defaultMaxActiveKeys ?? DEFAULT_MAX_ACTIVE_KEYS;
    this.usageStreamMaxLength = options.usageStreamMaxLength ?? DEFAULT_USAGE_STREAM_MAX_LENGTH;
  }

  async resolveKeyHash(keyHash: string): Promise<KeyIds | null> {
    const ids = this.idsByHash.get(keyHash);
    return ids ? { ...ids } : null;
  }

  async authorize(request: AuthorizeRequest): Promise<AuthorizeOutcome> {
    const nowMs = this.clock.now();
    const key = this.keys.get(request.keyId) ?? null;
    const buckets = this.buckets.get(request.accountId) ?? new Map<string, Bucket>();
    const tats = new Map<string, number>();
    const tokenBuckets = new Map<string, TokenBucket>();
    for (const [name, bucket] of buckets) {
      if (bucket.expiresAtMs > nowMs) {
        tats.set(name, bucket.tatUs);
        tokenBuckets.set(name, { tatUs: bucket.tatUs, fraction: bucket.fraction ?? 0 });
      } else buckets.delete(name);
    }
    const account = this.accounts.get(request.accountId) ?? null;
    // The month by the decision's clock, as the Redis script takes it from its own.
    const month = usageMonthOf(nowMs);
    const slot = holdSlotAt(nowMs * 1000);
    const stored = this.holds.get(request.accountId);
    const accountSlots = holdSlotsAt(stored?.account, slot);
    // A key's own sums only where its holds count for it, as the authorize script keeps them (held-sums.lua).
    const keyCounts =
      key?.monthlySpendCap !== undefined ||
      key?.tokenBudgets !== undefined ||
      request.defaultTokenBudgets.key.length > 0 ||
      account?.tokenBudgets !== undefined;
    const keySlots = holdSlotsAt(keyCounts ? stored?.keys.get(request.keyId) : undefined, slot);
    const [accountHeld, keyHeld] = [heldInSlots(accountSlots), heldInSlots(keySlots)];
    const held: HeldAmounts = {
      accountMinorUnits: accountHeld.minorUnits,
      accountTokens: accountHeld.tokens,
      keyMinorUnits: keyHeld.minorUnits,
      keyTokens: keyHeld.tokens,
    };
    const {
      outcome,
      writes,
      held: placed,
    } = authorizeAccountState(
      {
        key: key?.accountId === request.accountId ? key : null,
        account,
        tats,
        tokenBuckets,
        accountMonthSpend: account?.monthlySpend?.[month] ?? 0,
        keyMonthSpend: this.keySpend.get(request.accountId)?.get(`${request.keyId} ${month}`) ?? 0,
        held,
        ...(request.restrictions ? { restrictions: request.restrictions } : {}),
      },
      nowMs * 1000,
      request.defaultPlan,
      request.defaultTokenBudgets,
      request.hold,
    );
    for (const write of writes) buckets.set(write.bucket, { tatUs: write.tatUs, expiresAtMs: nowMs + write.ttlMs });
    if (buckets.size > 0) this.buckets.set(request.accountId, buckets);
    if (!placed || outcome.kind !== 'allow') return outcome;
    // Added to the current slot (or the stored one, if ahead), as the authorize script does.
    for (const slots of [accountSlots, keySlots]) {
      slots.money[0]! += placed.minorUnits;
      slots.tokens[0]! += placed.tokens;
    }
    const holds = stored ?? { account: accountSlots, keys: new Map<string, HoldSlots>() };
    holds.account = accountSlots;
    if (keyCounts) holds.keys.set(request.keyId, keySlots);
    else holds.keys.delete(request.keyId);
    this.holds.set(request.accountId, holds);
    return placed.minorUnits + placed.tokens > 0 ? { ...outcome, held: { slot, ...placed } } : outcome;
  }

  async createAccount(account: Account): Promise<boolean> {
    if (this.accounts.has(account.id)) return false;
    // Spend and shortfall are written by usage only, as in Redis.
    const { monthlySpend: _spend, creditShortfall: _shortfall, ...record } = structuredClone(account);
    this.accounts.set(account.id, record);
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
    if (patch.exposedKeyAction === null) delete account.exposedKeyAction;
    else if (patch.exposedKeyAction !== undefined) account.exposedKeyAction = patch.exposedKeyAction;
    if (patch.maxActiveKeys === null) delete account.maxActiveKeys;
    else if (patch.maxActiveKeys !== undefined) account.maxActiveKeys = patch.maxActiveKeys;
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
    if (patch.tokenBudgets !== undefined) {
      const budgets = { ...account.tokenBudgets };
      for (const scope of ['key', 'account'] as const) {
        const value = patch.tokenBudgets[scope];
        if (value === null) delete budgets[scope];
        else if (value !== undefined) budgets[scope] = structuredClone(value);
      }
      if (Object.keys(budgets).length === 0) delete account.tokenBudgets;
      else account.tokenBudgets = budgets;
    }
    if (patch.monthlySpendCap === null) delete account.monthlySpendCap;
    else if (patch.monthlySpendCap !== undefined) account.monthlySpendCap = patch.monthlySpendCap;
    if (patch.keyRestrictions === null) delete account.keyRestrictions;
    else if (patch.keyRestrictions !== undefined) account.keyRestrictions = structuredClone(patch.keyRestrictions);
    return structuredClone(account);
  }

  /** As gwaAdjustCredit: the outcome and the key's marker in one step (nothing awaited in between), refusals included. */
  async adjustCredit(accountId: string, amount: number, idempotencyKey?: string): Promise<CreditResult> {
    const nowMs = this.clock.now();
    dropExpired(this.creditMarkers, nowMs);
    const marker = idempotencyKey === undefined ? undefined : `${accountId} ${idempotencyKey}`;
    const first = marker === undefined ? undefined : this.creditMarkers.get(marker)?.value;
    if (first) {
      return first.amount === amount
        ? { kind: 'replayed', first: { ...first.outcome } }
        : { kind: 'idempotency_key_reused', amount: first.amount };
    }
    const account = this.accounts.get(accountId);
    if (!account) return { kind: 'account_not_found' };
    const outcome = this.creditOutcome(account, amount);
    if (marker !== undefined) {
      this.creditMarkers.set(marker, { value: { amount, outcome: { ...outcome } }, expiresAtMs: nowMs + CREDIT_IDEMPOTENCY_TTL_MS });
    }
    return outcome;
  }

  async claimCreditAudit(accountId: string, idempotencyKey: string): Promise<boolean> {
    const nowMs = this.clock.now();
    dropExpired(this.creditAuditClaims, nowMs);
    const claim = `${accountId} ${idempotencyKey}`;
    if (this.creditAuditClaims.has(claim)) return false;
    this.creditAuditClaims.set(claim, { value: true, expiresAtMs: nowMs + CREDIT_IDEMPOTENCY_TTL_MS });
    return true;
  }

  private creditOutcome(account: Account, amount: number): CreditOutcome {
    if (account.creditBalance === undefined) return { kind: 'not_prepaid' };
    const adjusted = adjustCreditBalance(account.creditBalance, amount);
    if (adjusted.kind !== 'ok') return { kind: 'balance_out_of_range', creditBalance: account.creditBalance };
    account.creditBalance = adjusted.creditBalance;
    return adjusted;
  }

  async insertKey(keyHash: string, key: StoredKey, events?: readonly OutboxEvent[]): Promise<InsertKeyResult> {
    if (!this.accounts.has(key.accountId)) return 'account_not_found';
    // The same insert repeated: already there, and never refused by the cap it is counted in.
    if (this.keys.has(key.id)) return 'created';
    const refusal = this.capRefusal(key.accountId, 'create');
    if (refusal) return refusal;
    this.keys.set(key.id, structuredClone(key));
    this.idsByHash.set(keyHash, { keyId: key.id, accountId: key.accountId });
    this.webhooks.appendEventsNow(key.accountId, events);
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
    if (patch.tokenBudgets === null) delete key.tokenBudgets;
    else if (patch.tokenBudgets !== undefined) key.tokenBudgets = structuredClone(patch.tokenBudgets);
    if (patch.monthlySpendCap === null) delete key.monthlySpendCap;
    else if (patch.monthlySpendCap !== undefined) key.monthlySpendCap = patch.monthlySpendCap;
    if (patch.restrictions === null) delete key.restrictions;
    else if (patch.restrictions !== undefined) key.restrictions = structuredClone(patch.restrictions);
    // A cap or budgets given to a key its holds did not count for: its sums start as the account's (update-key.lua).
    const holds = this.holds.get(key.accountId);
    if ((typeof patch.monthlySpendCap === 'number' || Array.isArray(patch.tokenBudgets)) && holds && !holds.keys.has(keyId)) {
      holds.keys.set(keyId, structuredClone(holds.account));
    }
    return structuredClone(key);
  }

  async listAccounts(): Promise<AccountListing> {
    const accounts = [...this.accounts.values()].sort((a, b) => compareCodeUnits(a.id, b.id)).map((account) => structuredClone(account));
    // Records are objects here, never serialized text: none can be unreadable.
    return { accounts, unreadable: [] };
  }

  async listKeys(accountId: string): Promise<StoredKey[] | null> {
    if (!this.accounts.has(accountId)) return null;
    return [...this.keys.values()]
      .filter((key) => key.accountId === accountId)
      .sort((a, b) => compareCodeUnits(b.createdAt, a.createdAt) || compareCodeUnits(a.id, b.id))
      .map((key) => structuredClone(key));
  }

  async rotateKey(request: RotateKeyRequest): Promise<RotateKeyResult> {
    const old = this.keys.get(request.oldKeyId);
    if (!old || old.accountId !== request.newKey.accountId) return { kind: 'key_not_found' };
    const repeated = old.replacedBy === request.newKey.id ? this.keys.get(request.newKey.id) : undefined;
    // The same rotation again: answered as the first time, nothing changes (as the Redis script does).
    if (repeated) return { kind: 'rotated', oldKey: structuredClone(old), newKey: structuredClone(repeated) };
    // The store's clock, as the Redis store uses Redis TIME.
    const nowMs = this.clock.now();
    if (old.status === 'revoked' || (old.revokeAt !== undefined && Date.parse(old.revokeAt) <= nowMs)) return { kind: 'key_revoked' };
    if (old.replacedBy !== undefined) return { kind: 'key_already_rotated', replacedBy: old.replacedBy };
    if (old.expiresAt !== undefined && Date.parse(old.expiresAt) <= nowMs) return { kind: 'key_expired' };
    const refusal = request.graceSeconds === 0 ? undefined : this.capRefusal(old.accountId, 'rotate_with_grace');
    if (refusal) return refusal;
    if (request.graceSeconds === 0) {
      old.status = 'revoked';
      old.revokedAt = new Date(nowMs).toISOString();
    } else {
      old.revokeAt = new Date(nowMs + request.graceSeconds * 1000).toISOString();
    }
    old.replacedBy = request.newKey.id;
    this.keys.set(request.newKey.id, structuredClone(request.newKey));
    this.idsByHash.set(request.newKeyHash, { keyId: request.newKey.id, accountId: request.newKey.accountId });
    this.webhooks.appendEventsNow(old.accountId, request.events);
    return { kind: 'rotated', oldKey: structuredClone(old), newKey: structuredClone(request.newKey) };
  }

  async revokeKey(keyId: string, nowMs: number, events?: readonly OutboxEvent[]): Promise<StoredKey | null> {
    const key = this.keys.get(keyId);
    if (!key) return null;
    if (key.status !== 'revoked') this.webhooks.appendEventsNow(key.accountId, events);
    key.status = 'revoked';
    key.revokedAt ??= new Date(nowMs).toISOString();
    return structuredClone(key);
  }

  async recordLastUsed(uses: readonly LastUse[], batch?: CountedBatch): Promise<void> {
    const counting = batch !== undefined && !this.countedBatches.has(batch.id);
    if (counting) this.rememberCountedBatch(batch.id);
    for (const use of uses) {
      const key = this.keys.get(use.keyId);
      if (!key || key.accountId !== use.accountId) continue;
      if (key.lastUsedAt === undefined || Date.parse(key.lastUsedAt) < use.atMs) key.lastUsedAt = new Date(use.atMs).toISOString();
      if (counting && use.requests) {
        this.addRequests(use.accountId, 'hour', batch.hourStartMs, use.keyId, use.requests);
        this.addRequests(use.accountId, 'day', dayStartOf(batch.hourStartMs), use.keyId, use.requests);
      }
    }
  }

  async readRequestCounts(
    accountId: string,
    granularity: UsageGranularity,
    bucketStartsMs: readonly number[],
  ): Promise<RequestCountsByKey[]> {
    const now = this.clock.now();
    return bucketStartsMs.map((startMs) => {
      const bucket = this.requestCounts.get(accountId)?.get(`${granularity}:${startMs}`);
      return bucket && bucket.expiresAtMs > now ? Object.fromEntries(bucket.counts) : {};
    });
  }

  private addRequests(accountId: string, granularity: UsageGranularity, startMs: number, keyId: string, requests: number): void {
    let buckets = this.requestCounts.get(accountId);
    if (!buckets) this.requestCounts.set(accountId, (buckets = new Map<string, { counts: Map<string, number>; expiresAtMs: number }>()));
    const now = this.clock.now();
    for (const [name, bucket] of buckets) if (bucket.expiresAtMs <= now) buckets.delete(name);
    const name = `${granularity}:${startMs}`;
    let bucket = buckets.get(name);
    if (!bucket) {
      const retention = granularity === 'hour' ? HOURLY_RETENTION_MS : DAILY_RETENTION_MS;
      buckets.set(name, (bucket = { counts: new Map(), expiresAtMs: startMs + retention }));
    }
    bucket.counts.set(keyId, (bucket.counts.get(keyId) ?? 0) + requests);
  }

  private rememberCountedBatch(id: string): void {
    const now = this.clock.now();
    for (const [counted, atMs] of this.countedBatches) {
      if (now - atMs < COUNTED_BATCH_MEMORY_MS) break; // insertion order: the rest are younger
      this.countedBatches.delete(counted);
    }
    this.countedBatches.set(id, now);
  }

  async appendAudit(entry: AuditEntryInput, nowMs: number): Promise<void> {
    this.appendToTrail(entry, nowMs);
  }

  /** In the one trail with the account entries, as in Redis's global one; no account filter finds it. */
  async appendOperatorAudit(entry: OperatorAuditEntryInput, nowMs: number): Promise<void> {
    this.appendToTrail(entry, nowMs);
  }

  readAudit(options: AccountAuditQuery): Promise<AuditPage<AuditEntry>>;
  readAudit(options: AuditQuery): Promise<AuditPage<AuditTrailEntry>>;
  async readAudit(options: AuditQuery): Promise<AuditPage<AuditTrailEntry>> {
    // `before` is a position, like XREVRANGE's exclusive end: it need not be the id of a kept entry.
    const before = options.before === undefined ? undefined : parseStreamId(options.before);
    const older = this.audit.filter(
      (entry) =>
        (before === undefined || compareStreamIds(parseStreamId(entry.id), before) < 0) &&
        (options.accountId === undefined || entry.accountId === options.accountId),
    );
    const entries = older.slice(-options.limit).reverse();
    return { entries: structuredClone(entries), next: entries.length === options.limit ? (entries.at(-1)?.id ?? null) : null };
  }

  private appendToTrail(entry: AuditEntryInput | OperatorAuditEntryInput, nowMs: number): void {
    this.lastAuditId = nextStreamId(this.lastAuditId, nowMs);
    const id = `${this.lastAuditId.ms}-${this.lastAuditId.sequence}`;
    this.audit.push({ id, time: new Date(nowMs).toISOString(), ...structuredClone(entry) });
    if (this.audit.length > AUDIT_MAX_ENTRIES) this.audit.shift();
  }

  async addMember(member: Member, events?: readonly OutboxEvent[]): Promise<AddMemberResult> {
    if (!this.accounts.has(member.accountId)) return { kind: 'account_not_found' };
    const members = this.membersOf(member.accountId);
    const existing = this.withPrincipal(member.accountId, member.principal);
    // The same add repeated (a lost reply retried) answers as the first did.
    if (existing?.id === member.id) return { kind: 'added', member: structuredClone(existing) };
    if (existing) return { kind: 'already_member', member: structuredClone(existing) };
    if (members.size >= MAX_MEMBERS_PER_ACCOUNT) return { kind: 'member_limit_reached', limit: MAX_MEMBERS_PER_ACCOUNT };
    members.set(member.id, structuredClone(member));
    this.webhooks.appendEventsNow(member.accountId, events);
    return { kind: 'added', member: structuredClone(member) };
  }

  async listMembers(accountId: string): Promise<Member[] | null> {
    if (!this.accounts.has(accountId)) return null;
    return [...this.membersOf(accountId).values()]
      .sort((a, b) => compareCodeUnits(a.addedAt, b.addedAt) || compareCodeUnits(a.id, b.id))
      .map((member) => structuredClone(member));
  }

  async getMember(accountId: string, memberId: string): Promise<Member | null> {
    const member = this.members.get(accountId)?.get(memberId);
    return member ? structuredClone(member) : null;
  }

  async findMember(accountId: string, principal: MemberPrincipal): Promise<Member | null> {
    const member = this.withPrincipal(accountId, principal);
    return member ? structuredClone(member) : null;
  }

  async changeMemberRole(accountId: string, memberId: string, role: MemberRole): Promise<MemberChangeResult> {
    const members = this.members.get(accountId);
    const member = members?.get(memberId);
    if (!members || !member) return { kind: 'member_not_found' };
    if (leavesNoOwner([...members.values()], memberId, role)) return { kind: 'last_owner' };
    member.role = role;
    return { kind: 'changed', member: structuredClone(member) };
  }

  async removeMember(accountId: string, memberId: string, events?: readonly OutboxEvent[]): Promise<MemberChangeResult> {
    const members = this.members.get(accountId);
    const member = members?.get(memberId);
    if (!members || !member) return { kind: 'member_not_found' };
    if (leavesNoOwner([...members.values()], memberId, null)) return { kind: 'last_owner' };
    members.delete(memberId);
    this.webhooks.appendEventsNow(accountId, events);
    return { kind: 'changed', member: structuredClone(member) };
  }

  async bindInvitations(identity: CustomerIdentity, nowMs: number): Promise<InvitationBinding[]> {
    if (identity.verifiedEmail === undefined) return [];
    const invitation: MemberPrincipal = { kind: 'invitation', email: normalizeEmail(identity.verifiedEmail) };
    const self: MemberPrincipal = { kind: 'identity', issuer: identity.issuer, subject: identity.subject };
    const bindings: InvitationBinding[] = [];
    for (const accountId of [...this.members.keys()].sort(compareCodeUnits)) {
      const invited = this.withPrincipal(accountId, invitation);
      if (!invited) continue;
      const existing = this.withPrincipal(accountId, self);
      if (existing) {
        this.membersOf(accountId).delete(invited.id);
        bindings.push({ kind: 'dropped', invitation: structuredClone(invited), existing: structuredClone(existing) });
        continue;
      }
      invited.principal = self;
      invited.joinedAt = new Date(nowMs).toISOString();
      bindings.push({ kind: 'bound', member: structuredClone(invited) });
    }
    return bindings;
  }

  async accountsOf(identity: Pick<CustomerIdentity, 'issuer' | 'subject'>): Promise<Membership[]> {
    const self: MemberPrincipal = { kind: 'identity', issuer: identity.issuer, subject: identity.subject };
    return [...this.members.keys()].sort(compareCodeUnits).flatMap((accountId) => {
      const member = this.withPrincipal(accountId, self);
      return member ? [{ accountId, role: member.role }] : [];
    });
  }

  async applyUsage(record: UsageRecord, budgets: TokenBudgetPlan): Promise<UsageApplyOutcome> {
    const nowMs = this.clock.now();
    dropExpired(this.usageApplied, nowMs);
    const marker = `${record.accountId} ${record.requestId}`;
    const first = this.usageApplied.get(marker);
    if (first) return { kind: 'duplicate', ...first.value };
    // The answer came: its hold gives way to the real cost, applied below.
    if (record.hold) this.releaseHoldNow(record.accountId, record.keyId, record.requestId, record.hold, nowMs);
    const account = this.accounts.get(record.accountId);
    if (!account) return { kind: 'account_not_found' };
    const storedKey = this.keys.get(record.keyId);
    const key = storedKey?.accountId === record.accountId ? storedKey : null;
    const buckets = this.buckets.get(record.accountId) ?? new Map<string, Bucket>();
    this.sweepUsage(account, buckets, nowMs);
    const month = usageMonthOf(record.atMs);
    const keySpend = this.keySpend.get(record.accountId) ?? new Map<string, number>();
    const tokenBuckets = new Map<string, TokenBucket>();
    for (const [name, bucket] of buckets) {
      if (bucket.expiresAtMs > nowMs) tokenBuckets.set(name, { tatUs: bucket.tatUs, fraction: bucket.fraction ?? 0 });
    }
    const writes = applyUsageToAccountState(
      {
        account,
        key,
        buckets: tokenBuckets,
        accountMonthSpend: account.monthlySpend?.[month] ?? 0,
        keyMonthSpend: keySpend.get(`${record.keyId} ${month}`) ?? 0,
      },
      record,
      nowMs * 1000,
      budgets,
    );
    if (writes.creditBalance !== undefined && account.creditBalance !== undefined) {
      // The balance's crossings go to the webhook outbox in this same step, as the Redis usage script appends them.
      const threshold = this.webhooks.creditLowThresholdNow(record.accountId);
      const crossings = creditCrossings(record.accountId, record.requestId, nowMs, account.creditBalance, writes.creditBalance, threshold);
      this.webhooks.appendEventsNow(record.accountId, crossings);
    }
    if (writes.creditBalance !== undefined) account.creditBalance = writes.creditBalance;
    // Monthly spend caps reached by this record: budget.reached, in this same step (as lua/apply-usage.lua).
    const reached = [
      {
        cap: account.monthlySpendCap,
        before: account.monthlySpend?.[month] ?? 0,
        after: writes.accountMonthSpend,
        scope: { kind: 'account' as const },
      },
      {
        cap: key?.monthlySpendCap,
        before: keySpend.get(`${record.keyId} ${month}`) ?? 0,
        after: writes.keyMonthSpend,
        scope: { kind: 'key' as const, keyId: record.keyId },
      },
    ].filter(({ cap, before, after }) => cap !== undefined && before < cap && after >= cap);
    this.webhooks.appendEventsNow(
      record.accountId,
      reached.map(({ cap, after, scope }) => budgetReachedEvent(record.accountId, record.requestId, nowMs, scope, cap!, after)),
    );
    if (writes.creditShortfall > 0) {
      account.creditShortfall = Math.min((account.creditShortfall ?? 0) + writes.creditShortfall, MAX_CREDIT_SHORTFALL);
    }
    account.monthlySpend = { ...account.monthlySpend, [month]: writes.accountMonthSpend };
    keySpend.set(`${record.keyId} ${month}`, writes.keyMonthSpend);
    this.keySpend.set(record.accountId, keySpend);
    const notices = this.tokenBudgetNotices.get(record.accountId) ?? new Map<string, number>();
    for (const write of writes.buckets) {
      buckets.set(write.bucket, { tatUs: write.tatUs, fraction: write.fraction, expiresAtMs: nowMs + write.ttlMs });
      // A token budget exhausted by this record: budget.reached in this same step, at most once per budget per window.
      if (!write.reached || !this.webhooks.hasEndpoints(record.accountId) || (notices.get(write.bucket) ?? 0) > nowMs * 1000) continue;
      notices.set(write.bucket, nowMs * 1000 + write.budget.windowSeconds * 1_000_000);
      const scope =
        write.scope === 'key'
          ? { kind: 'key' as const, keyId: record.keyId, ...(key ? { keyPrefix: key.prefix } : {}) }
          : { kind: 'account' as const };
      this.webhooks.appendEventsNow(record.accountId, [
        tokenBudgetReachedEvent(record.accountId, record.requestId, nowMs, scope, write.budget),
      ]);
    }
    if (notices.size > 0) this.tokenBudgetNotices.set(record.accountId, notices);
    if (buckets.size > 0) this.buckets.set(record.accountId, buckets);
    const applied = { billing: writes.billing, creditShortfall: writes.creditShortfall };
    this.usageApplied.set(marker, { value: applied, expiresAtMs: nowMs + USAGE_MARKER_TTL_MS });
    for (const granularity of ['hour', 'day'] as const) this.addToAggregate(record, granularity, nowMs);
    return { kind: 'applied', ...applied };
  }

  readonly streamsOnApply = false;

  /** Nothing here outlives the process, and a crash loses all of it together. */
  async usageDurabilityShortfall(): Promise<string | undefined> {
    return undefined;
  }

  async releaseHold(accountId: string, keyId: string, requestId: string, hold: PlacedHold, attempt?: string): Promise<void> {
    this.releaseHoldNow(accountId, keyId, attempt === undefined ? requestId : `${requestId} ${attempt}`, hold, this.clock.now());
  }

  /** As lib/release-hold.lua: once per release id (the request's, or an attempt's), off the slot the hold was placed in. */
  private releaseHoldNow(accountId: string, keyId: string, releaseId: string, hold: PlacedHold, nowMs: number): void {
    if (hold.minorUnits + hold.tokens === 0) return;
    dropExpired(this.holdsReleased, nowMs);
    const marker = `${accountId} ${releaseId}`;
    if (this.holdsReleased.has(marker)) return;
    this.holdsReleased.set(marker, { value: true, expiresAtMs: nowMs + USAGE_MARKER_TTL_MS });
    const holds = this.holds.get(accountId);
    if (!holds) return;
    releaseFromSlots(holds.account, hold);
    const keySlots = holds.keys.get(keyId);
    if (keySlots) releaseFromSlots(keySlots, hold);
  }

  async appendUsageStream(record: UsageRecord, applied: UsageApplyOutcome): Promise<'appended' | 'duplicate'> {
    const nowMs = this.clock.now();
    dropExpired(this.usageStreamed, nowMs);
    const marker = `${record.accountId} ${record.requestId}`;
    if (this.usageStreamed.has(marker)) return 'duplicate';
    this.lastUsageStreamId = nextStreamId(this.lastUsageStreamId, nowMs);
    const id = `${this.lastUsageStreamId.ms}-${this.lastUsageStreamId.sequence}`;
    this.usageStream.push({ id, fields: Object.fromEntries(usageStreamFields(record, applied)) });
    if (this.usageStream.length > this.usageStreamMaxLength)
      this.usageStream.splice(0, this.usageStream.length - this.usageStreamMaxLength);
    this.usageStreamed.set(marker, { value: id, expiresAtMs: nowMs + USAGE_MARKER_TTL_MS });
    return 'appended';
  }

  async readUsage(query: UsageQuery): Promise<UsageBucket[] | null> {
    if (!this.accounts.has(query.accountId)) return null;
    const nowMs = this.clock.now();
    const buckets: UsageBucket[] = [];
    const size = periodMs(query.granularity);
    for (let start = periodStart(query.fromMs, query.granularity); start < query.toMs; start += size) {
      const stored = this.usageAggregates.get(aggregateName(query.accountId, query.granularity, start));
      const counters = stored && stored.expiresAtMs > nowMs ? Object.fromEntries(stored.value) : {};
      buckets.push(usageBucketOf(start, counters));
    }
    return buckets;
  }

  async readTokenBudgets(keyId: string, plan: TokenBudgetPlan): Promise<TokenBudgetState[] | null> {
    const key = this.keys.get(keyId);
    const account = key && this.accounts.get(key.accountId);
    if (!key || !account) return null;
    const nowMs = this.clock.now();
    const buckets = this.buckets.get(key.accountId);
    const budgets = effectiveTokenBudgets(plan, account.tokenBudgets, key.tokenBudgets);
    return (['key', 'account'] as const).flatMap((scope) =>
      budgets[scope].map((budget) => {
        const bucket = buckets?.get(tokenBucketName(scope, key.id, budget.windowSeconds));
        const stored = bucket && bucket.expiresAtMs > nowMs ? { tatUs: bucket.tatUs, fraction: bucket.fraction ?? 0 } : undefined;
        return tokenBudgetState(scope, stored, nowMs * 1000, budget);
      }),
    );
  }

  async readUsageStream(options: { count: number; after?: string }): Promise<UsageStreamEntry[]> {
    const after = options.after === undefined ? undefined : parseStreamId(options.after);
    const newer =
      after === undefined ? this.usageStream : this.usageStream.filter((entry) => compareStreamIds(parseStreamId(entry.id), after) > 0);
    return structuredClone(newer.slice(0, options.count));
  }

  private addToAggregate(record: UsageRecord, granularity: UsageGranularity, nowMs: number): void {
    const expiresAtMs = bucketExpiresAtMs(record.atMs, granularity);
    // A record older than the bucket's retention adds nothing (Redis would delete the bucket at once).
    if (expiresAtMs <= nowMs) return;
    const name = aggregateName(record.accountId, granularity, periodStart(record.atMs, granularity));
    const stored = this.usageAggregates.get(name);
    const counters = stored && stored.expiresAtMs > nowMs ? stored.value : new Map<string, number>();
    for (const [field, increment] of usageAggregateIncrements(record)) counters.set(field, (counters.get(field) ?? 0) + increment);
    this.usageAggregates.set(name, { value: counters, expiresAtMs });
  }

  /** Before applying, at most once an hour per account: spent token buckets and spend of months before the previous go. */
  private sweepUsage(account: Account, buckets: Map<string, Bucket>, nowMs: number): void {
    const due = this.usageSweepAtMs.get(account.id);
    if (due !== undefined && due > nowMs) return;
    this.usageSweepAtMs.set(account.id, nowMs + USAGE_SWEEP_INTERVAL_MS);
    if (due === undefined) return;
    for (const [name, bucket] of buckets) if (name.startsWith('tb:') && bucket.tatUs <= nowMs * 1000) buckets.delete(name);
    const notices = this.tokenBudgetNotices.get(account.id);
    for (const [name, quietUntilUs] of notices ?? []) if (quietUntilUs <= nowMs * 1000) notices!.delete(name);
    const oldest = previousMonth(usageMonthOf(nowMs));
    if (account.monthlySpend) {
      account.monthlySpend = Object.fromEntries(Object.entries(account.monthlySpend).filter(([month]) => month >= oldest));
    }
    const keySpend = this.keySpend.get(account.id);
    for (const field of keySpend?.keys() ?? []) if (field.slice(field.indexOf(' ') + 1) < oldest) keySpend!.delete(field);
  }

  async ping(): Promise<void> {}

  async close(): Promise<void> {}

  private membersOf(accountId: string): Map<string, Member> {
    let members = this.members.get(accountId);
    if (!members) this.members.set(accountId, (members = new Map<string, Member>()));
    return members;
  }

  private withPrincipal(accountId: string, principal: MemberPrincipal): Member | undefined {
    const wanted = principalKey(principal);
    return [...(this.members.get(accountId)?.values() ?? [])].find((member) => principalKey(member.principal) === wanted);
  }

  /** The cap check of insert and rotate, on the store's clock, as the Redis scripts make it. */
  private capRefusal(accountId: string, operation: 'create' | 'rotate_with_grace'): ActiveKeyCapReached | undefined {
    const nowMs = this.clock.now();
    const maxActiveKeys = this.accounts.get(accountId)?.maxActiveKeys ?? this.defaultMaxActiveKeys;
    let activeKeys = 0;
    for (const key of this.keys.values()) if (key.accountId === accountId && countsTowardCap(key, nowMs)) activeKeys += 1;
    return capRefuses(operation, activeKeys, maxActiveKeys) ? { kind: 'active_key_cap_reached', maxActiveKeys, activeKeys } : undefined;
  }
}
