import type { AuthorizeOutcome } from '../../check/ports';
import type { CreditHold } from '../../accounts/credit-holds';
import type { Account, StoredKey } from '../../keys/key-records';
import type { Member } from '../../accounts/members';
import { limitHit, type LimitState } from '../../accounts/limits/rate-limits';
import type { KeyEnvironment } from '../../keys/customer-key';
import type { UsageApplyOutcome, UsageBilling } from '../../metering/usage-record';
import type { TokenBudgetState } from '../../accounts/limits/token-budgets';
import {
  CorruptRecordError,
  StoreUnavailableError,
  type ActiveKeyCapReached,
  type AddMemberResult,
  type CreditOutcome,
  type CreditResult,
  type MemberChangeResult,
  type RotateKeyResult,
} from '../../ports/store';
import { exactBalance, fieldsOf, parseAccount, parseKey, parseMember } from './redis-records';
import { composeLua } from './lua-source';

/**
 * A Lua script as the store runs it. Each runs atomically on the node that
 * owns its first key; every key a script touches shares the `{acct:ID}` hash
 * tag (src/store/redis/redis-keys.ts builds every key name, the scripts only
 * read them from KEYS and ARGV).
 */
export interface LuaScript<Keys extends readonly string[], Argv extends readonly string[], Reply> {
  /**
   * KEYS, named in order; ioredis is told how many there are. A last name
   * starting with `...` takes any number of keys: the call then starts with
   * the number of keys (see ScriptCommands).
   */
  readonly keys: Keys;
  /** ARGV, named in order; a last name starting with `...` takes all the remaining arguments. */
  readonly argv: Argv;
  readonly lua: string;
  /** Reads the raw reply; anything unexpected is a StoreUnavailableError, never a guess. */
  readonly parseReply: (reply: unknown) => Reply;
}

/** Infers the KEYS and ARGV names as tuples, so that each script's call signature derives from them. */
function script<const Keys extends readonly string[], const Argv extends readonly string[], Reply>(
  definition: LuaScript<Keys, Argv, Reply>,
): LuaScript<Keys, Argv, Reply> {
  return definition;
}

/**
 * A capped write's answer (lua/insert-key.lua, lua/rotate-key.lua) when the account's active keys are not indexed
 * yet: index them, then run it again.
 */
export const ACTIVE_KEYS_NOT_INDEXED = 'active_keys_not_indexed';

/** A script file's text as Redis runs it (includes in place). */
const luaScript = (name: string): string => composeLua(`${name}.lua`).text;

/** Both usage scripts (KEYS tell them apart: the stream and its marker come last). */
const APPLY_USAGE_LUA = luaScript('apply-usage');

/**
 * For the property test that holds the Lua token arithmetic to the BigInt one: the helpers the usage script moves a
 * bucket with (tb_consume), and the Check's count of the tokens not yet refilled (lua/authorize/token-unrefilled.lua,
 * as the authorize script includes it) as tb_unrefilled(debt_us, fraction, tokens, window_s).
 */
export const LUA_TOKEN_BUDGET = `${['lib/divmod.lua', 'lib/token-buckets-of.lua', 'lib/token-consume.lua'].map((file) => composeLua(file).text).join('')}
local function tb_unrefilled(d, fraction, tokens, window_s)
  local floor, u, window_us = math.floor, 0, window_s * 1000000
${composeLua('authorize/token-unrefilled.lua')
  .text.replace(/^(?=.)/gm, '  ')
  .trimEnd()}
  return u
end
`;

/** The keys and fixed arguments both usage scripts begin with (lua/apply-usage.lua reads them by position). */
const APPLY_USAGE_KEYS = [
  'account',
  'keyRecord',
  'appliedMarker',
  'hourAggregate',
  'dayAggregate',
  'holdReleased',
  'webhookOutbox',
  'webhookEndpointState',
  'webhookEndpoints',
] as const;
const APPLY_USAGE_ARGV = [
  'nowUs',
  'markerTtlMs',
  'costMinorUnits',
  'totalTokens',
  'accountSpendField',
  'keySpendField',
  'keyTokenBucketField',
  'accountTokenBucketField',
  'creditLimit',
  'hourExpiresAtMs',
  'dayExpiresAtMs',
  'planKeyBudgetCount',
  'planAccountBudgetCount',
  'requestId',
  'placedHold',
  'keyBucketField',
] as const;

