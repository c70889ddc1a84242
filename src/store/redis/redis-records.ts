import { KEY_ENVIRONMENTS, type KeyEnvironment } from '../../keys/customer-key';
import { MAX_ACTIVE_KEYS_LIMIT } from '../../keys/active-key-cap';
import { MEMBER_ROLES, OPERATOR, type AuditActor, type MemberRole, type OperatorActor } from '../../accounts/customer-identity';
import type { Member, MemberPrincipal } from '../../accounts/members';
import type { RateLimit, RatePlanOverride } from '../../accounts/limits/rate-limits';
import type { TokenBudget, TokenBudgetOverride } from '../../accounts/limits/token-budgets';
import type { TokenBucket } from '../../accounts/limits/token-budget';
import { CorruptRecordError } from '../../ports/store';
import { EXPOSED_KEY_ACTIONS, type Account, type ExposedKeyAction, type StoredKey } from '../../keys/key-records';
import { parseRestrictionsText, restrictionsStamp, restrictionsText, type KeyRestrictions } from '../../keys/key-restrictions';
import { HOLD_SLOTS, type HoldSlots } from '../../accounts/credit-holds';
import { redisKeys } from './redis-keys';

/**
 * Store records ↔ Redis hash fields. Numbers and lists travel as strings and JSON.
 *
 * The fields the authorize script reads on every decision come first (status, prefix, environment of a key; status of
 * an account): Redis finds a field of a small hash by walking its fields in order, so each is found sooner (measured in
 * docs/concepts/key-restrictions.md). Records written in another order read the same, a little slower.
 */

export function keyToFields(key: StoredKey): string[] {
  const fields = [
    'status',
    key.status,
    'prefix',
    key.prefix,
    'environment',
    key.environment,
    'id',
    key.id,
    'accountId',
    key.accountId,
    'name',
    key.name,
    'createdAt',
    key.createdAt,
  ];
  if (key.expiresAt !== undefined) fields.push('expiresAt', key.expiresAt, 'expiresAtMs', String(Date.parse(key.expiresAt)));
  if (key.limits !== undefined) fields.push('limits', JSON.stringify(key.limits));
  if (key.tokenBudgets !== undefined) fields.push(redisKeys.tokenBudgetsField(), JSON.stringify(key.tokenBudgets));
  if (key.monthlySpendCap !== undefined) fields.push(redisKeys.monthlySpendCapField(), String(key.monthlySpendCap));
  if (key.replaces !== undefined) fields.push('replaces', key.replaces);
  if (key.createdBy !== undefined) fields.push('createdBy', JSON.stringify(key.createdBy));
  if (key.restrictions !== undefined) fields.push(...restrictionsFields(key.restrictions));
  return fields;
}

export function accountToFields(account: Account): string[] {
  const fields = ['status', account.status, 'id', account.id, 'name', account.name, 'createdAt', account.createdAt];
  if (account.creditBalance !== undefined) fields.push('creditBalance', String(account.creditBalance));
  if (account.limits !== undefined) fields.push('limits', JSON.stringify(account.limits));
  if (account.maxActiveKeys !== undefined) fields.push('maxActiveKeys', String(account.maxActiveKeys));
  if (account.tokenBudgets !== undefined) fields.push(redisKeys.tokenBudgetsField(), JSON.stringify(account.tokenBudgets));
  if (account.monthlySpendCap !== undefined) fields.push(redisKeys.monthlySpendCapField(), String(account.monthlySpendCap));
  if (account.keyRestrictions !== undefined) fields.push(...restrictionsFields(account.keyRestrictions));
  if (account.exposedKeyAction !== undefined) fields.push('exposedKeyAction', account.exposedKeyAction);
  return fields;
}

/** The text and its stamp, always written together (redisKeys.restrictionsStampField). */
export function restrictionsFields(restrictions: KeyRestrictions): [string, string, string, string] {
  const text = restrictionsText(restrictions);
  return [redisKeys.restrictionsField(), text, redisKeys.restrictionsStampField(), restrictionsStamp(text)];
}

type RecordKind = CorruptRecordError['record'];

function storedRestrictions(fields: Record<string, string>, what: RecordKind): KeyRestrictions | undefined {
  try {
    return parseRestrictionsText(fields[redisKeys.restrictionsField()] ?? '');
  } catch (error) {
    throw new CorruptRecordError(what, (error as Error).message);
  }
}

