import type { Account, AccountStatus, ExposedKeyAction, KeyIds, StoredKey } from '../keys/key-records';
import type { KeyRestrictions } from '../keys/key-restrictions';
import type { PlacedHold } from '../accounts/credit-holds';
import type { Authorizer, KeyIndex } from '../check/ports';
import type { AuditActor, CustomerIdentity, MemberRole, Membership } from '../accounts/customer-identity';
import type { Member, MemberPrincipal } from '../accounts/members';
import type { RateLimit } from '../accounts/limits/rate-limits';
import type { TokenBudget, TokenBudgetPlan, TokenBudgetState } from '../accounts/limits/token-budgets';
import type { UsageGranularity } from '../metering/usage-periods';
import type { UsageApplyOutcome, UsageRecord, UsageTotals } from '../metering/usage-record';
import type { OutboxEvent, WebhookStore } from './webhook-store';

// The adapter side of storage. The pipeline sees only `KeyIndex` and
// `Authorizer` (src/check/ports.ts); the admin API sees
// `AdminStore`; the last-used batcher sees `LastUsedSink`; the usage
// recorder sees `UsageLedger`, the usage API `UsageReader`. Both
// implementations (Redis, in-memory) pass the same contract tests in
// test/store/.

export interface AccountPatch {
  name?: string;
  status?: AccountStatus;
  /** null makes the account post-paid. */
  creditBalance?: number | null;
  /** null for a scope removes the override. */
  limits?: { key?: readonly RateLimit[] | null; account?: readonly RateLimit[] | null };
  /** null removes the account's own cap (the service default applies). */
  maxActiveKeys?: number | null;
  /** null for a scope removes the override. */
  tokenBudgets?: { key?: readonly TokenBudget[] | null; account?: readonly TokenBudget[] | null };
  /** Integer minor units per UTC month; null removes the cap. */
  monthlySpendCap?: number | null;
  /** The defaults every key of the account is restricted by; null removes them. */
  keyRestrictions?: KeyRestrictions | null;
  /** null: the default (revoke) applies again. */
  exposedKeyAction?: ExposedKeyAction | null;
}

export interface KeyPatch {
  name?: string;
  /** null removes the per-key override. */
  limits?: readonly RateLimit[] | null;
  /** ISO-8601; null removes the expiry. */
  expiresAt?: string | null;
  /** null removes the per-key override. */
  tokenBudgets?: readonly TokenBudget[] | null;
  /** Integer minor units per UTC month; null removes the cap. */
  monthlySpendCap?: number | null;
  /** null removes them: the key may do whatever its account's defaults allow. */
  restrictions?: KeyRestrictions | null;
}

export interface RotateKeyRequest {
  oldKeyId: string;
  /** The replacement, already built by src/keys/key-minting.ts (with what a successor inherits). */
  newKeyHash: string;
  newKey: StoredKey;
  /**
   * 0 revokes the old key at once; otherwise it keeps working until now + grace.
   * "Now" is the store's clock (Redis TIME), the one every Check is decided on,
   * never the clock of the replica that serves the admin call.
   */
  graceSeconds: number;
  /** Appended to the account's webhook outbox in the same step, if the rotation is applied (not by a repeat). */
  events?: readonly OutboxEvent[];
}

/** A key write refused by the account's active-key cap (src/keys/active-key-cap.ts); nothing was written. */
export interface ActiveKeyCapReached {
  kind: 'active_key_cap_reached';
  /** The cap that applied: the account's own, else the store's default. */
  maxActiveKeys: number;
  /** Keys that counted toward it at that instant. */
  activeKeys: number;
}

export type InsertKeyResult = 'created' | 'account_not_found' | ActiveKeyCapReached;

export type RotateKeyResult =
  | { kind: 'rotated'; oldKey: StoredKey; newKey: StoredKey }
  | { kind: 'key_not_found' }
  | { kind: 'key_revoked' }
  | { kind: 'key_expired' }
  | { kind: 'key_already_rotated'; replacedBy: string }
  | ActiveKeyCapReached;

export interface LastUse extends KeyIds {
  atMs: number;
  /** Requests allowed with the key since the previous batch, all in the batch's hour (0 or absent: none counted). */
  requests?: number;
}

/** What a batch of last uses with request counts carries besides the uses. */
export interface CountedBatch {
  /** Unique to this batch: sent again after a failure, it keeps its id, and the store counts it once. */
  readonly id: string;
  /** The UTC hour every count of the batch fell in (src/keys/request-counts.ts). */
  readonly hourStartMs: number;
}