/** Every script, declared once: `defineCommand` registers each under its name, and `ScriptCommands` types it. */
export const REDIS_SCRIPTS = {
  // Create-if-absent in one step so two admins racing on one id cannot overwrite each other.
  gwaCreateAccount: script({
    keys: ['account'],
    argv: ['...accountFields'],
    lua: luaScript('create-account'),
    parseReply: (reply): boolean => reply === 1,
  }),

  // The key record, the account's key set and its active keys change
  // together, and only for an account that exists and is below its
  // active-key cap, counted in the same step. Run again with the same record
  // it finds it written and answers 'created' again (before counting, so the
  // key never counts against itself): a call whose reply was lost can be
  // repeated.
  gwaInsertKey: script({
    keys: ['account', 'keyRecord', 'accountKeys', 'activeKeys', 'webhookOutbox', 'webhookEndpoints'],
    argv: ['nowMsOverride', 'defaultMaxActiveKeys', 'indexedField', 'keyId', 'eventsJson', '...keyFields'],
    lua: luaScript('insert-key'),
    parseReply: parseInsertReply,
  }),

  // Applies a JSON patch to the account; null removes creditBalance, a limits or token budget scope, or the spend cap.
  gwaUpdateAccount: script({
    keys: ['account'],
    argv: ['patchJson'],
    lua: luaScript('update-account'),
    parseReply: (reply): Account | null => (reply ? parseAccount(fieldsOf(reply)) : null),
  }),

  // Adds credit atomically; a post-paid account (no balance) is refused, and so
  // is a result outside ±limit, before anything is written. Balance, amount
  // and limit are at most 2 × 10^15 in size, so the sum is exact in a Lua
  // double; the answer is formatted with %.0f, because tostring() keeps only
  // 14 significant digits.
  //
  // With an idempotency key the marker (KEYS[2]) is written in the same step
  // as the outcome, refusals included, so that a key has one answer: a
  // repeat with the same amount answers 'replayed' with it and another
  // amount 'idempotency_key_reused', writing nothing. The marker holds its
  // own expiry on the store's clock (the tests' override, else Redis TIME)
  // besides its TTL, so the tests' clock expires it as it does the in-memory
  // store's; and the id of the store call that wrote it, so that the store
  // repeating its own call after a lost reply (callUntilAnswered) is told
  // 'ok' (and audits it once), not 'replayed'. An unreadable balance and an
  // unknown account write no marker: nothing was decided.
  gwaAdjustCredit: script({
    keys: ['account', '...idempotencyMarker'],
    argv: ['amount', 'limit', 'nowMsOverride', 'markerTtlMs', 'attemptId'],
    lua: luaScript('adjust-credit'),
    parseReply: parseCreditReply,
  }),

  // Applies a JSON patch to a key record; null removes the limits or token budget override, the expiry or the spend cap.
  gwaUpdateKey: script({
    keys: ['keyRecord', 'account'],
    argv: ['patchJson', 'keyBucketField'],
    lua: luaScript('update-key'),
    parseReply: parseKeyOrNull,
  }),

  // Revokes a key from the next request on; keeps the first revocation time.
  // A revoked key no longer counts toward the account's cap.
  gwaRevokeKey: script({
    keys: ['keyRecord', 'activeKeys', 'webhookOutbox', 'webhookEndpoints'],
    argv: ['nowIso', 'keyId', 'eventsJson'],
    lua: luaScript('revoke-key'),
    parseReply: parseKeyOrNull,
  }),

  // Rotation in one step under the account's tag: the old key is revoked now
  // (or at the end of the grace period) in the same instant the new key's
  // record exists. Its global indexes were written before (see the store). "Now"
  // is Redis's TIME, the clock every Check is decided on (carried by RedisClock;
  // '' = TIME; tests pass an override). The answer carries both records, so nothing is read after
  // the point of no return. The same rotation run again (same new key id, its
  // record present) changes nothing and answers as the first run did: the
  // store repeats a call whose reply was lost, and must learn what happened.
  // A rotation with a grace period counts the account's keys toward its cap
  // (capRefuses: allowed at the cap, not above it); an immediate one never
  // does. The active keys follow: the new key counts, the old one stops
  // counting now or at the end of the grace period.
  gwaRotateKey: script({
    keys: ['oldKeyRecord', 'newKeyRecord', 'accountKeys', 'account', 'activeKeys', 'webhookOutbox', 'webhookEndpoints'],
    argv: ['nowMsOverride', 'graceMs', 'defaultMaxActiveKeys', 'indexedField', 'newKeyId', 'eventsJson', '...newKeyFields'],
    lua: luaScript('rotate-key'),
    parseReply: parseRotateReply,
  }),

  // Adds a batch of an account's key records to its active keys, and with
  // the last batch marks the set complete: done once, for accounts whose
  // keys predate the cap. Until the mark, every write that could make the set
  // wrong keeps it right itself (insertions are refused, rotations and
  // revocations add and remove their keys), so batches need no snapshot.
  gwaIndexActiveKeys: script({
    keys: ['account', 'activeKeys', '...keyRecords'],
    argv: ['indexedField', 'lastBatch'],
    lua: luaScript('index-active-keys'),
    parseReply: (reply): 'indexed' => {
      if (reply === 'indexed') return reply;
      throw new StoreUnavailableError(`unexpected index active keys reply from Redis: ${String(reply)}`);
    },
  }),

  // A member (or invitation) joins an account once per principal, within the
  // member limit. The same add repeated (same member id) answers 'added' as
  // the first run did, so a lost reply can be retried.
  gwaAddMember: script({
    keys: ['account', 'members', 'memberPrincipals', 'webhookOutbox', 'webhookEndpoints'],
    argv: ['memberId', 'principalKey', 'memberJson', 'maxMembers', 'eventsJson'],
    lua: luaScript('add-member'),
    parseReply: parseAddMemberReply,
  }),

  // A role change under the last-owner rule, checked in the same step.
  gwaChangeMemberRole: script({
    keys: ['members'],
    argv: ['memberId', 'role'],
    lua: luaScript('change-member-role'),
    parseReply: parseMemberChangeReply,
  }),

  // Removes a member (or invitation) and its principal entry, under the last-owner rule.
  gwaRemoveMember: script({
    keys: ['members', 'memberPrincipals', 'webhookOutbox', 'webhookEndpoints'],
    argv: ['memberId', 'eventsJson'],
    lua: luaScript('remove-member'),
    parseReply: parseMemberChangeReply,
  }),

  // First sign-in with a verified email: the account's invitation for it
  // becomes the identity's membership (same member id and role). An identity
  // that is already a member keeps its membership, and the invitation goes.
  gwaBindInvitation: script({
    keys: ['members', 'memberPrincipals'],
    argv: ['invitationKey', 'identityKey', 'issuer', 'subject', 'joinedAtIso'],
    lua: luaScript('bind-invitation'),
    parseReply: parseBindReply,
  }),

  // The member with a principal, in one round trip (principal → id → record).
  gwaMemberOf: script({
    keys: ['members', 'memberPrincipals'],
    argv: ['principalKey'],
    lua: luaScript('member-of'),
    parseReply: (reply): Member | null => (reply ? parseMember(reply) : null),
  }),

  // Last use of a batch of keys, keeping the later time; a key that no
  // longer exists is not recreated. One script per batch: per key HMGET, HSET
  // when later, and HINCRBY per count hash; per distinct count hash one
  // PEXPIRE. On a Cluster every key of one call shares a slot (the store
  // groups them by account).
  /**
   * Last-use times and request counts of a batch of keys. KEYS: the batch's
   * marker, then per use its key record, hourly and daily count hashes. ARGV:
   * the marker's and the hashes' lifetimes (ms from now; a bucket whose
   * lifetime is over is not written), then per use its time (ms, ISO),
   * requests and key id. The counts are added only when the marker was not
   * set yet (a batch sent again is counted once); a requests of 0 writes
   * nothing, so a batch without counts needs no marker (ARGV[1] is then 0).
   */
  gwaRecordLastUsed: script({
    keys: ['countedBatch', '...keyRecordsThenHourlyThenDailyCounts'],
    argv: ['markerTtlMs', 'hourlyTtlMs', 'dailyTtlMs', '...atMsAtIsoRequestsKeyId'],
    lua: luaScript('record-last-used'),
    parseReply: (reply): number => (typeof reply === 'number' ? reply : 0),
  }),

  /**
   * One usage record applied to its account, exactly once per request id:
   * mirrors applyUsageToAccountState() in src/accounts/limits/usage-account-state.ts
   * (the in-memory store runs that; the contract suite keeps them equal).
   *
   * Every read and check comes first and every write after, so nothing can
   * fail half-way through the money: a corrupt amount is answered 'corrupt'
   * before anything is written. Then in this order: the account's balance,
   * shortfall, month spend of account and key and token buckets (one HSET),
   * the marker, and last the hour and day aggregates (an aggregate that cannot
   * be written fails the script after the money and the marker are in, so a
   * retry answers 'duplicate' and nothing is counted twice).
   *
   * The account's shortfall stops at 2^53 − 1, as spend does: past it the sum
   * is no longer exact and, once 17 digits long, unreadable, which would hold
   * every later record of the account; each record's own shortfall is exact
   * in its marker and its stream entry, which is what billing reads.
   *
   * The marker holds how the record was billed (`prepaid:<shortfall>`), for
   * the stream entry of a record whose first reply was lost. Token buckets use
   * Redis's clock (the Check's); spend and aggregates the record's own time,
   * so a record applied late still counts in the hour, day and month it
   * happened. A record moves the packed bucket field of each scope with
   * budgets (redisKeys.keyTokenBucketField): the budgets in force first, in
   * their order, then the field's other windows still ahead of now. At most
   * once an hour (usageSweepDueUs) the script sweeps the account before
   * reading what it needs: spent token buckets and spend of
   * months before the previous one.
   * `nowUs` '' means Redis's own TIME.
   */
  gwaApplyUsage: script({
    keys: [...APPLY_USAGE_KEYS],
    argv: [...APPLY_USAGE_ARGV, '...planBudgetsThenAggregateIncrements'],
    lua: APPLY_USAGE_LUA,
    parseReply: parseApplyUsageReply,
  }),

  /**
   * gwaApplyUsage and the record's usage stream entry in the same script, so
   * the debit, the ledger's record and the stream entry are kept or lost
   * together (one MULTI/EXEC in the AOF and to replicas): standalone and
   * Sentinel, where the stream may share a script with any account. The
   * stream key's type is checked before anything is written; the entry goes
   * in right after the marker, before the aggregates, and takes how the
   * record was billed from the script (lua/apply-usage.lua).
   */
  gwaApplyAndStreamUsage: script({
    keys: [...APPLY_USAGE_KEYS, 'stream', 'streamedMarker'],
    argv: [...APPLY_USAGE_ARGV, 'streamMaxLength', 'streamFieldCount', '...streamFieldsThenPlanBudgetsThenAggregateIncrements'],
    lua: APPLY_USAGE_LUA,
    parseReply: parseApplyUsageReply,
  }),

  // The hold of an answer that costs nothing, or of a Check allowed after its deadline (no usage record releases it).
  gwaReleaseHold: script({
    keys: ['account', 'holdReleased'],
    argv: ['keyBucketField', 'placedHold', 'markerTtlMs'],
    lua: luaScript('release-hold'),
    parseReply: (): undefined => undefined,
  }),

  // One usage record appended to the billing stream, exactly once per account
  // and request id; the marker holds the entry id. The stream is trimmed to
  // about maxLength entries (MAXLEN ~, which trims whole macro nodes: cheap).
  gwaAppendUsageStream: script({
    keys: ['stream', 'streamedMarker'],
    argv: ['markerTtlMs', 'maxLength', '...fields'],
    lua: luaScript('append-usage-stream'),
    parseReply: (reply): 'appended' | 'duplicate' => {
      const kind: unknown = Array.isArray(reply) ? (reply as unknown[])[0] : reply;
      if (kind === 'appended' || kind === 'duplicate') return kind;
      throw new StoreUnavailableError(`unexpected usage stream reply from Redis: ${String(kind)}`);
    },
  }),

  // Webhooks (src/ports/webhook-store.ts): the outbox fanned out into one
  // delivery per subscribed endpoint, and the due deliveries leased to the
  // caller, in one step; the reply lists [deliveryId, deliveryJson,
  // endpointJson, failures] per delivery, or 'idle' when nothing is left.
  gwaWebhookClaim: script({
    keys: ['outbox', 'endpoints', 'endpointState', 'deliveries', 'due'],
    argv: ['nowMs', 'leaseMs', 'max', 'fanOutBatch'],
    lua: luaScript('webhook-claim'),
    parseReply: (reply): 'idle' | [string, string, string, string][] => {
      if (reply === 'idle') return reply;
      if (Array.isArray(reply) && reply.every((row) => Array.isArray(row) && row.length === 4 && row.every((v) => typeof v === 'string')))
        return reply as [string, string, string, string][];
      throw new StoreUnavailableError('unexpected webhook claim reply from Redis');
    },
  }),

  // One attempt's outcome: logged (the newest kept), the delivery removed or
  // rescheduled, the endpoint's failures in a row counted, and at the limit
  // the endpoint disabled with its event appended in the same step.
  gwaWebhookSettle: script({
    keys: ['deliveries', 'due', 'endpoints', 'endpointState', 'log', 'outbox'],
    argv: [
      'deliveryId',
      'endpointId',
      'settlement',
      'retryAtMs',
      'nextDeliveryJson',
      'attemptJson',
      'logMaxEntries',
      'disableAfterFailures',
      'disabledReason',
      'disabledEventsJson',
    ],
    lua: luaScript('webhook-settle'),
    parseReply: (reply): boolean => reply === 1,
  }),

  gwaWebhookCreate: script({
    keys: ['account', 'endpoints'],
    argv: ['endpointId', 'configJson', 'maxEndpoints'],
    lua: luaScript('webhook-create'),
    parseReply: (reply): 'created' | 'account_not_found' | { kind: 'endpoint_limit_reached'; limit: number } => {
      const [kind, limit] = Array.isArray(reply) ? (reply as unknown[]) : [];
      if (kind === 'created' || kind === 'account_not_found') return kind;
      if (kind === 'endpoint_limit_reached') return { kind, limit: Number(limit) };
      throw new StoreUnavailableError(`unexpected webhook endpoint reply from Redis: ${String(kind)}`);
    },
  }),

  gwaWebhookUpdate: script({
    keys: ['endpoints', 'endpointState'],
    argv: ['endpointId', 'readJson', 'newJson', 'enabled', 'disabledReason'],
    lua: luaScript('webhook-update'),
    parseReply: (reply): 'changed' | 'conflict' | 'not_found' => {
      if (reply === 'changed' || reply === 'conflict' || reply === 'not_found') return reply;
      throw new StoreUnavailableError(`unexpected webhook endpoint reply from Redis: ${String(reply)}`);
    },
  }),

  // Events no change causes (a test-send).
  gwaWebhookAppend: script({
    keys: ['outbox', 'endpoints'],
    argv: ['eventsJson'],
    lua: luaScript('webhook-append'),
    parseReply: (): undefined => undefined,
  }),
};