const isText = (value: unknown): value is string => typeof value === 'string' && value !== '';

/** An actor as it is written in key records, member records and audit entries: JSON. */
export function actorToText(actor: AuditActor): string {
  if (actor.kind === 'member') return JSON.stringify({ kind: 'member', issuer: actor.issuer, subject: actor.subject });
  return JSON.stringify(actor.operator ? { kind: 'operator', operator: operatorActorFields(actor.operator) } : { kind: 'operator' });
}

function operatorActorFields(operator: OperatorActor): OperatorActor {
  switch (operator.kind) {
    case 'person':
      return { kind: 'person', issuer: operator.issuer, subject: operator.subject };
    case 'token':
      return { kind: 'token', tokenId: operator.tokenId, name: operator.name };
    case 'break-glass':
      return { kind: 'break-glass' };
    case 'secret-scanning':
      return { kind: 'secret-scanning', reporter: operator.reporter };
  }
}

function parseOperatorActor(value: unknown): OperatorActor | undefined {
  const operator = value as Partial<Record<string, unknown>> | undefined;
  if (operator?.kind === 'break-glass') return { kind: 'break-glass' };
  if (operator?.kind === 'secret-scanning' && operator.reporter === 'github') return { kind: 'secret-scanning', reporter: 'github' };
  if (operator?.kind === 'person' && isText(operator.issuer) && isText(operator.subject)) {
    return { kind: 'person', issuer: operator.issuer, subject: operator.subject };
  }
  if (operator?.kind === 'token' && isText(operator.tokenId) && typeof operator.name === 'string') {
    return { kind: 'token', tokenId: operator.tokenId, name: operator.name };
  }
  return undefined;
}

export function parseActor(value: unknown, what: RecordKind, field: string): AuditActor {
  const actor = (typeof value === 'string' ? safeJson(value) : value) as Partial<Record<string, unknown>> | undefined;
  if (actor?.kind === 'operator' && actor.operator === undefined) return OPERATOR;
  const operator = actor?.kind === 'operator' ? parseOperatorActor(actor.operator) : undefined;
  if (operator) return { kind: 'operator', operator };
  if (actor?.kind === 'member' && isText(actor.issuer) && isText(actor.subject)) {
    return { kind: 'member', issuer: actor.issuer, subject: actor.subject };
  }
  throw new CorruptRecordError(what, `${field} is not an actor ({kind:"operator"} or {kind:"member",issuer,subject})`);
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** A member record as the members hash holds it: the domain record as JSON (the scripts change role and principal in place). */
export function memberToJson(member: Member): string {
  return JSON.stringify(member);
}

/** Checks every field, so a damaged record is named, never taken for a member with some role. */
export function parseMember(json: unknown): Member {
  const raw = (typeof json === 'string' ? safeJson(json) : undefined) as Partial<Record<string, unknown>> | undefined;
  if (!raw || typeof raw !== 'object') throw new CorruptRecordError('member', 'not JSON');
  const { id, accountId, role, addedAt, principal } = raw;
  if (!isText(id) || !isText(accountId) || !isText(addedAt)) throw new CorruptRecordError('member', 'no id, accountId or addedAt');
  if (!MEMBER_ROLES.includes(role as MemberRole)) throw new CorruptRecordError('member', `bad role ${String(role)}`);
  const member: Member = {
    id,
    accountId,
    role: role as MemberRole,
    principal: parsePrincipal(principal),
    addedAt,
    addedBy: parseActor(raw.addedBy, 'member', 'addedBy'),
  };
  if (isText(raw.invitedEmail)) member.invitedEmail = raw.invitedEmail;
  if (isText(raw.joinedAt)) member.joinedAt = raw.joinedAt;
  return member;
}

function parsePrincipal(value: unknown): MemberPrincipal {
  const principal = (value ?? {}) as Partial<Record<string, unknown>>;
  if (principal.kind === 'identity' && isText(principal.issuer) && isText(principal.subject)) {
    return { kind: 'identity', issuer: principal.issuer, subject: principal.subject };
  }
  if (principal.kind === 'invitation' && isText(principal.email)) return { kind: 'invitation', email: principal.email };
  throw new CorruptRecordError('member', 'principal is neither {kind:"identity",issuer,subject} nor {kind:"invitation",email}');
}

/** Balances travel as decimal text; anything that is not an exact whole number is refused, never rounded. */
export function exactBalance(text: unknown): number {
  const balance = typeof text === 'string' && /^-?[0-9]+$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(balance))
    throw new CorruptRecordError(
      'account',
      `creditBalance '${String(text)}' is not a whole number within ±(2^53 - 1), so it cannot be read exactly`,
    );
  return balance;
}