/** Request counts of one bucket: key id → requests. */
export type RequestCountsByKey = Record<string, number>;

/** Changes to one account: written to its own trail and to the global one. */
export type AccountAuditAction =
  | 'account.create'
  | 'account.update'
  | 'account.credit'
  | 'key.create'
  | 'key.update'
  | 'key.rotate'
  | 'key.revoke'
  | 'key.exposed'
  | 'member.add'
  | 'member.update'
  | 'member.remove'
  | 'member.bind'
  | 'webhook.create'
  | 'webhook.update'
  | 'webhook.delete'
  | 'webhook.rotate_secret';

/** Changes to the operators themselves, tied to no account: written to the global trail only. */
export type OperatorAuditAction = 'operator_token.create' | 'operator_token.revoke';

export type AuditAction = AccountAuditAction | OperatorAuditAction;

export interface AuditEntryInput {
  action: AccountAuditAction;
  accountId: string;
  /** Who made the change. Entries written before this was recorded read as the operator (only the admin API wrote then). */
  actor: AuditActor;
  keyId?: string;
  memberId?: string;
  /** A webhook endpoint (src/webhooks). */
  endpointId?: string;
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

/** An operator-level change: no account, the operator token it made or revoked (its id and name, never the token or its hash). */
export interface OperatorAuditEntryInput {
  action: OperatorAuditAction;
  /** Always an operator: only the admin API makes these changes. */
  actor: AuditActor;
  operatorTokenId: string;
  operatorTokenName: string;
  /** Short, secret-free facts, e.g. "scopes=keys:read,keys:write expiresAt=…". */
  detail?: string;
  // None of an account entry's targets, so any entry of the global trail reads `entry.accountId` (undefined here).
  accountId?: never;
  keyId?: never;
  keyPrefix?: never;
  memberId?: never;
  endpointId?: never;
}

export interface OperatorAuditEntry extends OperatorAuditEntryInput {
  /** Opaque, ordered: a position in the global trail, as an account entry's. */
  id: string;
  /** ISO-8601. */
  time: string;
}

/** An entry of the global trail: an account's change, or an operator-level one (which has no accountId). */
export type AuditTrailEntry = AuditEntry | OperatorAuditEntry;

export function isOperatorAuditEntry(entry: AuditTrailEntry): entry is OperatorAuditEntry {
  return entry.accountId === undefined;
}

export interface AuditQuery {
  limit: number;
  before?: string;
  accountId?: string;
}
export type AccountAuditQuery = AuditQuery & { accountId: string };
export interface AuditPage<Entry> {
  entries: Entry[];
  next: string | null;
}

/** What a credit adjustment did; with an idempotency key, what its key answers from then on. */
export type CreditOutcome =
  | { kind: 'ok'; creditBalance: number }
  | { kind: 'not_prepaid' }
  /** The result would leave ±CREDIT_LIMIT_MINOR_UNITS; nothing was written. `creditBalance` is the unchanged balance. */
  | { kind: 'balance_out_of_range'; creditBalance: number };

export type CreditResult =
  | CreditOutcome
  /** Nothing was written and no idempotency key kept: nothing was decided, so the key still applies once the account exists. */
  | { kind: 'account_not_found' }
  /** The key was used before (within CREDIT_IDEMPOTENCY_TTL_MS) with the same amount: nothing was written; `first` is what that call did. */
  | { kind: 'replayed'; first: CreditOutcome }
  /** The key was used before with another amount (`amount`, the first one): nothing was written. */
  | { kind: 'idempotency_key_reused'; amount: number };

/** A record a listing skipped because it cannot be read: which one, and what is wrong with it. */
export interface UnreadableRecord {
  id: string;
  problem: string;
}

export interface AccountListing {
  /** Ordered by id (code units). */
  accounts: Account[];
  /** One bad record never hides the good ones: it is named here instead. */
  unreadable: UnreadableRecord[];
}

export type AddMemberResult =
  | { kind: 'added'; member: Member }
  | { kind: 'account_not_found' }
  /** The principal is already a member (or invited) on this account; nothing changed. */
  | { kind: 'already_member'; member: Member }
  | { kind: 'member_limit_reached'; limit: number };

export type MemberChangeResult =
  | { kind: 'changed'; member: Member }
  | { kind: 'member_not_found' }
  /** The change would leave an account that has an owner without one (src/accounts/members.ts); nothing changed. */
  | { kind: 'last_owner' };

/** What signing in did to one pending invitation for the person's verified email. */
export type InvitationBinding =
  /** The invitation is now this identity's membership, with the invited role. */
  | { kind: 'bound'; member: Member }
  /** The identity was already a member of that account: its membership is kept as it is and the invitation removed. */
  | { kind: 'dropped'; invitation: Member; existing: Member };

/**
 * Account members and email invitations. Writes are atomic per account
 * (the last-owner rule and the member limit are checked in the same step as
 * the write); the index from a person to their accounts is global and
 * verified against the account on every read.
 */
export interface MemberStore {
  /** `events` go to the account's webhook outbox in the same step, only when the member is added (not by a repeat). */
  addMember(member: Member, events?: readonly OutboxEvent[]): Promise<AddMemberResult>;
  /** Null when the account does not exist. Ordered by when they were added, then id. */
  listMembers(accountId: string): Promise<Member[] | null>;
  getMember(accountId: string, memberId: string): Promise<Member | null>;
  /** The member (or invitation) of this account with this principal, or null. */
  findMember(accountId: string, principal: MemberPrincipal): Promise<Member | null>;
  changeMemberRole(accountId: string, memberId: string, role: MemberRole): Promise<MemberChangeResult>;
  /** `events` go to the account's webhook outbox in the same step, only when the member is removed. */
  removeMember(accountId: string, memberId: string, events?: readonly OutboxEvent[]): Promise<MemberChangeResult>;
  /** Binds every pending invitation for the identity's verified email (none without one) to the identity. */
  bindInvitations(identity: CustomerIdentity, nowMs: number): Promise<InvitationBinding[]>;
  /** The accounts the identity is a member of (bound memberships only), ordered by account id. Binds nothing. */
  accountsOf(identity: Pick<CustomerIdentity, 'issuer' | 'subject'>): Promise<Membership[]>;
}

export interface AdminStore extends MemberStore {
  /** Webhook endpoints, the outbox and its deliveries (src/ports/webhook-store.ts). */
  readonly webhooks: WebhookStore;
  /** False when an account with this id already exists (nothing is changed then). */
  createAccount(account: Account): Promise<boolean>;
  getAccount(accountId: string): Promise<Account | null>;
  /** Null when the account does not exist. Takes effect on the next request on every replica. */
  updateAccount(accountId: string, patch: AccountPatch): Promise<Account | null>;
  /**
   * Adds (or with a negative amount, debits) prepaid credit atomically. The
   * amount is within ±CREDIT_LIMIT_MINOR_UNITS; a result outside those bounds
   * is refused before anything is written.
   *
   * With an idempotency key (src/accounts/credit.ts idempotencyKeyProblem), the
   * outcome and a marker of the account holding the amount and that outcome
   * are written in the same atomic step, refusals (not_prepaid,
   * balance_out_of_range) included: for CREDIT_IDEMPOTENCY_TTL_MS the key
   * then answers 'replayed' with that outcome (same amount) or
   * 'idempotency_key_reused' (another amount), and writes nothing. A call
   * whose reply was lost may be repeated with the same key: the store itself
   * does so, and answers its own first application as applied, not replayed.
   */
  adjustCredit(accountId: string, amount: number, idempotencyKey?: string): Promise<CreditResult>;
  /**
   * True for exactly one caller per idempotency key of an account within
   * CREDIT_IDEMPOTENCY_TTL_MS: the one that writes the audit entry of the
   * adjustment the key applied. The call that applied it usually gets it;
   * when every reply of that call was lost (its caller answered 503 and wrote
   * nothing), the repeat that finds the adjustment applied gets it instead,
   * so an applied adjustment is never left out of the audit trail.
   */
  claimCreditAudit(accountId: string, idempotencyKey: string): Promise<boolean>;
  /**
   * Stores the key under its hash, atomically with the account's key index.
   * The global indexes are written first and the record last, so a failure
   * at any point leaves no usable key and nothing a retry trips over. The same
   * insert repeated answers 'created' again and changes nothing. Refused
   * (nothing written) when the account already holds as many active keys as
   * its cap, counted in the same atomic step.
   */
  insertKey(keyHash: string, key: StoredKey, events?: readonly OutboxEvent[]): Promise<InsertKeyResult>;
  getKey(keyId: string): Promise<StoredKey | null>;
  /** Null when the key does not exist. */
  updateKey(keyId: string, patch: KeyPatch): Promise<StoredKey | null>;
  listAccounts(): Promise<AccountListing>;
  /** Null when the account does not exist. */
  listKeys(accountId: string): Promise<StoredKey[] | null>;
  /**
   * Writes the new key's global indexes, then in one atomic step stores the new
   * record and marks the old key (revoked now, or at the end of the grace). Any
   * failure leaves the old key working and the rotation safe to retry. The
   * same rotation repeated (same new key id, already applied) changes nothing
   * and answers 'rotated' with both records, as the first run did. A
   * rotation with a grace period is refused above the active-key cap (see
   * capRefuses); an immediate one never is.
   */
  rotateKey(request: RotateKeyRequest): Promise<RotateKeyResult>;
  /**
   * Refused from the next request on; idempotent. Null when the key does not exist. `events` go to the account's
   * webhook outbox in the same step, only when this call revoked it (not when it was revoked already).
   */
  revokeKey(keyId: string, nowMs: number, events?: readonly OutboxEvent[]): Promise<StoredKey | null>;
  appendAudit(entry: AuditEntryInput, nowMs: number): Promise<void>;
  /**
   * An operator-level change (tied to no account), to the global trail only, bounded as it is. Throws when it is not
   * written: the caller writes it before the change takes effect (see src/admin/routes/operator-tokens.ts).
   */
  appendOperatorAudit(entry: OperatorAuditEntryInput, nowMs: number): Promise<void>;
  /**
   * Newest first. `before` is a position: entries strictly older than that id
   * are returned, whether or not an entry with that id exists (it may have been
   * trimmed since the previous page). With `accountId`, only that account's
   * entries, from a trail of its own (its ids are positions in that trail);
   * without, the global trail: every account's entries and the operator-level ones.
   */
  readAudit(options: AccountAuditQuery): Promise<AuditPage<AuditEntry>>;
  readAudit(options: AuditQuery): Promise<AuditPage<AuditTrailEntry>>;
  /** The account's request counts, one record per bucket start given (in that order); buckets past their retention are empty. */
  readRequestCounts(accountId: string, granularity: UsageGranularity, bucketStartsMs: readonly number[]): Promise<RequestCountsByKey[]>;
}

/** Where the last-used batcher writes: a separate, off-hot-path interface. */
export interface LastUsedSink {
  /**
   * Keeps the later time per key; keys that no longer exist are skipped. With
   * `batch`, adds each use's `requests` to the key's hourly and daily buckets,
   * unless a batch with that id was counted already (then only the times are
   * written). Throws when the outcome is not known: the caller sends the same
   * batch again.
   */
  recordLastUsed(uses: readonly LastUse[], batch?: CountedBatch): Promise<void>;
}

/**
 * How long a store remembers that a usage record (account and request id)
 * was applied, and that it was appended to the stream: 24 hours, as Stripe
 * keeps idempotency keys. A record is re-sent only by the recorder of the
 * process that made it, while Redis does not answer; so it counts once unless
 * an outcome-unknown attempt is still being retried 24 h later (Redis
 * unreachable for a day with the process running). See docs/concepts/metering.md.
 */
export const USAGE_MARKER_TTL_MS = 24 * 3_600_000;

/**
 * How long a store remembers a credit adjustment's idempotency key: 24
 * hours, as Stripe keeps its keys and as usage markers are kept. A billing
 * system repeats an adjustment whose answer it lost within minutes; one that
 * repeats it a day later with the same key has it applied again. See
 * docs/concepts/billing-and-limits.md.
 */
export const CREDIT_IDEMPOTENCY_TTL_MS = 24 * 3_600_000;

/** Where the usage recorder writes: both calls are idempotent per record, so a retry after a lost reply is safe. */
export interface UsageLedger {
  /**
   * Applies a record to its account in one atomic step, exactly once per
   * account and request id (for USAGE_MARKER_TTL_MS): the prepaid debit or
   * post-paid spend, the month's spend of account and key, the token budgets
   * that apply (`budgets` is the operator's default plan; account and key
   * overrides are applied by the store), and the hour and day aggregates.
   */
  applyUsage(record: UsageRecord, budgets: TokenBudgetPlan): Promise<UsageApplyOutcome>;
  /**
   * Appends the record to the usage stream for the billing system, exactly
   * once per account and request id (for USAGE_MARKER_TTL_MS), with how it
   * was billed. The second step only where applyUsage does not stream.
   */
  appendUsageStream(record: UsageRecord, applied: UsageApplyOutcome): Promise<'appended' | 'duplicate'>;
  /**
   * Whether applyUsage also appends the stream entry, in the same atomic
   * step, so that the debit, the ledger's record and the entry are kept or
   * lost together (Redis standalone and Sentinel). Not on Redis Cluster,
   * where the one stream cannot share a slot with every account, nor in the
   * in-memory store, which loses everything together anyway.
   */
  readonly streamsOnApply: boolean;
  /**
   * Once the usage writes answered so far are durable as the deployment asks
   * (USAGE_DURABILITY): undefined; otherwise why not, and the recorder keeps
   * their records and sends them again (each write is idempotent).
   */
  usageDurabilityShortfall(): Promise<string | undefined>;
}

export interface UsageQuery {
  accountId: string;
  granularity: UsageGranularity;
  /** Period starts from `fromMs` (aligned to the granularity) up to, not including, `toMs`. */
  fromMs: number;
  toMs: number;
}

/** One hour or day of an account's usage, by key id and by model ('' for answers that named none). */
export interface UsageBucket {
  startMs: number;
  byKey: Record<string, UsageTotals>;
  byModel: Record<string, UsageTotals>;
}

export interface UsageStreamEntry {
  /** The stream entry id. */
  id: string;
  /** The documented fields (docs/concepts/metering.md), as text. */
  fields: Record<string, string>;
}

/** What the usage API and views read. */
export interface UsageReader {
  /** Every period in the range, oldest first (empty buckets included); null when the account does not exist. */
  readUsage(query: UsageQuery): Promise<UsageBucket[] | null>;
  /** The token budgets that apply to a key, as they stand now; null when the key does not exist. */
  readTokenBudgets(keyId: string, plan: TokenBudgetPlan): Promise<TokenBudgetState[] | null>;
  /** Stream entries after `after` (an entry id; default: from the start), oldest first. */
  readUsageStream(options: { count: number; after?: string }): Promise<UsageStreamEntry[]>;
}

/** Credit holds (src/accounts/credit-holds.ts) of answers that are metered but cost nothing: no usage record releases them. */
export interface HoldReleaser {
  /**
   * Takes a hold its Check placed off the account's and the key's sums, once per request id (a repeat changes
   * nothing); one whose slot has passed is gone already. Changes nothing else. `attempt` names one Check of the
   * request whose allow nobody read (a late or undelivered answer): released once per attempt, so that a Check of the
   * same request made again (Envoy's retry) still has its own hold released by the answer.
   */
  releaseHold(accountId: string, keyId: string, requestId: string, hold: PlacedHold, attempt?: string): Promise<void>;
}

/**
 * A store whose Check can fail at its deadline after its atomic step held (the step ran late): it lets that hold go
 * itself, as the Check was refused, and tells this listener when letting go fails (the hold then lapses).
 */
export interface ReleasesLateHolds {
  reportLateHoldReleaseFailuresTo(report: (error: unknown) => void): void;
}

export function releasesLateHolds(store: object): store is ReleasesLateHolds {
  return typeof (store as Partial<ReleasesLateHolds>).reportLateHoldReleaseFailuresTo === 'function';
}

export interface Store extends KeyIndex, Authorizer, AdminStore, LastUsedSink, UsageLedger, UsageReader, HoldReleaser {
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

/**
 * A write was sent but no answer came back, even after repeating it (the
 * connection dropped, or the deadline passed): it may or may not have been
 * applied. The caller must say so, never "nothing changed".
 */
export class StoreOutcomeUnknownError extends StoreUnavailableError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StoreOutcomeUnknownError';
  }
}

/** One stored record cannot be read (a field is missing or malformed); the rest of the store is fine. */
export class CorruptRecordError extends StoreUnavailableError {
  constructor(
    readonly record: 'account' | 'key' | 'member' | 'usage stream' | 'webhook endpoint',
    /** Which field is wrong, e.g. "creditBalance is not a whole number within ±10^15". */
    readonly problem: string,
  ) {
    super(`corrupt ${record} record: ${problem}`);
    this.name = 'CorruptRecordError';
  }
}