type ScriptName = keyof typeof REDIS_SCRIPTS;

/** `['a', 'b']` → `[string, string]`; `['a', '...rest']` → `[string, ...string[]]`. */
type StringsNamed<Names extends readonly string[]> = Names extends readonly [...infer Fixed extends readonly string[], `...${string}`]
  ? [...{ -readonly [I in keyof Fixed]: string }, ...string[]]
  : { -readonly [I in keyof Names]: string };

/** Whether a script takes any number of keys (its last KEYS name starts with `...`). */
export function takesKeyList(definition: LuaScript<readonly string[], readonly string[], unknown>): boolean {
  return definition.keys.at(-1)?.startsWith('...') ?? false;
}

/**
 * The commands `defineCommand` adds to a client: KEYS then ARGV, all strings;
 * the raw reply goes to the script's parseReply. A script with a key list is
 * called with the number of keys first, then the keys, then ARGV.
 */
export type ScriptCommands = {
  [Name in ScriptName]: (typeof REDIS_SCRIPTS)[Name] extends LuaScript<infer Keys, infer Argv, unknown>
    ? Keys extends readonly [...string[], `...${string}`]
      ? (numberOfKeys: number, ...keysThenArgv: string[]) => Promise<unknown>
      : (...args: [...StringsNamed<Keys>, ...StringsNamed<Argv>]) => Promise<unknown>
    : never;
};