/** HGETALL as an array reply (from scripts) or an object (from ioredis). */
export function fieldsOf(reply: unknown): Record<string, string> {
  if (!Array.isArray(reply)) return (reply ?? {}) as Record<string, string>;
  const fields: Record<string, string> = {};
  for (let i = 0; i + 1 < reply.length; i += 2) fields[String(reply[i])] = String(reply[i + 1]);
  return fields;
}

function required(fields: Record<string, string>, name: string, what: RecordKind): string {
  const value = fields[name];
  if (value === undefined || value === '') throw new CorruptRecordError(what, `no ${name}`);
  return value;
}

function limitList(value: unknown, what: RecordKind): RateLimit[] {
  // Lua's cjson writes an empty list as {}: both mean "no limits".
  if (value && typeof value === 'object' && !Array.isArray(value) && Object.keys(value).length === 0) return [];
  if (!Array.isArray(value)) throw new CorruptRecordError(what, 'limits is not a list of {limit, windowSeconds}');
  return value.map((entry: { limit?: unknown; windowSeconds?: unknown }) => {
    if (typeof entry?.limit !== 'number' || typeof entry?.windowSeconds !== 'number') {
      throw new CorruptRecordError(what, 'limits is not a list of {limit, windowSeconds}');
    }
    return { limit: entry.limit, windowSeconds: entry.windowSeconds };
  });
}

function budgetList(value: unknown, what: RecordKind): TokenBudget[] {
  const problem = 'tokenBudgets is not a list of {tokens, windowSeconds}';
  // Lua's cjson writes an empty list as {}: both mean "no budgets".
  if (value && typeof value === 'object' && !Array.isArray(value) && Object.keys(value).length === 0) return [];
  if (!Array.isArray(value)) throw new CorruptRecordError(what, problem);
  return value.map((entry: { tokens?: unknown; windowSeconds?: unknown }) => {
    if (typeof entry?.tokens !== 'number' || typeof entry?.windowSeconds !== 'number') throw new CorruptRecordError(what, problem);
    return { tokens: entry.tokens, windowSeconds: entry.windowSeconds };
  });
}

function parseJson(text: string, what: RecordKind, field = 'limits'): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new CorruptRecordError(what, `${field} is not JSON`);
  }
}

/** A stored whole number of minor units ≥ 0 (a cap, a spend, a shortfall); anything else is refused, never rounded. */
function wholeAmount(fields: Record<string, string>, name: string, what: RecordKind): number {
  const text = fields[name]!;
  const amount = /^[0-9]{1,16}$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(amount)) throw new CorruptRecordError(what, `${name} '${text}' is not a whole number of minor units`);
  return amount;
}

export function parseKey(fields: Record<string, string>): StoredKey {
  const environment = required(fields, 'environment', 'key');
  const status = required(fields, 'status', 'key');
  if (!KEY_ENVIRONMENTS.includes(environment as KeyEnvironment) || (status !== 'active' && status !== 'revoked')) {
    throw new CorruptRecordError('key', 'bad environment or status');
  }
  const key: StoredKey = {
    id: required(fields, 'id', 'key'),
    accountId: required(fields, 'accountId', 'key'),
    prefix: required(fields, 'prefix', 'key'),
    name: fields.name ?? '',
    environment: environment as KeyEnvironment,
    status,
    createdAt: required(fields, 'createdAt', 'key'),
  };
  if (fields.expiresAt) key.expiresAt = fields.expiresAt;
  if (fields.limits) key.limits = limitList(parseJson(fields.limits, 'key'), 'key');
  const budgets = fields[redisKeys.tokenBudgetsField()];
  if (budgets) key.tokenBudgets = budgetList(parseJson(budgets, 'key', redisKeys.tokenBudgetsField()), 'key');
  if (fields[redisKeys.monthlySpendCapField()] !== undefined)
    key.monthlySpendCap = wholeAmount(fields, redisKeys.monthlySpendCapField(), 'key');
  for (const optional of ['lastUsedAt', 'revokedAt', 'revokeAt', 'replaces', 'replacedBy'] as const) {
    if (fields[optional]) key[optional] = fields[optional];
  }
  if (fields.createdBy) key.createdBy = parseActor(fields.createdBy, 'key', 'createdBy');
  const restrictions = storedRestrictions(fields, 'key');
  if (restrictions) key.restrictions = restrictions;
  return key;
}