/** The refusals the insert and rotate scripts share. */
function capReply(kind: unknown, cap: unknown, counted: unknown): ActiveKeyCapReached | typeof ACTIVE_KEYS_NOT_INDEXED | undefined {
  if (kind === ACTIVE_KEYS_NOT_INDEXED) return ACTIVE_KEYS_NOT_INDEXED;
  if (kind === 'cap_unreadable') throw new CorruptRecordError('account', 'maxActiveKeys is not a number');
  if (kind === 'active_key_cap_reached') return { kind, maxActiveKeys: Number(cap), activeKeys: Number(counted) };
  return undefined;
}

function parseInsertReply(reply: unknown): 'created' | 'account_not_found' | ActiveKeyCapReached | typeof ACTIVE_KEYS_NOT_INDEXED {
  const [kind, cap, counted] = Array.isArray(reply) ? (reply as unknown[]) : [];
  if (kind === 'created' || kind === 'account_not_found') return kind;
  const refusal = capReply(kind, cap, counted);
  if (refusal) return refusal;
  throw new StoreUnavailableError(`unexpected insert key reply from Redis: ${String(kind)}`);
}

function parseAddMemberReply(reply: unknown): AddMemberResult {
  const [kind, second] = Array.isArray(reply) ? (reply as unknown[]) : [];
  switch (kind) {
    case 'added':
    case 'already_member':
      return { kind, member: parseMember(second) };
    case 'account_not_found':
      return { kind };
    case 'member_limit_reached':
      return { kind, limit: Number(second) };
    default:
      throw new StoreUnavailableError(`unexpected add member reply from Redis: ${String(kind)}`);
  }
}

function parseMemberChangeReply(reply: unknown): MemberChangeResult {
  const [kind, json] = Array.isArray(reply) ? (reply as unknown[]) : [];
  if (kind === 'changed') return { kind, member: parseMember(json) };
  if (kind === 'member_not_found' || kind === 'last_owner') return { kind };
  throw new StoreUnavailableError(`unexpected member change reply from Redis: ${String(kind)}`);
}

export type BindReply =
  { kind: 'no_invitation' } | { kind: 'bound'; member: Member } | { kind: 'dropped'; invitation: Member; existing: Member };

function parseBindReply(reply: unknown): BindReply {
  const [kind, first, second] = Array.isArray(reply) ? (reply as unknown[]) : [];
  if (kind === 'no_invitation') return { kind };
  if (kind === 'bound') return { kind, member: parseMember(first) };
  if (kind === 'dropped') return { kind, invitation: parseMember(first), existing: parseMember(second) };
  throw new StoreUnavailableError(`unexpected bind invitation reply from Redis: ${String(kind)}`);
}

function parseKeyOrNull(reply: unknown): StoredKey | null {
  return reply ? parseKey(fieldsOf(reply)) : null;
}

function parseRotateReply(reply: unknown): RotateKeyResult | typeof ACTIVE_KEYS_NOT_INDEXED {
  if (!Array.isArray(reply)) throw new StoreUnavailableError('unexpected rotate reply from Redis');
  const [kind, second, third] = reply as unknown[];
  if (kind === 'rotated') return { kind, oldKey: parseKey(fieldsOf(second)), newKey: parseKey(fieldsOf(third)) };
  const refusal = capReply(kind, second, third);
  if (refusal) return refusal;
  if (kind === 'key_already_rotated' && typeof second === 'string') return { kind, replacedBy: second };
  if (kind === 'key_not_found' || kind === 'key_revoked' || kind === 'key_expired') return { kind };
  throw new StoreUnavailableError(`unexpected rotate reply from Redis: ${String(kind)}`);
}