export function parseAccount(fields: Record<string, string>): Account {
  const status = fields.status ?? 'active';
  if (status !== 'active' && status !== 'suspended') throw new CorruptRecordError('account', 'bad status');
  const account: Account = {
    id: required(fields, 'id', 'account'),
    name: fields.name ?? '',
    status,
    createdAt: required(fields, 'createdAt', 'account'),
  };
  if (fields.creditBalance !== undefined) account.creditBalance = exactBalance(fields.creditBalance);
  if (fields.limits) {
    const raw = parseJson(fields.limits, 'account') as Record<string, unknown>;
    const limits: RatePlanOverride = {
      ...(raw.key !== undefined ? { key: limitList(raw.key, 'account') } : {}),
      ...(raw.account !== undefined ? { account: limitList(raw.account, 'account') } : {}),
    };
    account.limits = limits;
  }
  if (fields.maxActiveKeys !== undefined) {
    const cap = /^[0-9]{1,9}$/.test(fields.maxActiveKeys) ? Number(fields.maxActiveKeys) : Number.NaN;
    if (!(cap <= MAX_ACTIVE_KEYS_LIMIT)) {
      throw new CorruptRecordError(
        'account',
        `maxActiveKeys '${fields.maxActiveKeys}' is not a whole number from 0 to ${MAX_ACTIVE_KEYS_LIMIT}`,
      );
    }
    account.maxActiveKeys = cap;
  }
  const budgets = fields[redisKeys.tokenBudgetsField()];
  if (budgets) {
    const raw = parseJson(budgets, 'account', redisKeys.tokenBudgetsField()) as Record<string, unknown>;
    const tokenBudgets: TokenBudgetOverride = {
      ...(raw.key !== undefined ? { key: budgetList(raw.key, 'account') } : {}),
      ...(raw.account !== undefined ? { account: budgetList(raw.account, 'account') } : {}),
    };
    account.tokenBudgets = tokenBudgets;
  }
  if (fields[redisKeys.monthlySpendCapField()] !== undefined)
    account.monthlySpendCap = wholeAmount(fields, redisKeys.monthlySpendCapField(), 'account');
  const keyRestrictions = storedRestrictions(fields, 'account');
  if (keyRestrictions) account.keyRestrictions = keyRestrictions;
  if (fields.exposedKeyAction !== undefined) {
    if (!(EXPOSED_KEY_ACTIONS as readonly string[]).includes(fields.exposedKeyAction))
      throw new CorruptRecordError(
        'account',
        `exposedKeyAction '${fields.exposedKeyAction}' is not one of ${EXPOSED_KEY_ACTIONS.join(', ')}`,
      );
    account.exposedKeyAction = fields.exposedKeyAction as ExposedKeyAction;
  }
  if (fields[redisKeys.creditShortfallField()] !== undefined) {
    const shortfall = wholeAmount(fields, redisKeys.creditShortfallField(), 'account');
    if (shortfall > 0) account.creditShortfall = shortfall;
  }
  const spendPrefix = redisKeys.accountSpendField('');
  const monthlySpend: Record<string, number> = {};
  for (const field of Object.keys(fields)) {
    if (field.startsWith(spendPrefix)) monthlySpend[field.slice(spendPrefix.length)] = wholeAmount(fields, field, 'account');
  }
  if (Object.keys(monthlySpend).length > 0) account.monthlySpend = monthlySpend;
  return account;
}

/**
 * A packed token bucket entry (redisKeys.keyTokenBucketField): the window in
 * seconds, the TAT in µs (a whole number, exact in a double below 2^53 µs)
 * and the TAT's fraction of a µs as a numerator over the budget's tokens
 * (below 10^9, MAX_BUDGET_TOKENS: a uint32), as Lua's struct library packs
 * them, little-endian.
 */
export const PACKED_TOKEN_BUCKET_STRUCT = '<I4dI4';
export const PACKED_TOKEN_BUCKET_BYTES = 16;