function parseCreditReply(reply: unknown): CreditResult {
  if (!Array.isArray(reply)) throw new StoreUnavailableError('unexpected credit reply from Redis');
  const [kind, second, third] = reply as unknown[];
  switch (kind) {
    case 'account_not_found':
      return { kind };
    case 'replayed':
      return { kind, first: parseCreditOutcome(second, third) };
    case 'idempotency_key_reused':
      return { kind, amount: exactBalance(second) };
    case 'marker_unreadable':
      // Never guessed: read as absent it could apply the adjustment a second time.
      throw new StoreUnavailableError(`unreadable credit idempotency marker in Redis: '${String(second)}'`);
    default:
      return parseCreditOutcome(kind, second);
  }
}

function parseCreditOutcome(kind: unknown, balance: unknown): CreditOutcome {
  switch (kind) {
    case 'not_prepaid':
      return { kind };
    case 'ok':
    case 'balance_out_of_range':
      return { kind, creditBalance: exactBalance(balance) };
    case 'balance_unreadable':
      // The stored balance itself is bad: nothing was written; the account needs repair.
      throw new CorruptRecordError('account', `creditBalance '${String(balance)}' is not an exact whole number`);
    default:
      throw new StoreUnavailableError(`unexpected credit reply from Redis: ${String(kind)}`);
  }
}