/**
 * A packed token bucket field as window → bucket; undefined when absent or
 * of a length that is not whole entries. A TAT past 2^53 µs (a debt of
 * centuries, which the usage script writes as the nearest double) reads as
 * 2^53 − 1: exhausted until then, as the Check decides it.
 */
export function parsePackedTokenBuckets(packed: Buffer | null | undefined): Map<number, TokenBucket> | undefined {
  if (!packed || packed.length % PACKED_TOKEN_BUCKET_BYTES !== 0) return undefined;
  const buckets = new Map<number, TokenBucket>();
  for (let at = 0; at < packed.length; at += PACKED_TOKEN_BUCKET_BYTES) {
    const tatUs = Math.min(packed.readDoubleLE(at + 4), Number.MAX_SAFE_INTEGER);
    buckets.set(packed.readUInt32LE(at), { tatUs, fraction: packed.readUInt32LE(at + 12) });
  }
  return buckets;
}

/** Token buckets as the usage script packs them, in the order given: for tests and an operator's tooling. */
export function packTokenBuckets(buckets: readonly (TokenBucket & { windowSeconds: number })[]): Buffer {
  const packed = Buffer.alloc(buckets.length * PACKED_TOKEN_BUCKET_BYTES);
  buckets.forEach((bucket, i) => {
    const at = i * PACKED_TOKEN_BUCKET_BYTES;
    packed.writeUInt32LE(bucket.windowSeconds, at);
    packed.writeDoubleLE(bucket.tatUs, at + 4);
    packed.writeUInt32LE(bucket.fraction, at + 12);
  });
  return packed;
}

/**
 * The sums of the holds in flight of an account or a key (src/accounts/credit-holds.ts HoldSlots), at the end of its
 * rate-limit bucket field (after the windows' PACKED_BUCKET_BYTES each): the slot, then the minor units and tokens
 * held in it and in the slot before, whole numbers exact in doubles. Binary, as the buckets, so a Check neither
 * parses nor formats them as text; 40 bytes, so a field's length tells whether it has them (40 mod 12 = 4).
 */
export const PACKED_HOLD_SLOTS_STRUCT = '<ddddd';
export const PACKED_HOLD_SLOTS_BYTES = 40;

/**
 * A packed rate-limit bucket entry (redisKeys.keyBucketField): the window in
 * seconds and the TAT in µs, a whole number held exactly in a double (below
 * 2^53 µs: the year 2255), as Lua's struct library packs them (little-endian
 * uint32, then double). Binary, so a decision neither parses (strtod) nor
 * formats (sprintf) a number to use it (measured: test/bench/redis-check-path.ts).
 */
export const PACKED_BUCKET_STRUCT = '<I4d';
export const PACKED_BUCKET_BYTES = 12;

/**
 * A packed rate-limit bucket field as windows in order → TAT µs; undefined
 * for a value of another length. For reading Redis from outside the scripts
 * (tests, an operator's tooling).
 */
export function parsePackedBuckets(packed: Buffer | null | undefined): Map<number, number> | undefined {
  if (!packed) return undefined;
  const windowBytes = packed.length % PACKED_BUCKET_BYTES === 0 ? packed.length : packed.length - PACKED_HOLD_SLOTS_BYTES;
  if (windowBytes < 0 || windowBytes % PACKED_BUCKET_BYTES !== 0) return undefined;
  const buckets = new Map<number, number>();
  for (let at = 0; at < windowBytes; at += PACKED_BUCKET_BYTES) buckets.set(packed.readUInt32LE(at), packed.readDoubleLE(at + 4));
  return buckets;
}

/** The holds' sums at the end of a packed bucket field (PACKED_HOLD_SLOTS_STRUCT); undefined when it has none. */
export function parsePackedHoldSlots(packed: Buffer | null | undefined): HoldSlots | undefined {
  if (!packed || packed.length < PACKED_HOLD_SLOTS_BYTES || packed.length % PACKED_BUCKET_BYTES === 0) return undefined;
  const at = packed.length - PACKED_HOLD_SLOTS_BYTES;
  const numbers = Array.from({ length: 1 + 2 * HOLD_SLOTS }, (_, i) => packed.readDoubleLE(at + 8 * i));
  return {
    slot: numbers[0]!,
    money: numbers.filter((_, i) => i % 2 === 1),
    tokens: numbers.filter((_, i) => i > 0 && i % 2 === 0),
  };
}