/** A number the script answers: an integer reply, or a numeric string. */
function replyNumber(value: unknown): number {
  const number = typeof value === 'number' ? value : typeof value === 'string' && value !== '' ? Number(value) : Number.NaN;
  if (!Number.isFinite(number)) throw new StoreUnavailableError(`unexpected number in authorize reply from Redis: ${String(value)}`);
  return number;
}

function limitState(reply: readonly unknown[], at: number): LimitState {
  const scope = reply[at];
  if (scope !== 'key' && scope !== 'account') throw new StoreUnavailableError(`unexpected limit scope from Redis: ${String(scope)}`);
  return {
    scope,
    limit: replyNumber(reply[at + 1]),
    windowSeconds: replyNumber(reply[at + 2]),
    remaining: replyNumber(reply[at + 3]),
    resetMs: replyNumber(reply[at + 4]),
  };
}

/** A token budget's state: the fields of limitState, the limit named `tokens`. */
function budgetState(reply: readonly unknown[], at: number, retryAfterMs: number): TokenBudgetState {
  const { scope, limit, windowSeconds, remaining, resetMs } = limitState(reply, at);
  return { scope, tokens: limit, windowSeconds, remaining, resetMs, retryAfterMs };
}

/**
 * The authorize script's reply. An allow names what it held in its kind ('allow' nothing, 'allow:m' money, 'allow:t'
 * tokens, 'allow:mt' both): with the request's hold and the slot it was sent in, that is the PlacedHold metering
 * releases.
 */
export function parseAuthorizeReply(reply: unknown, hold?: CreditHold, slot?: number): AuthorizeOutcome {
  if (!Array.isArray(reply)) throw new StoreUnavailableError('unexpected authorize reply from Redis');
  const kind: unknown = reply[0];
  const prefix = typeof reply[1] === 'string' ? reply[1] : '';
  switch (kind) {
    case 'unknown_key':
      return { kind };
    case 'key_revoked':
    case 'key_expired':
    case 'account_suspended':
    case 'credit_exhausted':
    case 'restricted':
      return { kind, prefix };
    case 'restrictions_changed':
      return { kind, prefix, keyText: String(reply[2] ?? ''), accountText: String(reply[3] ?? '') };
    case 'rate_limited':
      return { kind, prefix, hit: limitHit(limitState(reply, 2), replyNumber(reply[7])) };
    case 'budget_exceeded': {
      const scope: unknown = reply[2];
      if (scope !== 'key' && scope !== 'account') throw new StoreUnavailableError(`unexpected cap scope from Redis: ${String(scope)}`);
      return { kind, prefix, scope, cap: replyNumber(reply[3]) };
    }
    case 'token_budget_exhausted':
      return { kind, prefix, budget: budgetState(reply, 2, replyNumber(reply[7])) };
    case 'allow':
    case 'allow:m':
    case 'allow:t':
    case 'allow:mt': {
      const environment = reply[2] as KeyEnvironment;
      // After the environment: the tightest limit (starting with its scope), then 'tokens' and the tightest budget; each optional.
      const tokensAt = reply.indexOf('tokens', 3);
      const tightest = reply.length > 3 && tokensAt !== 3 ? { tightest: limitState(reply, 3) } : {};
      const tightestBudget = tokensAt > 0 ? { tightestBudget: budgetState(reply, tokensAt + 1, 0) } : {};
      if (kind === 'allow') return { kind, prefix, environment, ...tightest, ...tightestBudget };
      if (hold === undefined || slot === undefined)
        throw new StoreUnavailableError(`unexpected authorize reply from Redis: ${kind} without a hold`);
      const held = { slot, minorUnits: kind === 'allow:t' ? 0 : hold.minorUnits, tokens: kind === 'allow:m' ? 0 : hold.tokens };
      return { kind: 'allow', prefix, environment, ...tightest, ...tightestBudget, held };
    }
    default:
      throw new StoreUnavailableError(`unexpected authorize reply from Redis: ${String(kind)}`);
  }
}

/** `prepaid:0` → what the first application did. */
function parseBilling(text: unknown): { billing: UsageBilling; creditShortfall: number } {
  const [billing, shortfall] = String(text).split(':');
  if ((billing !== 'prepaid' && billing !== 'postpaid') || !/^[0-9]+$/.test(shortfall ?? '')) {
    throw new StoreUnavailableError(`unexpected usage marker in Redis: ${String(text)}`);
  }
  return { billing, creditShortfall: Number(shortfall) };
}

function parseApplyUsageReply(reply: unknown): UsageApplyOutcome {
  if (!Array.isArray(reply)) throw new StoreUnavailableError('unexpected usage reply from Redis');
  const [kind, second, third] = reply as unknown[];
  switch (kind) {
    case 'applied':
    case 'duplicate':
      return { kind, ...parseBilling(second) };
    case 'account_not_found':
      return { kind };
    case 'corrupt':
      // Nothing was written; the account needs repair before this record can be applied.
      throw new CorruptRecordError('account', `${String(second)} '${String(third)}' is not an exact whole number`);
    case 'wrong_type':
      // Nothing was written: the stream key holds something else, and the record waits until it is repaired.
      throw new CorruptRecordError('usage stream', `${String(second)} is a ${String(third)}, not a stream`);
    default:
      throw new StoreUnavailableError(`unexpected usage reply from Redis: ${String(kind)}`);
  }
}
