import Redis from 'ioredis';
import fc from 'fast-check';
import { ManualClock } from '../../src/platform/clock';
import { CREDIT_LIMIT_MINOR_UNITS, IDEMPOTENCY_KEY_MAX_LENGTH } from '../../src/accounts/credit';
import { MAX_RESPONSE_COST_MINOR_UNITS } from '../../src/metering/price-table';
import {
  MAX_BUDGET_TOKENS,
  MAX_BUDGET_TOKENS_PER_SECOND,
  NO_TOKEN_BUDGETS,
  type TokenBudgetPlan,
} from '../../src/accounts/limits/token-budgets';
import { MAX_TOKEN_COUNT } from '../../src/metering/usage';
import { bucketExpiresAtMs, periodName, usageMonthOf } from '../../src/metering/usage-periods';
import { addUsageTotals, usageRecordProblem, zeroUsageTotals, type UsageRecord } from '../../src/metering/usage-record';
import { MAX_WINDOW_SECONDS } from '../../src/accounts/limits/rate-limit';
import { consumeTokenBudget } from '../../src/accounts/limits/token-budget';
import { LUA_TOKEN_BUDGET } from '../../src/store/redis/scripts';
import { generateCustomerKey, hashCustomerKey } from '../../src/keys/customer-key';
import { restrictionsStamp } from '../../src/keys/key-restrictions';
import type { RatePlan } from '../../src/accounts/limits/rate-limits';
import { MemoryStore } from '../../src/store/memory-store';
import { dayStartOf, HOUR_MS, hourStartOf } from '../../src/keys/request-counts';
import { redisKeys } from '../../src/store/redis/redis-keys';
import { RedisStore } from '../../src/store/redis/redis-store';
import { keyToFields } from '../../src/store/redis/redis-records';
import { CorruptRecordError, CREDIT_IDEMPOTENCY_TTL_MS, USAGE_MARKER_TTL_MS, type Store } from '../../src/ports/store';
import { OPERATOR, type AuditActor, type CustomerIdentity } from '../../src/accounts/customer-identity';
import { MAX_MEMBERS_PER_ACCOUNT, type Member, type MemberPrincipal } from '../../src/accounts/members';
import type { Account, StoredKey } from '../../src/keys/key-records';
import type { AuthorizeOutcome } from '../../src/check/ports';
import { startTestRedisCluster, type TestRedisCluster } from '../support/redis-cluster';
import { startTestRedis, type TestRedis } from '../support/redis-server';

/**
 * One contract, two implementations: the in-memory store (the embedded
 * default) must decide exactly like the Redis store and its Lua script. Both
 * run on an injected clock here, so window math is deterministic.
 */
const T0 = Date.parse('2026-11-22T12:00:00Z');
const NO_LIMITS: RatePlan = { key: [], account: [] };
const perMinute = (limit: number) => ({ limit, windowSeconds: 60 });

let redis: TestRedis;
let cluster: TestRedisCluster;
const opened: Store[] = [];
beforeAll(async () => {
  [redis, cluster] = await Promise.all([startTestRedis(), startTestRedisCluster()]);
});
afterAll(async () => {
  await Promise.all(opened.map((store) => store.close()));
  await Promise.all([redis?.stop(), cluster?.stop()]);
});

/** Store options the contract varies: the active-key cap of accounts without their own (default 50). */
interface ContractOptions {
  defaultMaxActiveKeys?: number;
}

const implementations: [string, (clock: ManualClock, options?: ContractOptions) => Promise<Store>][] = [
  ['memory', async (clock, options = {}) => new MemoryStore(clock, options)],
  [
    'redis',
    async (clock, options = {}) => {
      const store = await RedisStore.connect({ url: redis.url, commandTimeoutMs: 1000, clockOverride: () => clock.now(), ...options });
      opened.push(store);
      return store;
    },
  ],
  [
    // Same layout, unchanged, on a three-master Redis Cluster.
    'redis-cluster',
    async (clock, options = {}) => {
      const nodes = cluster.nodes.split(',').map((node) => ({ host: node.split(':')[0]!, port: Number(node.split(':')[1]) }));
      const store = await RedisStore.connect({
        topology: { mode: 'cluster', nodes },
        commandTimeoutMs: 1000,
        clockOverride: () => clock.now(),
        ...options,
      });
      opened.push(store);
      return store;
    },
  ],
];

let counter = 0;
const unique = (base: string) => `${base}-${process.pid}-${(counter += 1)}-${Math.random().toString(36).slice(2, 8)}`;
const account = (id: string, extra: Partial<Account> = {}): Account => ({
  id,
  name: `Account ${id}`,
  status: 'active',
  createdAt: '2026-11-22T00:00:00.000Z',
  ...extra,
});
const keyRecord = (key: string, accountId: string, extra: Partial<StoredKey> = {}): StoredKey => ({
  id: `key_${hashCustomerKey(key).slice(0, 12)}`,
  accountId,
  prefix: key.slice(0, 12),
  name: 'ci',
  environment: 'live',
  status: 'active',
  createdAt: '2026-11-22T00:00:01.000Z',
  ...extra,
});

describe.each(implementations)('store contract: %s', (_name, open) => {
  let store: Store;
  let clock: ManualClock;
  beforeEach(async () => {
    clock = new ManualClock(T0);
    store = await open(clock);
  });

  /** An account with one key; returns what authorize needs. */
  async function seed(accountExtra: Partial<Account> = {}, keyExtra: Partial<StoredKey> = {}) {
    const accountId = unique('acct');
    await store.createAccount(account(accountId, accountExtra));
    const key = generateCustomerKey('live');
    const record = keyRecord(key, accountId, keyExtra);
    await store.insertKey(hashCustomerKey(key), record);
    return { accountId, keyId: record.id, key, record };
  }
  const authorize = (ids: { accountId: string; keyId: string }, plan: RatePlan = NO_LIMITS) =>
    store.authorize({ accountId: ids.accountId, keyId: ids.keyId, defaultPlan: plan, defaultTokenBudgets: NO_TOKEN_BUDGETS });
  const kinds = async (ids: { accountId: string; keyId: string }, plan: RatePlan, times: number) => {
    const out: string[] = [];
    for (let i = 0; i < times; i += 1) out.push((await authorize(ids, plan)).kind);
    return out;
  };

  describe('accounts and keys', () => {
    it('creates an account once and refuses a second create with the same id', async () => {
      const id = unique('acme');
      expect(await store.createAccount(account(id))).toBe(true);
      expect(await store.createAccount({ ...account(id), name: 'Impostor' })).toBe(false);
      expect(await store.getAccount(id)).toEqual(account(id));
    });

    it('round-trips billing and limit overrides on an account', async () => {
      const id = unique('acme');
      const full = account(id, { creditBalance: 1500, status: 'suspended', limits: { key: [perMinute(5)], account: [] } });
      await store.createAccount(full);
      expect(await store.getAccount(id)).toEqual(full);
    });

    it('returns null for an account or key that does not exist', async () => {
      expect(await store.getAccount(unique('nobody'))).toBeNull();
      expect(await store.getKey('key_nothing')).toBeNull();
      expect(await store.resolveKeyHash(hashCustomerKey(generateCustomerKey('live')))).toBeNull();
    });

    it('resolves a stored key hash to its key and account, and reads the record back intact', async () => {
      const { accountId, key, record } = await seed({}, { expiresAt: '2027-01-01T00:00:00.000Z', limits: [perMinute(7)] });
      expect(await store.resolveKeyHash(hashCustomerKey(key))).toEqual({ keyId: record.id, accountId });
      expect(await store.getKey(record.id)).toEqual(record);
    });

    it('refuses a key for an account that does not exist, storing nothing', async () => {
      const key = generateCustomerKey('live');
      const record = keyRecord(key, unique('ghost'));
      expect(await store.insertKey(hashCustomerKey(key), record)).toBe('account_not_found');
      expect(await store.resolveKeyHash(hashCustomerKey(key))).toBeNull();
      expect(await store.getKey(record.id)).toBeNull();
    });

    it('patches an account: name, status, balance, limits set and removed per scope', async () => {
      const id = unique('acme');
      await store.createAccount(account(id));
      expect(await store.updateAccount(id, { name: 'Renamed', status: 'suspended', creditBalance: 10 })).toMatchObject({
        name: 'Renamed',
        status: 'suspended',
        creditBalance: 10,
      });
      await store.updateAccount(id, { limits: { key: [perMinute(3)], account: [perMinute(9)] } });
      const cleared = await store.updateAccount(id, { creditBalance: null, limits: { key: null } });
      expect(cleared).toEqual({ ...account(id), name: 'Renamed', status: 'suspended', limits: { account: [perMinute(9)] } });
      expect(await store.updateAccount(id, { limits: { account: null } })).not.toHaveProperty('limits');
      expect(await store.updateAccount(unique('ghost'), { name: 'x' })).toBeNull();
    });

    it('keeps an explicitly empty limit list as "no limits" rather than the default', async () => {
      const id = unique('acme');
      await store.createAccount(account(id));
      expect((await store.updateAccount(id, { limits: { key: [] } }))?.limits).toEqual({ key: [] });
    });

    it('adds and debits credit atomically, refusing post-paid and unknown accounts', async () => {
      const prepaid = unique('pre');
      await store.createAccount(account(prepaid, { creditBalance: 100 }));
      expect(await store.adjustCredit(prepaid, 50)).toEqual({ kind: 'ok', creditBalance: 150 });
      expect(await store.adjustCredit(prepaid, -200)).toEqual({ kind: 'ok', creditBalance: -50 });
      const postpaid = unique('post');
      await store.createAccount(account(postpaid));
      expect(await store.adjustCredit(postpaid, 10)).toEqual({ kind: 'not_prepaid' });
      expect(await store.adjustCredit(unique('ghost'), 10)).toEqual({ kind: 'account_not_found' });
    });

    it('patches a key name and limits, and removes the override with null', async () => {
      const { record } = await seed();
      expect(await store.updateKey(record.id, { name: 'renamed', limits: [perMinute(2)] })).toEqual({
        ...record,
        name: 'renamed',
        limits: [perMinute(2)],
      });
      expect(await store.updateKey(record.id, { limits: null })).toEqual({ ...record, name: 'renamed' });
      expect(await store.updateKey('key_nothing', { name: 'x' })).toBeNull();
    });

    it('returns copies, so a caller cannot change stored state by mutating a result', async () => {
      const { record } = await seed();
      const found = await store.getKey(record.id);
      found!.status = 'revoked';
      expect((await store.getKey(record.id))!.status).toBe('active');
    });
  });

  describe('key restrictions (issue 38)', () => {
    const onKey = { endpoints: ['/v1/embeddings'], models: ['text-embedding-3*'], sourceAddresses: ['10.0.0.0/8', '2001:db8::/32'] };
    const onAccount = { readOnly: true };
    // What Check sends: the stamps of the texts it decided on.
    const texts = (keyText: string, accountText: string, refused?: 'address' | 'endpoint' | 'model') => ({
      keyStamp: restrictionsStamp(keyText),
      accountStamp: restrictionsStamp(accountText),
      ...(refused ? { refused } : {}),
    });
    const authorizeWith = (ids: { accountId: string; keyId: string }, restrictions: ReturnType<typeof texts>, plan = NO_LIMITS) =>
      store.authorize({ ...ids, defaultPlan: plan, defaultTokenBudgets: NO_TOKEN_BUDGETS, restrictions });

    it('stores restrictions with the key and the defaults with the account, patched and removed with null', async () => {
      const ids = await seed({ keyRestrictions: onAccount }, { restrictions: onKey });
      expect((await store.getKey(ids.keyId))!.restrictions).toEqual(onKey);
      expect((await store.getAccount(ids.accountId))!.keyRestrictions).toEqual(onAccount);
      expect((await store.updateKey(ids.keyId, { restrictions: { models: ['o3'] } }))!.restrictions).toEqual({ models: ['o3'] });
      expect(await store.updateKey(ids.keyId, { restrictions: null })).not.toHaveProperty('restrictions');
      expect((await store.updateAccount(ids.accountId, { keyRestrictions: { models: ['a*'] } }))!.keyRestrictions).toEqual({
        models: ['a*'],
      });
      expect(await store.updateAccount(ids.accountId, { keyRestrictions: null })).not.toHaveProperty('keyRestrictions');
    });

    it('answers restrictions_changed with the stored texts when the caller decided on others, consuming nothing', async () => {
      const ids = await seed({ keyRestrictions: onAccount }, { restrictions: onKey });
      const keyText = JSON.stringify(onKey);
      const accountText = JSON.stringify(onAccount);
      const plan = { key: [perMinute(1)], account: [] };
      // Decided on none (what a replica believes of a key it has not seen restricted).
      expect(await authorize(ids, plan)).toEqual({ kind: 'restrictions_changed', prefix: ids.record.prefix, keyText, accountText });
      expect(await authorizeWith(ids, texts(keyText, ''), plan)).toMatchObject({ kind: 'restrictions_changed' });
      // On the current texts: a refusal is answered restricted, an allow consumes as usual.
      expect(await authorizeWith(ids, texts(keyText, accountText, 'endpoint'), plan)).toEqual({
        kind: 'restricted',
        prefix: ids.record.prefix,
      });
      expect((await authorizeWith(ids, texts(keyText, accountText), plan)).kind).toBe('allow');
      expect((await authorizeWith(ids, texts(keyText, accountText), plan)).kind).toBe('rate_limited');
    });

    it('answers a change of either record, a removal included, to a caller holding the earlier texts', async () => {
      const ids = await seed({ keyRestrictions: onAccount }, { restrictions: onKey });
      const [keyText, accountText] = [JSON.stringify(onKey), JSON.stringify(onAccount)];
      const { prefix } = ids.record;
      expect((await authorizeWith(ids, texts(keyText, accountText))).kind).toBe('allow');
      // Set again as it was: the same text, nothing to decide again.
      await store.updateKey(ids.keyId, { restrictions: onKey });
      expect((await authorizeWith(ids, texts(keyText, accountText))).kind).toBe('allow');
      const narrower = { ...onKey, models: ['text-embedding-3-small'] };
      await store.updateKey(ids.keyId, { restrictions: narrower });
      expect(await authorizeWith(ids, texts(keyText, accountText))).toEqual({
        kind: 'restrictions_changed',
        prefix,
        keyText: JSON.stringify(narrower),
        accountText,
      });
      await store.updateAccount(ids.accountId, { keyRestrictions: { models: ['text-*'] } });
      expect(await authorizeWith(ids, texts(JSON.stringify(narrower), accountText))).toEqual({
        kind: 'restrictions_changed',
        prefix,
        keyText: JSON.stringify(narrower),
        accountText: JSON.stringify({ models: ['text-*'] }),
      });
      await store.updateKey(ids.keyId, { restrictions: null });
      await store.updateAccount(ids.accountId, { keyRestrictions: null });
      expect(await authorizeWith(ids, texts(JSON.stringify(narrower), JSON.stringify({ models: ['text-*'] })))).toEqual({
        kind: 'restrictions_changed',
        prefix,
        keyText: '',
        accountText: '',
      });
      expect((await authorize(ids)).kind).toBe('allow');
      // Restricted again as at first: a caller still holding none is told.
      await store.updateKey(ids.keyId, { restrictions: onKey });
      expect(await authorize(ids)).toEqual({ kind: 'restrictions_changed', prefix, keyText, accountText: '' });
    });

    it('decides the status first: a revoked key is told so whatever the restrictions', async () => {
      const ids = await seed({}, { restrictions: onKey });
      await store.revokeKey(ids.keyId, clock.now());
      expect((await authorize(ids)).kind).toBe('key_revoked');
      expect((await authorizeWith(ids, texts(JSON.stringify(onKey), '', 'model'))).kind).toBe('key_revoked');
    });

    it('answers an unrestricted key as before; a refusal sent on current (empty) texts is answered restricted', async () => {
      const ids = await seed();
      expect((await authorize(ids)).kind).toBe('allow');
      expect((await authorizeWith(ids, texts('', ''))).kind).toBe('allow');
      expect((await authorizeWith(ids, texts('', '', 'address'))).kind).toBe('restricted');
    });
  });

  describe('credit idempotency keys', () => {
    const prepaid = async (creditBalance: number) => {
      const id = unique('idem');
      await store.createAccount(account(id, { creditBalance }));
      return id;
    };
    const balanceOf = async (id: string) => (await store.getAccount(id))?.creditBalance;

    it('applies an adjustment once per key: a repeat with the same amount answers the first outcome, replayed', async () => {
      const id = await prepaid(100);
      expect(await store.adjustCredit(id, 50, 'billing-1')).toEqual({ kind: 'ok', creditBalance: 150 });
      expect(await store.adjustCredit(id, 50, 'billing-1')).toEqual({ kind: 'replayed', first: { kind: 'ok', creditBalance: 150 } });
      // Another adjustment in between changes the balance, not what the key answers.
      expect(await store.adjustCredit(id, 7)).toEqual({ kind: 'ok', creditBalance: 157 });
      expect(await store.adjustCredit(id, 50, 'billing-1')).toEqual({ kind: 'replayed', first: { kind: 'ok', creditBalance: 150 } });
      expect(await balanceOf(id)).toBe(157);
      // A new key is a new adjustment, and a key is scoped to its account.
      expect(await store.adjustCredit(id, 50, 'billing-2')).toEqual({ kind: 'ok', creditBalance: 207 });
      const other = await prepaid(0);
      expect(await store.adjustCredit(other, 50, 'billing-1')).toEqual({ kind: 'ok', creditBalance: 50 });
      expect(await balanceOf(id)).toBe(207);
    });

    it('lets exactly one caller claim the audit entry of a key, per account, whichever comes first', async () => {
      const id = await prepaid(100);
      const other = await prepaid(0);
      const claims = await Promise.all(Array.from({ length: 10 }, () => store.claimCreditAudit(id, 'billing-1')));
      expect(claims.filter(Boolean)).toHaveLength(1);
      expect(await store.claimCreditAudit(id, 'billing-1')).toBe(false);
      // Another key, the same key on another account, and a key that extends the first one are claims of their own.
      expect(await store.claimCreditAudit(id, 'billing-2')).toBe(true);
      expect(await store.claimCreditAudit(other, 'billing-1')).toBe(true);
      expect(await store.claimCreditAudit(id, 'billing-1:x')).toBe(true);
      // The claim is not the adjustment's marker: the key still applies its adjustment once.
      expect(await store.adjustCredit(id, 50, 'billing-1')).toEqual({ kind: 'ok', creditBalance: 150 });
    });

    it('refuses a key used with another amount, naming the first amount and writing nothing', async () => {
      const id = await prepaid(100);
      expect(await store.adjustCredit(id, -30, 'debit-9')).toEqual({ kind: 'ok', creditBalance: 70 });
      expect(await store.adjustCredit(id, 30, 'debit-9')).toEqual({ kind: 'idempotency_key_reused', amount: -30 });
      expect(await store.adjustCredit(id, -31, 'debit-9')).toEqual({ kind: 'idempotency_key_reused', amount: -30 });
      expect(await balanceOf(id)).toBe(70);
      // The refusal is not the key's answer: the first one still is.
      expect(await store.adjustCredit(id, -30, 'debit-9')).toEqual({ kind: 'replayed', first: { kind: 'ok', creditBalance: 70 } });
    });

    it("keeps a refusal as the key's answer: not_prepaid and balance_out_of_range are replayed after their cause is gone", async () => {
      const postpaid = unique('idem');
      await store.createAccount(account(postpaid));
      expect(await store.adjustCredit(postpaid, 10, 'top-up')).toEqual({ kind: 'not_prepaid' });
      await store.updateAccount(postpaid, { creditBalance: 0 });
      expect(await store.adjustCredit(postpaid, 10, 'top-up')).toEqual({ kind: 'replayed', first: { kind: 'not_prepaid' } });
      expect(await balanceOf(postpaid)).toBe(0);

      const full = await prepaid(CREDIT_LIMIT_MINOR_UNITS);
      const refused = { kind: 'balance_out_of_range', creditBalance: CREDIT_LIMIT_MINOR_UNITS };
      expect(await store.adjustCredit(full, 1, 'top-up')).toEqual(refused);
      expect(await store.adjustCredit(full, -10, 'spend')).toEqual({ kind: 'ok', creditBalance: CREDIT_LIMIT_MINOR_UNITS - 10 });
      expect(await store.adjustCredit(full, 1, 'top-up')).toEqual({ kind: 'replayed', first: refused });
      expect(await balanceOf(full)).toBe(CREDIT_LIMIT_MINOR_UNITS - 10);
    });

    it('keeps no key for an account that does not exist', async () => {
      const id = unique('idem');
      expect(await store.adjustCredit(id, 10, 'early')).toEqual({ kind: 'account_not_found' });
      await store.createAccount(account(id, { creditBalance: 0 }));
      expect(await store.adjustCredit(id, 10, 'early')).toEqual({ kind: 'ok', creditBalance: 10 });
    });

    it("forgets a key CREDIT_IDEMPOTENCY_TTL_MS after its first use, on the store's clock", async () => {
      const id = await prepaid(100);
      await store.adjustCredit(id, 50, 'daily');
      clock.advance(CREDIT_IDEMPOTENCY_TTL_MS - 1);
      expect(await store.adjustCredit(id, 50, 'daily')).toEqual({ kind: 'replayed', first: { kind: 'ok', creditBalance: 150 } });
      expect(await store.adjustCredit(id, 60, 'daily')).toEqual({ kind: 'idempotency_key_reused', amount: 50 });
      clock.advance(1);
      expect(await store.adjustCredit(id, 60, 'daily')).toEqual({ kind: 'ok', creditBalance: 210 });
      // Its second use is kept as long again.
      clock.advance(CREDIT_IDEMPOTENCY_TTL_MS - 1);
      expect(await store.adjustCredit(id, 60, 'daily')).toEqual({ kind: 'replayed', first: { kind: 'ok', creditBalance: 210 } });
      expect(await balanceOf(id)).toBe(210);
    });

    it('applies a key once when the same adjustment arrives many times at once', async () => {
      const id = await prepaid(100);
      const results = await Promise.all(Array.from({ length: 25 }, () => store.adjustCredit(id, 5, 'burst')));
      const applied = { kind: 'ok', creditBalance: 105 };
      expect(results.filter((result) => result.kind === 'ok')).toEqual([applied]);
      expect(results.filter((result) => result.kind !== 'ok')).toEqual(
        Array.from({ length: 24 }, () => ({ kind: 'replayed', first: applied })),
      );
      expect(await balanceOf(id)).toBe(105);
    });

    it('takes any printable ASCII key, braces and spaces included, each its own key', async () => {
      const id = await prepaid(0);
      const keys = ['{acct:other}', 'a b', '}{', '~!@#$%^&*()_+`-=[]\\;\',./<>?:"|', 'x'.repeat(IDEMPOTENCY_KEY_MAX_LENGTH)];
      for (const [index, key] of keys.entries()) {
        expect(await store.adjustCredit(id, 1, key)).toEqual({ kind: 'ok', creditBalance: index + 1 });
      }
      for (const key of keys) expect((await store.adjustCredit(id, 1, key)).kind).toBe('replayed');
      expect(await balanceOf(id)).toBe(keys.length);
    });
  });

  describe('key lifecycle', () => {
    /** A replacement for `old`, as the admin API builds it. */
    const replacement = (old: StoredKey) => {
      const key = generateCustomerKey(old.environment);
      return { key, hash: hashCustomerKey(key), record: keyRecord(key, old.accountId, { name: old.name, replaces: old.id }) };
    };

    it("lists accounts by id and an account's keys newest first; null for an unknown account", async () => {
      const ids = await seed();
      const later = generateCustomerKey('test');
      const laterRecord = keyRecord(later, ids.accountId, { createdAt: '2026-11-23T00:00:00.000Z', environment: 'test' });
      await store.insertKey(hashCustomerKey(later), laterRecord);
      expect((await store.listKeys(ids.accountId))?.map((k) => k.id)).toEqual([laterRecord.id, ids.keyId]);
      expect(await store.listKeys(unique('ghost'))).toBeNull();
      const listed = (await store.listAccounts()).accounts.map((a) => a.id);
      expect(listed).toContain(ids.accountId);
      expect([...listed].sort()).toEqual(listed);
    });

    it('rotates immediately: the old key is refused at once, the new one allowed, and they point at each other', async () => {
      const ids = await seed();
      const next = replacement(ids.record);
      const result = await store.rotateKey({ oldKeyId: ids.keyId, newKeyHash: next.hash, newKey: next.record, graceSeconds: 0 });
      expect(result).toMatchObject({
        kind: 'rotated',
        oldKey: { id: ids.keyId, status: 'revoked', revokedAt: new Date(T0).toISOString(), replacedBy: next.record.id },
        newKey: { id: next.record.id, replaces: ids.keyId, status: 'active' },
      });
      expect((await authorize(ids)).kind).toBe('key_revoked');
      expect(await store.resolveKeyHash(next.hash)).toEqual({ keyId: next.record.id, accountId: ids.accountId });
      expect((await authorize({ accountId: ids.accountId, keyId: next.record.id })).kind).toBe('allow');
    });

    it('rotates with a grace period: both keys work until it ends, then the old one is refused', async () => {
      const ids = await seed();
      const next = replacement(ids.record);
      await store.rotateKey({ oldKeyId: ids.keyId, newKeyHash: next.hash, newKey: next.record, graceSeconds: 3600 });
      expect((await store.getKey(ids.keyId))?.revokeAt).toBe(new Date(T0 + 3_600_000).toISOString());
      clock.advance(3_599_999);
      expect((await authorize(ids)).kind).toBe('allow');
      clock.advance(1);
      expect((await authorize(ids)).kind).toBe('key_revoked');
      expect((await authorize({ accountId: ids.accountId, keyId: next.record.id })).kind).toBe('allow');
    });

    it('refuses to rotate a revoked, an expired or an already rotated key, changing nothing', async () => {
      const revoked = await seed({}, { status: 'revoked' });
      const r1 = replacement(revoked.record);
      expect(await store.rotateKey({ oldKeyId: revoked.keyId, newKeyHash: r1.hash, newKey: r1.record, graceSeconds: 0 })).toEqual({
        kind: 'key_revoked',
      });
      expect(await store.resolveKeyHash(r1.hash)).toBeNull();

      const expired = await seed({}, { expiresAt: new Date(T0 - 1).toISOString() });
      const r2 = replacement(expired.record);
      expect(await store.rotateKey({ oldKeyId: expired.keyId, newKeyHash: r2.hash, newKey: r2.record, graceSeconds: 0 })).toEqual({
        kind: 'key_expired',
      });

      const graced = await seed();
      const r3 = replacement(graced.record);
      await store.rotateKey({ oldKeyId: graced.keyId, newKeyHash: r3.hash, newKey: r3.record, graceSeconds: 60 });
      const r4 = replacement(graced.record);
      expect(await store.rotateKey({ oldKeyId: graced.keyId, newKeyHash: r4.hash, newKey: r4.record, graceSeconds: 0 })).toEqual({
        kind: 'key_already_rotated',
        replacedBy: r3.record.id,
      });
      expect(await store.getKey(r4.record.id)).toBeNull();
      expect(await store.rotateKey({ oldKeyId: 'key_none', newKeyHash: r4.hash, newKey: r4.record, graceSeconds: 0 })).toEqual({
        kind: 'key_not_found',
      });
    });

    it('answers the same rotation repeated (a lost reply retried) as the first time, changing nothing', async () => {
      for (const graceSeconds of [0, 60]) {
        const ids = await seed();
        const next = replacement(ids.record);
        const request = { oldKeyId: ids.keyId, newKeyHash: next.hash, newKey: next.record, graceSeconds };
        const first = await store.rotateKey(request);
        expect(first).toMatchObject({ kind: 'rotated', oldKey: { replacedBy: next.record.id }, newKey: { id: next.record.id } });
        // A different new key is still refused: a repeat is recognised by the new key's id.
        const other = replacement(ids.record);
        expect(await store.rotateKey({ ...request, newKeyHash: other.hash, newKey: other.record })).toMatchObject({
          kind: graceSeconds === 0 ? 'key_revoked' : 'key_already_rotated',
        });
        // Repeated even after the grace has ended (the old key is now refused), it is still the same rotation.
        clock.advance(61_000);
        expect(await store.rotateKey(request)).toEqual(first);
        expect(await store.getKey(ids.keyId)).toEqual(first.kind === 'rotated' ? first.oldKey : null);
        expect((await store.listKeys(ids.accountId))?.map((k) => k.id).sort()).toEqual([ids.keyId, next.record.id].sort());
        expect((await authorize({ accountId: ids.accountId, keyId: next.record.id })).kind).toBe('allow');
      }
    });

    it('answers the same key insert repeated as created, with one key listed', async () => {
      const ids = await seed();
      expect(await store.insertKey(hashCustomerKey(ids.key), ids.record)).toBe('created');
      expect(await store.getKey(ids.keyId)).toEqual(ids.record);
      expect((await store.listKeys(ids.accountId))?.map((k) => k.id)).toEqual([ids.keyId]);
    });

    it('revokes from the next request on, idempotently keeping the first revocation time', async () => {
      const ids = await seed();
      expect(await store.revokeKey(ids.keyId, T0 + 5)).toMatchObject({ status: 'revoked', revokedAt: new Date(T0 + 5).toISOString() });
      expect((await authorize(ids)).kind).toBe('key_revoked');
      expect((await store.revokeKey(ids.keyId, T0 + 9))?.revokedAt).toBe(new Date(T0 + 5).toISOString());
      expect(await store.revokeKey('key_none', T0)).toBeNull();
    });

    it('revoking a key in its grace period refuses it at once', async () => {
      const ids = await seed();
      const next = replacement(ids.record);
      await store.rotateKey({ oldKeyId: ids.keyId, newKeyHash: next.hash, newKey: next.record, graceSeconds: 3600 });
      await store.revokeKey(ids.keyId, clock.now());
      expect((await authorize(ids)).kind).toBe('key_revoked');
    });

    it('sets and removes an expiry by patch', async () => {
      const ids = await seed();
      const at = new Date(T0 + 1000).toISOString();
      expect((await store.updateKey(ids.keyId, { expiresAt: at }))?.expiresAt).toBe(at);
      clock.advance(1000);
      expect((await authorize(ids)).kind).toBe('key_expired');
      expect(await store.updateKey(ids.keyId, { expiresAt: null })).not.toHaveProperty('expiresAt');
      expect((await authorize(ids)).kind).toBe('allow');
    });

    it('records the later last-use time per key and skips keys that do not exist', async () => {
      const ids = await seed();
      await store.recordLastUsed([{ accountId: ids.accountId, keyId: ids.keyId, atMs: T0 + 2000 }]);
      await store.recordLastUsed([
        { accountId: ids.accountId, keyId: ids.keyId, atMs: T0 + 1000 },
        { accountId: ids.accountId, keyId: 'key_gone', atMs: T0 },
      ]);
      expect((await store.getKey(ids.keyId))?.lastUsedAt).toBe(new Date(T0 + 2000).toISOString());
      expect(await store.getKey('key_gone')).toBeNull();
    });

    it('counts requests per key in hourly and daily buckets, once per batch id, only for keys that exist', async () => {
      const ids = await seed();
      const other = await seed();
      const hour = hourStartOf(T0);
      const use = (requests: number, atMs = T0) => ({ accountId: ids.accountId, keyId: ids.keyId, atMs, requests });
      await store.recordLastUsed(
        [use(3), { accountId: ids.accountId, keyId: 'key_gone', atMs: T0, requests: 7 }, { ...other, atMs: T0, requests: 2 }],
        { id: 'batch-1', hourStartMs: hour },
      );
      // The same batch again (its first answer was lost): the later time is written, the counts are not added twice.
      await store.recordLastUsed([use(3, T0 + 500)], { id: 'batch-1', hourStartMs: hour });
      await store.recordLastUsed([use(4)], { id: 'batch-2', hourStartMs: hour });
      // Without a batch: times only.
      await store.recordLastUsed([use(100)]);
      // The next hour, its own bucket; the same day.
      await store.recordLastUsed([use(5, T0 + HOUR_MS)], { id: 'batch-3', hourStartMs: hour + HOUR_MS });
      expect((await store.getKey(ids.keyId))?.lastUsedAt).toBe(new Date(T0 + HOUR_MS).toISOString());
      expect(await store.readRequestCounts(ids.accountId, 'hour', [hour - HOUR_MS, hour, hour + HOUR_MS])).toEqual([
        {},
        { [ids.keyId]: 7 },
        { [ids.keyId]: 5 },
      ]);
      expect(await store.readRequestCounts(ids.accountId, 'day', [dayStartOf(T0)])).toEqual([{ [ids.keyId]: 12 }]);
      expect(await store.readRequestCounts(other.accountId, 'day', [dayStartOf(T0)])).toEqual([{ [other.keyId]: 2 }]);
      expect(await store.readRequestCounts(unique('none'), 'hour', [hour])).toEqual([{}]);
    });

    it('keeps an audit trail, newest first, paged by entry id', async () => {
      const accountId = unique('audited');
      for (let i = 0; i < 5; i += 1) {
        await store.appendAudit(
          { action: 'key.update', actor: OPERATOR, accountId, keyId: `key_${i}`, keyPrefix: 'gk_live_AbC4', detail: `n=${i}` },
          T0 + i,
        );
      }
      const first = await store.readAudit({ limit: 3 });
      const mine = first.entries.filter((e) => e.accountId === accountId);
      expect(mine.map((e) => e.keyId)).toEqual(['key_4', 'key_3', 'key_2']);
      expect(mine[0]).toMatchObject({
        action: 'key.update',
        time: new Date(T0 + 4).toISOString(),
        keyPrefix: 'gk_live_AbC4',
        detail: 'n=4',
      });
      expect(first.next).toBe(first.entries[2]!.id);
      const second = await store.readAudit({ limit: 3, before: first.next! });
      expect(second.entries.filter((e) => e.accountId === accountId).map((e) => e.keyId)).toEqual(['key_1', 'key_0']);
    });
  });

  describe('bounds, order and clocks both stores answer alike (issue 13)', () => {
    const replacementFor = (old: StoredKey) => {
      const key = generateCustomerKey(old.environment);
      return { hash: hashCustomerKey(key), record: keyRecord(key, old.accountId, { name: old.name, replaces: old.id }) };
    };

    it('answers the exact balance, digit for digit, beyond 14 significant digits', async () => {
      const id = unique('exact');
      await store.createAccount(account(id, { creditBalance: 123_456_789_012_345 }));
      expect(await store.adjustCredit(id, 1)).toEqual({ kind: 'ok', creditBalance: 123_456_789_012_346 });
      expect(await store.adjustCredit(id, -123_456_789_012_347)).toEqual({ kind: 'ok', creditBalance: -1 });
      expect((await store.getAccount(id))?.creditBalance).toBe(-1);
    });

    it('credits up to the bound exactly, and refuses one unit past it in either direction without writing', async () => {
      const id = unique('bound');
      await store.createAccount(account(id, { creditBalance: 0 }));
      expect(await store.adjustCredit(id, CREDIT_LIMIT_MINOR_UNITS)).toEqual({ kind: 'ok', creditBalance: CREDIT_LIMIT_MINOR_UNITS });
      expect(await store.adjustCredit(id, 1)).toEqual({ kind: 'balance_out_of_range', creditBalance: CREDIT_LIMIT_MINOR_UNITS });
      expect(await store.adjustCredit(id, CREDIT_LIMIT_MINOR_UNITS)).toEqual({
        kind: 'balance_out_of_range',
        creditBalance: CREDIT_LIMIT_MINOR_UNITS,
      });
      expect((await store.getAccount(id))?.creditBalance).toBe(CREDIT_LIMIT_MINOR_UNITS);
      expect(await store.adjustCredit(id, -CREDIT_LIMIT_MINOR_UNITS)).toEqual({ kind: 'ok', creditBalance: 0 });
      expect(await store.adjustCredit(id, -CREDIT_LIMIT_MINOR_UNITS)).toEqual({ kind: 'ok', creditBalance: -CREDIT_LIMIT_MINOR_UNITS });
      expect(await store.adjustCredit(id, -1)).toEqual({ kind: 'balance_out_of_range', creditBalance: -CREDIT_LIMIT_MINOR_UNITS });
      expect((await store.getAccount(id))?.creditBalance).toBe(-CREDIT_LIMIT_MINOR_UNITS);
      expect((await store.listAccounts()).unreadable).toEqual([]);
    });

    it('lists accounts in code-unit order of their ids (upper case before lower case, - before _), the same everywhere', async () => {
      const base = unique('order');
      const ids = [`${base}-b`, `${base}_a`, `${base}-B`, `${base}-a`, `${base}-0`];
      for (const id of ids) await store.createAccount(account(id));
      const listed = (await store.listAccounts()).accounts.map((a) => a.id).filter((id) => id.startsWith(base));
      expect(listed).toEqual([`${base}-0`, `${base}-B`, `${base}-a`, `${base}-b`, `${base}_a`]);
    });

    it('treats the audit cursor as a position: an id that names no entry pages on from there, never an empty page', async () => {
      const accountId = unique('cursor');
      for (let i = 0; i < 3; i += 1)
        await store.appendAudit({ action: 'key.update', actor: OPERATOR, accountId, keyId: `key_${i}` }, T0 + i);
      const newest = (await store.readAudit({ limit: 1 })).entries[0]!;
      expect(newest.keyId).toBe('key_2');
      const [ms, sequence] = newest.id.split('-');
      const unused = `${ms}-${Number(sequence) + 1}`; // after the newest entry: no entry has this id
      const page = await store.readAudit({ limit: 2, before: unused });
      expect(page.entries.map((e) => e.keyId)).toEqual(['key_2', 'key_1']);
      expect(page.next).toBe(page.entries[1]!.id);
      expect((await store.readAudit({ limit: 5, before: '0-1' })).entries).toEqual([]);
      expect((await store.readAudit({ limit: 5, before: '0-0' })).entries).toEqual([]);
      const far = await store.readAudit({ limit: 1, before: '99999999999999-0' });
      expect(far.entries.map((e) => e.keyId)).toEqual(['key_2']);
    });

    it("rotates on the store's clock: grace end and revocation time are its now, written exactly as ISO-8601", async () => {
      clock.set(Date.parse('2028-02-29T23:59:59.500Z'));
      const graced = await seed();
      const next = replacementFor(graced.record);
      const rotated = await store.rotateKey({ oldKeyId: graced.keyId, newKeyHash: next.hash, newKey: next.record, graceSeconds: 1 });
      expect(rotated).toMatchObject({ kind: 'rotated', oldKey: { revokeAt: '2028-03-01T00:00:00.500Z' } });
      const at = await seed();
      const now = replacementFor(at.record);
      const immediate = await store.rotateKey({ oldKeyId: at.keyId, newKeyHash: now.hash, newKey: now.record, graceSeconds: 0 });
      expect(immediate).toMatchObject({ kind: 'rotated', oldKey: { status: 'revoked', revokedAt: '2028-02-29T23:59:59.500Z' } });
      clock.set(Date.parse('1999-12-31T23:59:59.999Z'));
      const y2k = await seed();
      const late = replacementFor(y2k.record);
      const crossed = await store.rotateKey({ oldKeyId: y2k.keyId, newKeyHash: late.hash, newKey: late.record, graceSeconds: 7 * 86_400 });
      expect(crossed).toMatchObject({ kind: 'rotated', oldKey: { revokeAt: '2000-01-07T23:59:59.999Z' } });
    });

    it("refuses to rotate a key whose expiry has passed by the store's clock", async () => {
      const ids = await seed({}, { expiresAt: new Date(T0 + 1000).toISOString() });
      clock.advance(999);
      const first = replacementFor(ids.record);
      expect(await store.rotateKey({ oldKeyId: ids.keyId, newKeyHash: first.hash, newKey: first.record, graceSeconds: 60 })).toMatchObject({
        kind: 'rotated',
      });
      const expiring = await seed({}, { expiresAt: new Date(T0 + 1000).toISOString() });
      clock.advance(1);
      const second = replacementFor(expiring.record);
      expect(await store.rotateKey({ oldKeyId: expiring.keyId, newKeyHash: second.hash, newKey: second.record, graceSeconds: 60 })).toEqual(
        { kind: 'key_expired' },
      );
      expect(await store.resolveKeyHash(second.hash)).toBeNull();
    });
  });

  describe('members and invitations (issue 15)', () => {
    const ISSUER = 'https://login.example.com';
    let memberCount = 0;
    const person = (name: string, email?: string): CustomerIdentity => ({
      issuer: ISSUER,
      subject: `${name}-${unique('sub')}`,
      ...(email !== undefined ? { verifiedEmail: email } : {}),
    });
    const asPrincipal = (identity: CustomerIdentity): MemberPrincipal => ({
      kind: 'identity',
      issuer: identity.issuer,
      subject: identity.subject,
    });
    const member = (accountId: string, principal: MemberPrincipal, role: Member['role'], addedBy: AuditActor = OPERATOR): Member => ({
      id: `mem_${unique('m').replace(/[^A-Za-z0-9]/g, '')}`,
      accountId,
      role,
      principal,
      ...(principal.kind === 'invitation' ? { invitedEmail: principal.email } : {}),
      addedAt: new Date(T0 + (memberCount += 1)).toISOString(),
      addedBy,
    });
    const newAccount = async () => {
      const id = unique('team');
      await store.createAccount(account(id));
      return id;
    };
    const added = async (accountId: string, principal: MemberPrincipal, role: Member['role']) => {
      const result = await store.addMember(member(accountId, principal, role));
      if (result.kind !== 'added') throw new Error(`expected added, got ${result.kind}`);
      return result.member;
    };

    it('adds identities and invitations, lists them in the order added, and finds each by principal', async () => {
      const accountId = await newAccount();
      const alice = person('alice');
      const byAlice: AuditActor = { kind: 'member', issuer: alice.issuer, subject: alice.subject };
      const owner = member(accountId, asPrincipal(alice), 'owner');
      expect(await store.addMember(owner)).toEqual({ kind: 'added', member: owner });
      const invited = member(accountId, { kind: 'invitation', email: 'bob@example.com' }, 'developer', byAlice);
      expect(await store.addMember(invited)).toEqual({ kind: 'added', member: invited });
      expect(await store.listMembers(accountId)).toEqual([owner, invited]);
      expect(await store.getMember(accountId, invited.id)).toEqual(invited);
      expect(await store.findMember(accountId, asPrincipal(alice))).toEqual(owner);
      expect(await store.findMember(accountId, { kind: 'invitation', email: 'bob@example.com' })).toEqual(invited);
      expect(await store.findMember(accountId, asPrincipal(person('stranger')))).toBeNull();
      expect(await store.accountsOf(alice)).toEqual([{ accountId, role: 'owner' }]);
    });

    it('refuses the same principal twice on one account (answering the existing member), but not on two accounts', async () => {
      const [first, second] = [await newAccount(), await newAccount()];
      const carol = person('carol');
      const original = await added(first, asPrincipal(carol), 'viewer');
      expect(await store.addMember(member(first, asPrincipal(carol), 'owner'))).toEqual({ kind: 'already_member', member: original });
      await added(first, { kind: 'invitation', email: 'dave@example.com' }, 'viewer');
      const again = await store.addMember(member(first, { kind: 'invitation', email: 'Dave@Example.COM' }, 'owner'));
      expect(again.kind).toBe('already_member');
      await added(second, asPrincipal(carol), 'developer');
      expect(await store.accountsOf(carol)).toEqual(
        [
          { accountId: first, role: 'viewer' },
          { accountId: second, role: 'developer' },
        ].sort((a, b) => (a.accountId < b.accountId ? -1 : 1)),
      );
      expect(await store.listMembers(first)).toHaveLength(2);
    });

    it('answers the same add repeated (a lost reply retried) as added, with one member listed', async () => {
      const accountId = await newAccount();
      const record = member(accountId, asPrincipal(person('erin')), 'viewer');
      await store.addMember(record);
      expect(await store.addMember(record)).toEqual({ kind: 'added', member: record });
      expect(await store.listMembers(accountId)).toEqual([record]);
    });

    it('refuses a member for an account that does not exist, and never lists that account for the person', async () => {
      const frank = person('frank');
      const ghost = unique('ghost');
      expect(await store.addMember(member(ghost, asPrincipal(frank), 'owner'))).toEqual({ kind: 'account_not_found' });
      expect(await store.accountsOf(frank)).toEqual([]);
      expect(await store.listMembers(ghost)).toBeNull();
    });

    it('changes a role, and never lets the last acting owner go (demoted or removed); a pending owner invitation does not count', async () => {
      const accountId = await newAccount();
      const grace = await added(accountId, asPrincipal(person('grace')), 'owner');
      const invitedOwner = await added(accountId, { kind: 'invitation', email: 'heidi@example.com' }, 'owner');
      expect(await store.changeMemberRole(accountId, grace.id, 'developer')).toEqual({ kind: 'last_owner' });
      expect(await store.removeMember(accountId, grace.id)).toEqual({ kind: 'last_owner' });
      expect((await store.getMember(accountId, grace.id))?.role).toBe('owner');
      // The invitation itself can always go.
      expect(await store.removeMember(accountId, invitedOwner.id)).toEqual({ kind: 'changed', member: invitedOwner });
      const ivan = await added(accountId, asPrincipal(person('ivan')), 'viewer');
      expect(await store.changeMemberRole(accountId, ivan.id, 'owner')).toEqual({ kind: 'changed', member: { ...ivan, role: 'owner' } });
      expect(await store.changeMemberRole(accountId, grace.id, 'viewer')).toEqual({
        kind: 'changed',
        member: { ...grace, role: 'viewer' },
      });
      expect(await store.removeMember(accountId, ivan.id)).toEqual({ kind: 'last_owner' });
      // An owner staying owner is no change at all.
      expect(await store.changeMemberRole(accountId, ivan.id, 'owner')).toEqual({ kind: 'changed', member: { ...ivan, role: 'owner' } });
    });

    it('keeps one acting owner when two owners are demoted at the same moment', async () => {
      const accountId = await newAccount();
      const one = await added(accountId, asPrincipal(person('judy')), 'owner');
      const two = await added(accountId, asPrincipal(person('ken')), 'owner');
      const results = await Promise.all([store.removeMember(accountId, one.id), store.changeMemberRole(accountId, two.id, 'viewer')]);
      expect(results.map((result) => result.kind).sort()).toEqual(['changed', 'last_owner']);
      expect((await store.listMembers(accountId))?.filter((m) => m.role === 'owner')).toHaveLength(1);
    });

    it("removes a member: gone from the account and from the person's accounts; member ids are scoped to their account", async () => {
      const [accountId, other] = [await newAccount(), await newAccount()];
      await added(accountId, asPrincipal(person('owner')), 'owner');
      const leo = person('leo');
      const leaving = await added(accountId, asPrincipal(leo), 'developer');
      expect(await store.getMember(other, leaving.id)).toBeNull();
      expect(await store.changeMemberRole(other, leaving.id, 'viewer')).toEqual({ kind: 'member_not_found' });
      expect(await store.removeMember(other, leaving.id)).toEqual({ kind: 'member_not_found' });
      expect(await store.removeMember(accountId, leaving.id)).toEqual({ kind: 'changed', member: leaving });
      expect(await store.getMember(accountId, leaving.id)).toBeNull();
      expect(await store.findMember(accountId, asPrincipal(leo))).toBeNull();
      expect(await store.accountsOf(leo)).toEqual([]);
      expect(await store.removeMember(accountId, leaving.id)).toEqual({ kind: 'member_not_found' });
      // Removed, the same person can be added again.
      expect((await store.addMember(member(accountId, asPrincipal(leo), 'viewer'))).kind).toBe('added');
    });

    it('binds an invitation to the identity that signs in with that verified email (any case): same id and role, joined now', async () => {
      const [accountId, other] = [await newAccount(), await newAccount()];
      const invitation = await added(accountId, { kind: 'invitation', email: 'mia@example.com' }, 'developer');
      const elsewhere = await added(other, { kind: 'invitation', email: 'mia@example.com' }, 'viewer');
      const mia = person('mia', 'Mia@Example.com');
      expect(await store.accountsOf(mia)).toEqual([]);
      const bindings = await store.bindInvitations(mia, T0 + 42);
      const bound = (invited: Member): Member => ({ ...invited, principal: asPrincipal(mia), joinedAt: new Date(T0 + 42).toISOString() });
      expect(
        bindings.sort((a, b) => (a.kind === 'bound' && b.kind === 'bound' && a.member.accountId < b.member.accountId ? -1 : 1)),
      ).toEqual(
        [
          { kind: 'bound', member: bound(invitation) },
          { kind: 'bound', member: bound(elsewhere) },
        ].sort((a, b) => (a.member.accountId < b.member.accountId ? -1 : 1)),
      );
      expect(await store.getMember(accountId, invitation.id)).toEqual(bound(invitation));
      expect(await store.findMember(accountId, { kind: 'invitation', email: 'mia@example.com' })).toBeNull();
      expect(await store.accountsOf(mia)).toEqual(
        [
          { accountId, role: 'developer' },
          { accountId: other, role: 'viewer' },
        ].sort((a, b) => (a.accountId < b.accountId ? -1 : 1)),
      );
      // Signing in again binds nothing more.
      expect(await store.bindInvitations(mia, T0 + 43)).toEqual([]);
    });

    it("binds nothing without a verified email, and nothing for another person's email", async () => {
      const accountId = await newAccount();
      await added(accountId, { kind: 'invitation', email: 'nina@example.com' }, 'owner');
      const unverified = person('nina');
      expect(await store.bindInvitations(unverified, T0)).toEqual([]);
      expect(await store.bindInvitations(person('oscar', 'oscar@example.com'), T0)).toEqual([]);
      expect(await store.accountsOf(unverified)).toEqual([]);
      expect((await store.findMember(accountId, { kind: 'invitation', email: 'nina@example.com' }))?.role).toBe('owner');
    });

    it('drops an invitation for someone who is already a member, keeping their membership as it is', async () => {
      const accountId = await newAccount();
      const pat = person('pat', 'pat@example.com');
      const existing = await added(accountId, asPrincipal(pat), 'viewer');
      const invitation = await added(accountId, { kind: 'invitation', email: 'pat@example.com' }, 'owner');
      expect(await store.bindInvitations(pat, T0)).toEqual([{ kind: 'dropped', invitation, existing }]);
      expect(await store.listMembers(accountId)).toEqual([existing]);
      expect(await store.accountsOf(pat)).toEqual([{ accountId, role: 'viewer' }]);
    });

    it(`refuses more than ${MAX_MEMBERS_PER_ACCOUNT} members and invitations on one account`, async () => {
      const accountId = await newAccount();
      for (let batch = 0; batch < MAX_MEMBERS_PER_ACCOUNT / 100; batch += 1) {
        await Promise.all(
          Array.from({ length: 100 }, (_, i) => added(accountId, { kind: 'invitation', email: `m${batch}x${i}@example.com` }, 'viewer')),
        );
      }
      expect(await store.addMember(member(accountId, asPrincipal(person('one-too-many')), 'owner'))).toEqual({
        kind: 'member_limit_reached',
        limit: MAX_MEMBERS_PER_ACCOUNT,
      });
    });
  });

  it("round-trips an account's exposed-key action (issue 39), and removes it with null", async () => {
    const id = unique('exposure');
    await store.createAccount(account(id, { exposedKeyAction: 'rotate' }));
    expect((await store.getAccount(id))?.exposedKeyAction).toBe('rotate');
    expect((await store.updateAccount(id, { exposedKeyAction: 'revoke' }))?.exposedKeyAction).toBe('revoke');
    expect(await store.updateAccount(id, { exposedKeyAction: null })).not.toHaveProperty('exposedKeyAction');
    expect(await store.updateAccount(id, { name: 'renamed' })).not.toHaveProperty('exposedKeyAction');
  });

  describe('active-key cap (issue 15)', () => {
    const newKey = (accountId: string, extra: Partial<StoredKey> = {}) => {
      const key = generateCustomerKey('live');
      return { key, hash: hashCustomerKey(key), record: keyRecord(key, accountId, extra) };
    };
    const cappedAccount = async (maxActiveKeys?: number) => {
      const id = unique('capped');
      await store.createAccount(account(id, maxActiveKeys === undefined ? {} : { maxActiveKeys }));
      return id;
    };

    it("round-trips an account's own cap, and removes it with null", async () => {
      const id = await cappedAccount(7);
      expect((await store.getAccount(id))?.maxActiveKeys).toBe(7);
      expect((await store.updateAccount(id, { maxActiveKeys: 0 }))?.maxActiveKeys).toBe(0);
      expect(await store.updateAccount(id, { maxActiveKeys: null })).not.toHaveProperty('maxActiveKeys');
    });

    it('refuses a key at the cap, writing nothing; revoked keys free a place, expired ones do not', async () => {
      const accountId = await cappedAccount(2);
      const first = newKey(accountId, { expiresAt: new Date(T0 - 1000).toISOString() });
      const second = newKey(accountId);
      expect(await store.insertKey(first.hash, first.record)).toBe('created');
      expect(await store.insertKey(second.hash, second.record)).toBe('created');
      const third = newKey(accountId);
      expect(await store.insertKey(third.hash, third.record)).toEqual({ kind: 'active_key_cap_reached', maxActiveKeys: 2, activeKeys: 2 });
      expect(await store.getKey(third.record.id)).toBeNull();
      expect(await store.resolveKeyHash(third.hash)).toBeNull();
      expect(await store.listKeys(accountId)).toHaveLength(2);
      await store.revokeKey(first.record.id, T0);
      expect(await store.insertKey(third.hash, third.record)).toBe('created');
    });

    it('answers the same insert repeated as created even at the cap it is counted in', async () => {
      const accountId = await cappedAccount(1);
      const only = newKey(accountId);
      expect(await store.insertKey(only.hash, only.record)).toBe('created');
      expect(await store.insertKey(only.hash, only.record)).toBe('created');
    });

    it("applies the store's default cap to accounts without their own, and 0 allows no key at all", async () => {
      const small = await open(clock, { defaultMaxActiveKeys: 1 });
      const accountId = unique('default-cap');
      await small.createAccount(account(accountId));
      const [a, b] = [newKey(accountId), newKey(accountId)];
      expect(await small.insertKey(a.hash, a.record)).toBe('created');
      expect(await small.insertKey(b.hash, b.record)).toEqual({ kind: 'active_key_cap_reached', maxActiveKeys: 1, activeKeys: 1 });
      await small.updateAccount(accountId, { maxActiveKeys: 2 });
      expect(await small.insertKey(b.hash, b.record)).toBe('created');
      const frozen = await cappedAccount(0);
      const c = newKey(frozen);
      expect(await store.insertKey(c.hash, c.record)).toEqual({ kind: 'active_key_cap_reached', maxActiveKeys: 0, activeKeys: 0 });
    });

    it('never lets concurrent creations pass the cap', async () => {
      const accountId = await cappedAccount(3);
      const results = await Promise.all(Array.from({ length: 12 }, () => newKey(accountId)).map((k) => store.insertKey(k.hash, k.record)));
      expect(results.filter((result) => result === 'created')).toHaveLength(3);
      expect(await store.listKeys(accountId)).toHaveLength(3);
    });

    it('never refuses an immediate rotation; allows one rotation with grace at the cap, not a second above it', async () => {
      const accountId = await cappedAccount(2);
      const [a, b] = [newKey(accountId), newKey(accountId)];
      await store.insertKey(a.hash, a.record);
      await store.insertKey(b.hash, b.record);
      const successor = (old: StoredKey) => newKey(accountId, { id: `${old.id}r`, replaces: old.id });
      const a2 = successor(a.record);
      expect((await store.rotateKey({ oldKeyId: a.record.id, newKeyHash: a2.hash, newKey: a2.record, graceSeconds: 0 })).kind).toBe(
        'rotated',
      );
      // At the cap (2): a grace rotation takes it to 3 until the grace ends.
      const b2 = successor(b.record);
      expect((await store.rotateKey({ oldKeyId: b.record.id, newKeyHash: b2.hash, newKey: b2.record, graceSeconds: 60 })).kind).toBe(
        'rotated',
      );
      // Above the cap: a second grace rotation is refused, changing nothing; an immediate one is not.
      const a3 = successor(a2.record);
      expect(await store.rotateKey({ oldKeyId: a2.record.id, newKeyHash: a3.hash, newKey: a3.record, graceSeconds: 60 })).toEqual({
        kind: 'active_key_cap_reached',
        maxActiveKeys: 2,
        activeKeys: 3,
      });
      expect(await store.getKey(a2.record.id)).toMatchObject({ status: 'active' });
      expect(await store.getKey(a2.record.id)).not.toHaveProperty('replacedBy');
      expect(await store.getKey(a3.record.id)).toBeNull();
      expect(await store.resolveKeyHash(a3.hash)).toBeNull();
      expect((await authorize({ accountId, keyId: a2.record.id })).kind).toBe('allow');
      // Once the first grace has ended, the old key no longer counts.
      clock.advance(61_000);
      expect((await store.rotateKey({ oldKeyId: a2.record.id, newKeyHash: a3.hash, newKey: a3.record, graceSeconds: 60 })).kind).toBe(
        'rotated',
      );
    });

    it('keeps who created a key', async () => {
      const accountId = await cappedAccount();
      const byMember = newKey(accountId, { createdBy: { kind: 'member', issuer: 'https://login.example.com', subject: 'u-1' } });
      const byOperator = newKey(accountId, { createdBy: OPERATOR });
      await store.insertKey(byMember.hash, byMember.record);
      await store.insertKey(byOperator.hash, byOperator.record);
      expect(await store.getKey(byMember.record.id)).toEqual(byMember.record);
      expect((await store.getKey(byOperator.record.id))?.createdBy).toEqual({ kind: 'operator' });
    });
  });

  describe('audit actors and per-account trails (issue 15)', () => {
    it("records who made each change, and reads one account's trail alone, newest first, paged", async () => {
      const [mine, theirs] = [unique('trail'), unique('trail')];
      const member: AuditActor = { kind: 'member', issuer: 'https://login.example.com', subject: 'owner-1' };
      for (let i = 0; i < 4; i += 1) {
        await store.appendAudit({ action: 'key.create', actor: i % 2 ? member : OPERATOR, accountId: mine, keyId: `key_m${i}` }, T0 + i);
        await store.appendAudit({ action: 'member.add', actor: OPERATOR, accountId: theirs, memberId: `mem_t${i}` }, T0 + i);
      }
      const first = await store.readAudit({ accountId: mine, limit: 3 });
      expect(first.entries.map((entry) => [entry.keyId, entry.actor])).toEqual([
        ['key_m3', member],
        ['key_m2', OPERATOR],
        ['key_m1', member],
      ]);
      expect(first.entries.every((entry) => entry.accountId === mine)).toBe(true);
      const second = await store.readAudit({ accountId: mine, limit: 3, before: first.next! });
      expect(second).toEqual({ entries: [expect.objectContaining({ keyId: 'key_m0', actor: OPERATOR })], next: null });
      const all = await store.readAudit({ limit: 1000 });
      expect(all.entries.find((entry) => entry.memberId === 'mem_t3')).toMatchObject({
        accountId: theirs,
        actor: OPERATOR,
        action: 'member.add',
      });
    });
  });

  describe('authorize: key status and billing, in that order', () => {
    it('allows an active key and says which key and environment', async () => {
      const ids = await seed();
      expect(await authorize(ids)).toEqual({ kind: 'allow', prefix: ids.record.prefix, environment: 'live' });
    });

    it('answers unknown_key when the key record is missing', async () => {
      const accountId = unique('acct');
      await store.createAccount(account(accountId));
      expect(await authorize({ accountId, keyId: 'key_missing' })).toEqual({ kind: 'unknown_key' });
    });

    it('refuses a revoked key before looking at billing', async () => {
      const ids = await seed({ status: 'suspended' }, { status: 'revoked' });
      expect(await authorize(ids)).toEqual({ kind: 'key_revoked', prefix: ids.record.prefix });
    });

    it('refuses a key from its expiry instant on, by the injected clock', async () => {
      const ids = await seed({}, { expiresAt: new Date(T0 + 60_000).toISOString() });
      clock.advance(59_999);
      expect((await authorize(ids)).kind).toBe('allow');
      clock.advance(1);
      expect(await authorize(ids)).toEqual({ kind: 'key_expired', prefix: ids.record.prefix });
    });

    it('refuses a suspended account with account_suspended, and allows again at once when reactivated', async () => {
      const ids = await seed({ status: 'suspended' });
      expect((await authorize(ids)).kind).toBe('account_suspended');
      await store.updateAccount(ids.accountId, { status: 'active' });
      expect((await authorize(ids)).kind).toBe('allow');
    });

    it('refuses a prepaid account at zero or below, and allows again right after a top-up', async () => {
      const ids = await seed({ creditBalance: 0 });
      expect((await authorize(ids)).kind).toBe('credit_exhausted');
      await store.adjustCredit(ids.accountId, -5);
      expect((await authorize(ids)).kind).toBe('credit_exhausted');
      await store.adjustCredit(ids.accountId, 6);
      expect((await authorize(ids)).kind).toBe('allow');
    });

    it('never blocks a post-paid account for credit', async () => {
      const ids = await seed();
      expect((await authorize(ids)).kind).toBe('allow');
    });

    it('consumes no rate-limit capacity for a billing-denied request', async () => {
      const plan = { key: [perMinute(2)], account: [] };
      const ids = await seed({ status: 'suspended' });
      expect(await kinds(ids, plan, 5)).toEqual(Array(5).fill('account_suspended'));
      await store.updateAccount(ids.accountId, { status: 'active' });
      expect(await kinds(ids, plan, 3)).toEqual(['allow', 'allow', 'rate_limited']);
    });
  });

  describe('authorize: rate limits (GCRA)', () => {
    it('allows a burst of exactly the limit, then names the key limit and its window', async () => {
      const ids = await seed();
      const plan = { key: [perMinute(3)], account: [] };
      const outcomes: AuthorizeOutcome[] = [];
      for (let i = 0; i < 4; i += 1) outcomes.push(await authorize(ids, plan));
      expect(outcomes.map((o) => (o.kind === 'allow' ? o.tightest?.remaining : o.kind))).toEqual([2, 1, 0, 'rate_limited']);
      expect(outcomes[3]).toEqual({
        kind: 'rate_limited',
        prefix: ids.record.prefix,
        hit: { scope: 'key', limit: 3, windowSeconds: 60, remaining: 0, resetMs: 60_000, retryAfterMs: 20_000 },
      });
    });

    it('lets one more request through per emission interval (window / limit)', async () => {
      const ids = await seed();
      const plan = { key: [perMinute(3)], account: [] };
      await kinds(ids, plan, 3);
      clock.advance(19_999);
      expect((await authorize(ids, plan)).kind).toBe('rate_limited');
      clock.advance(1);
      expect(await kinds(ids, plan, 2)).toEqual(['allow', 'rate_limited']);
    });

    it('does not allow the double burst of fixed windows at a window edge', async () => {
      const ids = await seed();
      const plan = { key: [{ limit: 10, windowSeconds: 60 }], account: [] };
      clock.advance(59_000);
      const before = await kinds(ids, plan, 10);
      clock.advance(2_000); // a fixed window would have reset here
      const after = await kinds(ids, plan, 10);
      expect(before.filter((k) => k === 'allow')).toHaveLength(10);
      expect(after.filter((k) => k === 'allow')).toHaveLength(0);
    });

    it('is full again one window after the last use', async () => {
      const ids = await seed();
      const plan = { key: [perMinute(5)], account: [] };
      await kinds(ids, plan, 5);
      clock.advance(60_000);
      expect(await kinds(ids, plan, 6)).toEqual([...Array<string>(5).fill('allow'), 'rate_limited']);
    });

    it('shares account limits across keys; a request refused by one limit consumes none of the others', async () => {
      const plan = { key: [perMinute(1)], account: [perMinute(5)] };
      const a = await seed();
      const keyB = generateCustomerKey('live');
      const recordB = keyRecord(keyB, a.accountId);
      await store.insertKey(hashCustomerKey(keyB), recordB);
      const b = { accountId: a.accountId, keyId: recordB.id };
      expect(await kinds(a, plan, 4)).toEqual(['allow', 'rate_limited', 'rate_limited', 'rate_limited']);
      // Key B has its own key limit: give it a larger one so the account limit is what binds.
      await store.updateKey(recordB.id, { limits: [perMinute(100)] });
      const outcomes: AuthorizeOutcome[] = [];
      for (let i = 0; i < 5; i += 1) outcomes.push(await authorize(b, plan));
      expect(outcomes.map((o) => o.kind)).toEqual(['allow', 'allow', 'allow', 'allow', 'rate_limited']);
      expect(outcomes[4]).toMatchObject({ kind: 'rate_limited', hit: { scope: 'account', limit: 5, windowSeconds: 60 } });
    });

    it('names the limit that keeps the caller waiting longest when several are exhausted', async () => {
      const ids = await seed();
      const plan = { key: [perMinute(2), { limit: 2, windowSeconds: 86_400 }], account: [] };
      await kinds(ids, plan, 2);
      const refused = await authorize(ids, plan);
      expect(refused).toMatchObject({ kind: 'rate_limited', hit: { scope: 'key', windowSeconds: 86_400, retryAfterMs: 43_200_000 } });
    });

    it('applies overrides: key over account over default plan', async () => {
      const plan = { key: [perMinute(1)], account: [] };
      const ids = await seed({ limits: { key: [perMinute(2)] } });
      expect(await kinds(ids, plan, 3)).toEqual(['allow', 'allow', 'rate_limited']);
      await store.updateKey(ids.keyId, { limits: [perMinute(4)] });
      clock.advance(60_000);
      expect(await kinds(ids, plan, 5)).toEqual(['allow', 'allow', 'allow', 'allow', 'rate_limited']);
    });

    it('reports the most constrained limit on an allowed request', async () => {
      const ids = await seed();
      const plan = { key: [perMinute(10)], account: [{ limit: 3, windowSeconds: 3600 }] };
      const allowed = await authorize(ids, plan);
      expect(allowed).toEqual({
        kind: 'allow',
        prefix: ids.record.prefix,
        environment: 'live',
        tightest: { scope: 'account', limit: 3, windowSeconds: 3600, remaining: 2, resetMs: 1_200_000 },
      });
    });
  });
});

describe('redis store specifics', () => {
  const connect = async () => {
    const store = await RedisStore.connect({ url: redis.url, commandTimeoutMs: 1000 });
    opened.push(store);
    return store;
  };
  const client = () => new Redis(redis.url, { disconnectTimeout: 50 });

  it("decides with Redis's own clock when no override is given", async () => {
    const store = await connect();
    const accountId = unique('clock');
    await store.createAccount(account(accountId));
    const key = generateCustomerKey('live');
    const record = keyRecord(key, accountId);
    await store.insertKey(hashCustomerKey(key), record);
    const plan = { key: [perMinute(2)], account: [] };
    const ids = { accountId, keyId: record.id, defaultPlan: plan, defaultTokenBudgets: NO_TOKEN_BUDGETS };
    expect((await store.authorize(ids)).kind).toBe('allow');
    expect((await store.authorize(ids)).kind).toBe('allow');
    expect((await store.authorize(ids)).kind).toBe('rate_limited');
  });

  it('keeps every mutable key of an account under its {acct:ID} hash tag (one cluster slot)', async () => {
    const store = await connect();
    const accountId = unique('tag');
    await store.createAccount(account(accountId));
    const key = generateCustomerKey('live');
    const record = keyRecord(key, accountId);
    await store.insertKey(hashCustomerKey(key), record);
    await store.authorize({
      accountId,
      keyId: record.id,
      defaultPlan: { key: [perMinute(5)], account: [perMinute(50)] },
      defaultTokenBudgets: NO_TOKEN_BUDGETS,
    });
    const redisClient = client();
    try {
      const names = await redisClient.keys(`*${accountId}*`);
      const global = [redisKeys.keyIdsByHash(hashCustomerKey(key)), redisKeys.accountIdByKeyId(record.id)];
      const tagged = names.filter((name) => !global.includes(name));
      expect(tagged.length).toBeGreaterThanOrEqual(3); // account (its buckets are fields of it), key, key set
      for (const name of tagged) expect(name.includes(`{acct:${accountId}}`)).toBe(true);
    } finally {
      redisClient.disconnect();
    }
  });

  it('stores only the hash: the full key appears nowhere in Redis', async () => {
    const store = await connect();
    const id = unique('acme');
    await store.createAccount(account(id));
    const key = generateCustomerKey('live');
    await store.insertKey(hashCustomerKey(key), keyRecord(key, id));
    const redisClient = client();
    try {
      for (const name of await redisClient.keys('*')) {
        expect(name).not.toContain(key);
        const type = await redisClient.type(name);
        const dump =
          type === 'hash'
            ? JSON.stringify(await redisClient.hgetall(name))
            : type === 'set'
              ? JSON.stringify(await redisClient.smembers(name))
              : type === 'stream'
                ? JSON.stringify(await redisClient.xrange(name, '-', '+'))
                : type === 'zset'
                  ? JSON.stringify(await redisClient.zrange(name, 0, -1, 'WITHSCORES'))
                  : String(await redisClient.get(name));
        expect(dump).not.toContain(key);
      }
    } finally {
      redisClient.disconnect();
    }
  });

  it('counts the keys of an account that predate the cap once, in batches, on its first capped write, then from its active-keys set', async () => {
    const store = await connect();
    const accountId = unique('old');
    await store.createAccount(account(accountId, { maxActiveKeys: 601 }));
    const redisClient = client();
    try {
      // As before the cap existed: key records, key set and indexes, but no complete active-keys set.
      await redisClient.hdel(redisKeys.account(accountId), redisKeys.activeKeysIndexedField());
      const pipeline = redisClient.pipeline();
      for (let i = 0; i < 1200; i += 1) {
        const key = generateCustomerKey('live');
        const record = keyRecord(key, accountId, { id: `key_old${i}`, status: i % 2 === 0 ? 'active' : 'revoked' });
        pipeline.set(redisKeys.accountIdByKeyId(record.id), accountId);
        pipeline.hset(redisKeys.key(accountId, record.id), ...keyToFields(record));
        pipeline.sadd(redisKeys.accountKeys(accountId), record.id);
      }
      await pipeline.exec();
      const [first, second] = [generateCustomerKey('live'), generateCustomerKey('live')];
      expect(await store.insertKey(hashCustomerKey(first), keyRecord(first, accountId))).toBe('created');
      expect(await redisClient.zcard(redisKeys.activeKeys(accountId))).toBe(601);
      expect(await redisClient.hget(redisKeys.account(accountId), redisKeys.activeKeysIndexedField())).toBe('1');
      expect(await store.insertKey(hashCustomerKey(second), keyRecord(second, accountId))).toEqual({
        kind: 'active_key_cap_reached',
        maxActiveKeys: 601,
        activeKeys: 601,
      });
      expect(await store.revokeKey('key_old0', T0)).toMatchObject({ status: 'revoked' });
      expect(await store.insertKey(hashCustomerKey(second), keyRecord(second, accountId))).toBe('created');
      expect(await redisClient.zscore(redisKeys.activeKeys(accountId), 'key_old0')).toBeNull();
      // The account record itself reads as before.
      expect(await store.getAccount(accountId)).toEqual(account(accountId, { maxActiveKeys: 601 }));
    } finally {
      redisClient.disconnect();
    }
  });

  it('fails start-up loudly when Redis cannot be reached', async () => {
    await expect(RedisStore.connect({ url: 'redis://127.0.0.1:1', commandTimeoutMs: 50 })).rejects.toThrow(/cannot reach Redis/);
  });

  it('lists the readable accounts and names an unreadable one, whose own read fails with what is wrong', async () => {
    const store = await connect();
    const good = unique('good');
    const bad = unique('bad');
    await store.createAccount(account(good, { creditBalance: 5 }));
    await store.createAccount(account(bad, { creditBalance: 5 }));
    const redisClient = client();
    await redisClient.hset(redisKeys.account(bad), 'creditBalance', '18014398509481982');
    redisClient.disconnect();
    const listing = await store.listAccounts();
    expect(listing.accounts.map((a) => a.id)).toContain(good);
    expect(listing.accounts.map((a) => a.id)).not.toContain(bad);
    expect(listing.unreadable).toEqual([{ id: bad, problem: expect.stringContaining("creditBalance '18014398509481982'") }]);
    await expect(store.getAccount(bad)).rejects.toThrow(CorruptRecordError);
    await expect(store.adjustCredit(bad, 1)).rejects.toThrow(CorruptRecordError);
  });

  it('keeps a credit idempotency key as one Redis key under the account tag, for 24 hours; an unreadable balance keeps none', async () => {
    const store = await connect();
    const id = unique('idem');
    await store.createAccount(account(id, { creditBalance: 5 }));
    expect(await store.adjustCredit(id, 1, 'billing-42')).toEqual({ kind: 'ok', creditBalance: 6 });
    const redisClient = client();
    try {
      expect((await redisClient.keys(`*${id}*`)).sort()).toEqual(
        [redisKeys.account(id), redisKeys.creditIdempotency(id, 'billing-42')].sort(),
      );
      const ttl = await redisClient.pttl(redisKeys.creditIdempotency(id, 'billing-42'));
      expect(ttl).toBeGreaterThan(CREDIT_IDEMPOTENCY_TTL_MS - 60_000);
      expect(ttl).toBeLessThanOrEqual(CREDIT_IDEMPOTENCY_TTL_MS);

      const bad = unique('idem-bad');
      await store.createAccount(account(bad, { creditBalance: 5 }));
      await redisClient.hset(redisKeys.account(bad), 'creditBalance', '18014398509481982');
      await expect(store.adjustCredit(bad, 1, 'repair-me')).rejects.toThrow(CorruptRecordError);
      expect(await redisClient.exists(redisKeys.creditIdempotency(bad, 'repair-me'))).toBe(0);
      // Once repaired, the same key applies the adjustment: nothing was decided before.
      await store.updateAccount(bad, { creditBalance: 5 });
      expect(await store.adjustCredit(bad, 1, 'repair-me')).toEqual({ kind: 'ok', creditBalance: 6 });

      // A marker that cannot be read is never taken as absent (that could apply the adjustment twice).
      await redisClient.set(redisKeys.creditIdempotency(id, 'garbled'), 'not a marker');
      await expect(store.adjustCredit(id, 1, 'garbled')).rejects.toThrow(/unreadable credit idempotency marker/);
      expect((await store.getAccount(id))?.creditBalance).toBe(6);
    } finally {
      redisClient.disconnect();
    }
  });

  it('reports a corrupt key record as a store failure, never as a key', async () => {
    const store = await connect();
    const accountId = unique('corrupt');
    await store.createAccount(account(accountId));
    const redisClient = client();
    await redisClient.set(redisKeys.accountIdByKeyId('key_corrupt'), accountId);
    await redisClient.hset(redisKeys.key(accountId, 'key_corrupt'), { id: 'key_corrupt', status: 'active' });
    redisClient.disconnect();
    await expect(store.getKey('key_corrupt')).rejects.toThrow(/corrupt key record/);
  });
});

/**
 * Usage records (issue 16): both stores apply a record alike, exactly once,
 * and read back the same balance, spend, token budgets, aggregates and
 * stream entries.
 */
describe.each(implementations)('usage contract: %s', (_name, open) => {
  let store: Store;
  let clock: ManualClock;
  beforeEach(async () => {
    clock = new ManualClock(T0);
    store = await open(clock);
  });

  const MONTH = usageMonthOf(T0);
  async function seed(accountExtra: Partial<Account> = {}, keyExtra: Partial<StoredKey> = {}) {
    const accountId = unique('usage');
    await store.createAccount(account(accountId, accountExtra));
    const key = generateCustomerKey('live');
    const record = keyRecord(key, accountId, keyExtra);
    await store.insertKey(hashCustomerKey(key), record);
    return { accountId, keyId: record.id, record };
  }
  const usage = (ids: { accountId: string; keyId: string }, extra: Partial<UsageRecord> = {}): UsageRecord => ({
    requestId: unique('req'),
    accountId: ids.accountId,
    keyId: ids.keyId,
    keyPrefix: 'gk_live_AbC4',
    family: 'chat-completions',
    style: 'chat',
    model: 'gpt-4o-mini',
    tokens: { inputTokens: 100, outputTokens: 50, cachedInputTokens: 0, cacheCreationTokens: 0 },
    costMinorUnits: 7,
    estimated: false,
    atMs: clock.now(),
    ...extra,
  });
  const counts = (inputTokens: number, outputTokens: number, cachedInputTokens = 0, cacheCreationTokens = 0) => ({
    inputTokens,
    outputTokens,
    cachedInputTokens,
    cacheCreationTokens,
  });
  const budgetsOf = async (keyId: string, plan: TokenBudgetPlan) =>
    (await store.readTokenBudgets(keyId, plan))?.map(({ scope, windowSeconds, remaining }) => ({ scope, windowSeconds, remaining }));

  describe('credit and spend', () => {
    it('debits a prepaid balance by the cost, counts the month spend of account and key, and says how it billed', async () => {
      const ids = await seed({ creditBalance: 1_000 });
      expect(await store.applyUsage(usage(ids, { costMinorUnits: 250 }), NO_TOKEN_BUDGETS)).toEqual({
        kind: 'applied',
        billing: 'prepaid',
        creditShortfall: 0,
      });
      await store.applyUsage(usage(ids, { costMinorUnits: 800 }), NO_TOKEN_BUDGETS);
      const stored = await store.getAccount(ids.accountId);
      expect(stored?.creditBalance).toBe(-50);
      expect(stored?.monthlySpend).toEqual({ [MONTH]: 1_050 });
      expect(stored).not.toHaveProperty('creditShortfall');
      // The Check refuses the next request once the balance is at or below zero.
      expect((await store.authorize({ ...ids, defaultPlan: NO_LIMITS, defaultTokenBudgets: NO_TOKEN_BUDGETS })).kind).toBe(
        'credit_exhausted',
      );
    });

    it('counts post-paid spend without a balance, and a zero-cost record as a request', async () => {
      const ids = await seed();
      expect(await store.applyUsage(usage(ids, { costMinorUnits: 30 }), NO_TOKEN_BUDGETS)).toEqual({
        kind: 'applied',
        billing: 'postpaid',
        creditShortfall: 0,
      });
      await store.applyUsage(usage(ids, { costMinorUnits: 0 }), NO_TOKEN_BUDGETS);
      const stored = await store.getAccount(ids.accountId);
      expect(stored).not.toHaveProperty('creditBalance');
      expect(stored?.monthlySpend).toEqual({ [MONTH]: 30 });
      expect((await store.authorize({ ...ids, defaultPlan: NO_LIMITS, defaultTokenBudgets: NO_TOKEN_BUDGETS })).kind).toBe('allow');
    });

    it('applies a request id once: a repeat changes nothing and answers what the first application did', async () => {
      const ids = await seed({ creditBalance: 100 });
      const record = usage(ids, { costMinorUnits: 40 });
      await store.applyUsage(record, NO_TOKEN_BUDGETS);
      for (let i = 0; i < 3; i += 1) {
        expect(await store.applyUsage({ ...record, costMinorUnits: 99 }, NO_TOKEN_BUDGETS)).toEqual({
          kind: 'duplicate',
          billing: 'prepaid',
          creditShortfall: 0,
        });
      }
      expect(await store.getAccount(ids.accountId)).toMatchObject({ creditBalance: 60, monthlySpend: { [MONTH]: 40 } });
      expect((await store.readUsage({ accountId: ids.accountId, granularity: 'hour', fromMs: T0, toMs: T0 + 1 }))?.[0]?.byKey).toEqual({
        [ids.keyId]: { ...zeroUsageTotals(), requests: 1, inputTokens: 100, outputTokens: 50, costMinorUnits: 40 },
      });
      // The same request id in another account is another request.
      const other = await seed({ creditBalance: 100 });
      expect((await store.applyUsage({ ...record, accountId: other.accountId, keyId: other.keyId }, NO_TOKEN_BUDGETS)).kind).toBe(
        'applied',
      );
    });

    it('forgets a request id 24 hours after applying it', async () => {
      const ids = await seed();
      const record = usage(ids);
      await store.applyUsage(record, NO_TOKEN_BUDGETS);
      clock.advance(USAGE_MARKER_TTL_MS - 1);
      expect((await store.applyUsage(record, NO_TOKEN_BUDGETS)).kind).toBe('duplicate');
      if (_name === 'memory') {
        clock.advance(1);
        expect((await store.applyUsage(record, NO_TOKEN_BUDGETS)).kind).toBe('applied');
      }
    });

    it('answers account_not_found for an account that does not exist, creating nothing', async () => {
      const accountId = unique('ghost');
      expect(await store.applyUsage(usage({ accountId, keyId: 'key_ghost' }), NO_TOKEN_BUDGETS)).toEqual({ kind: 'account_not_found' });
      expect(await store.getAccount(accountId)).toBeNull();
      expect(await store.readUsage({ accountId, granularity: 'day', fromMs: T0, toMs: T0 + 1 })).toBeNull();
    });

    it('stops the balance at −10^15 and keeps what it could not take as a shortfall, never losing it', async () => {
      const ids = await seed({ creditBalance: -CREDIT_LIMIT_MINOR_UNITS + 100 });
      expect(await store.applyUsage(usage(ids, { costMinorUnits: 250 }), NO_TOKEN_BUDGETS)).toEqual({
        kind: 'applied',
        billing: 'prepaid',
        creditShortfall: 150,
      });
      const record = usage(ids, { costMinorUnits: 400_000_000_000_000 });
      expect(await store.applyUsage(record, NO_TOKEN_BUDGETS)).toEqual({
        kind: 'applied',
        billing: 'prepaid',
        creditShortfall: 400_000_000_000_000,
      });
      expect(await store.applyUsage(record, NO_TOKEN_BUDGETS)).toEqual({
        kind: 'duplicate',
        billing: 'prepaid',
        creditShortfall: 400_000_000_000_000,
      });
      expect(await store.getAccount(ids.accountId)).toMatchObject({
        creditBalance: -CREDIT_LIMIT_MINOR_UNITS,
        creditShortfall: 400_000_000_000_150,
        monthlySpend: { [MONTH]: 400_000_000_000_250 },
      });
      // A top-up counts from the bound.
      expect(await store.adjustCredit(ids.accountId, 10)).toEqual({ kind: 'ok', creditBalance: -CREDIT_LIMIT_MINOR_UNITS + 10 });
    });

    it('keeps applying usage and the account readable past 2^53 − 1 of shortfall: the sum stops there, as spend does', async () => {
      const ids = await seed({ creditBalance: -CREDIT_LIMIT_MINOR_UNITS });
      // 26 answers at the dearest a response can cost: 1.04 × 10^16 the balance cannot take.
      for (let i = 0; i < 26; i += 1) {
        expect(await store.applyUsage(usage(ids, { costMinorUnits: MAX_RESPONSE_COST_MINOR_UNITS }), NO_TOKEN_BUDGETS)).toEqual({
          kind: 'applied',
          billing: 'prepaid',
          creditShortfall: MAX_RESPONSE_COST_MINOR_UNITS,
        });
      }
      expect(await store.getAccount(ids.accountId)).toMatchObject({
        creditBalance: -CREDIT_LIMIT_MINOR_UNITS,
        creditShortfall: Number.MAX_SAFE_INTEGER,
        monthlySpend: { [MONTH]: Number.MAX_SAFE_INTEGER },
      });
    });

    it('counts spend in the month of the record, and keeps only the current and previous months', async () => {
      const ids = await seed();
      const november = Date.parse('2026-11-30T23:59:59.999Z');
      clock.set(november);
      await store.applyUsage(usage(ids, { costMinorUnits: 5, atMs: november }), NO_TOKEN_BUDGETS);
      clock.set(november + 1);
      // Applied in December, but it happened in November.
      await store.applyUsage(usage(ids, { costMinorUnits: 6, atMs: november }), NO_TOKEN_BUDGETS);
      await store.applyUsage(usage(ids, { costMinorUnits: 7, atMs: november + 1 }), NO_TOKEN_BUDGETS);
      expect((await store.getAccount(ids.accountId))?.monthlySpend).toEqual({ '2026-11': 11, '2026-12': 7 });
      // Two months on (and past the hourly sweep), November goes; December, now the previous month, stays.
      clock.set(Date.parse('2027-01-15T00:00:00Z'));
      await store.applyUsage(usage(ids, { costMinorUnits: 1 }), NO_TOKEN_BUDGETS);
      clock.advance(3_600_000);
      await store.applyUsage(usage(ids, { costMinorUnits: 1 }), NO_TOKEN_BUDGETS);
      expect((await store.getAccount(ids.accountId))?.monthlySpend).toEqual({ '2026-12': 7, '2027-01': 2 });
    });
  });

  describe('spend caps and token budget overrides', () => {
    it('stores monthly spend caps and token budgets on accounts and keys, and removes them with null', async () => {
      const budget = { tokens: 100_000, windowSeconds: 60 };
      const ids = await seed(
        { monthlySpendCap: 50_000, tokenBudgets: { key: [budget] } },
        { monthlySpendCap: 9_000, tokenBudgets: [{ tokens: 5_000_000, windowSeconds: 86_400 }] },
      );
      expect(await store.getAccount(ids.accountId)).toMatchObject({ monthlySpendCap: 50_000, tokenBudgets: { key: [budget] } });
      expect(await store.getKey(ids.keyId)).toMatchObject({
        monthlySpendCap: 9_000,
        tokenBudgets: [{ tokens: 5_000_000, windowSeconds: 86_400 }],
      });
      expect(
        await store.updateAccount(ids.accountId, {
          monthlySpendCap: 1_000_000_000_000_000,
          tokenBudgets: { account: [budget], key: null },
        }),
      ).toMatchObject({ monthlySpendCap: 1_000_000_000_000_000, tokenBudgets: { account: [budget] } });
      const cleared = await store.updateAccount(ids.accountId, { monthlySpendCap: null, tokenBudgets: { account: null } });
      expect(cleared).not.toHaveProperty('monthlySpendCap');
      expect(cleared).not.toHaveProperty('tokenBudgets');
      expect(await store.updateKey(ids.keyId, { monthlySpendCap: 1, tokenBudgets: [] })).toMatchObject({
        monthlySpendCap: 1,
        tokenBudgets: [],
      });
      const { monthlySpendCap: _cap, tokenBudgets: _budgets, ...plain } = ids.record;
      expect(await store.updateKey(ids.keyId, { monthlySpendCap: null, tokenBudgets: null })).toEqual(plain);
    });
  });

  describe('token budgets', () => {
    const perMinuteTokens = (tokens: number) => ({ tokens, windowSeconds: 60 });

    it('consumes every token of a record from each budget that applies, exactly, and refills over the window', async () => {
      const ids = await seed();
      const plan = { key: [perMinuteTokens(100_000)], account: [{ tokens: 5_000_000, windowSeconds: 86_400 }] };
      expect(await budgetsOf(ids.keyId, plan)).toEqual([
        { scope: 'key', windowSeconds: 60, remaining: 100_000 },
        { scope: 'account', windowSeconds: 86_400, remaining: 5_000_000 },
      ]);
      await store.applyUsage(usage(ids, { tokens: counts(1_200, 300, 7_000, 500) }), plan);
      expect(await budgetsOf(ids.keyId, plan)).toEqual([
        { scope: 'key', windowSeconds: 60, remaining: 91_000 },
        { scope: 'account', windowSeconds: 86_400, remaining: 4_991_000 },
      ]);
      // 30 s refill 50,000 of the minute's tokens, and 1,736.1 of the day's: 7,263.9 are still out (7,264 counting the one begun), so 4,992,736 show.
      clock.advance(30_000);
      expect(await budgetsOf(ids.keyId, plan)).toEqual([
        { scope: 'key', windowSeconds: 60, remaining: 100_000 },
        { scope: 'account', windowSeconds: 86_400, remaining: 4_992_736 },
      ]);
    });

    it('is exact to the token when the window is not a whole number of µs per token', async () => {
      const ids = await seed();
      const plan = {
        key: [
          { tokens: 7, windowSeconds: 60 },
          { tokens: 100_003, windowSeconds: 3_600 },
        ],
        account: [],
      };
      await store.applyUsage(usage(ids, { tokens: counts(2, 1) }), plan);
      expect(await budgetsOf(ids.keyId, plan)).toEqual([
        { scope: 'key', windowSeconds: 60, remaining: 4 },
        { scope: 'key', windowSeconds: 3_600, remaining: 100_000 },
      ]);
      // 10^9 tokens a day is 86.4 µs a token: many records still add up to the token.
      const daily = { key: [{ tokens: 1_000_000_000, windowSeconds: 86_400 }], account: [] };
      for (let i = 0; i < 40; i += 1) await store.applyUsage(usage(ids, { tokens: counts(300, 33) }), daily);
      expect(await budgetsOf(ids.keyId, daily)).toEqual([{ scope: 'key', windowSeconds: 86_400, remaining: 1_000_000_000 - 40 * 333 }]);
    });

    it('goes into debt past the budget: exhausted until the debt has refilled to one whole token available', async () => {
      const ids = await seed();
      const plan = { key: [perMinuteTokens(1_000)], account: [] };
      await store.applyUsage(usage(ids, { tokens: counts(2_500, 0) }), plan);
      expect(await store.readTokenBudgets(ids.keyId, plan)).toEqual([
        { scope: 'key', tokens: 1_000, windowSeconds: 60, remaining: 0, resetMs: 150_000, retryAfterMs: 90_060 },
      ]);
      clock.advance(90_059);
      expect((await budgetsOf(ids.keyId, plan))?.[0]?.remaining).toBe(0);
      clock.advance(1);
      expect((await budgetsOf(ids.keyId, plan))?.[0]?.remaining).toBe(1);
    });

    it('reads a debt past 2^53 µs (285 years) as exhausted, as the Check decides it, not as an empty bucket', async () => {
      const ids = await seed();
      // One token a day is 86,400 s of debt a token: 200,000 tokens put the TAT some 548 years ahead, past 2^53 µs.
      const plan = { key: [{ tokens: 1, windowSeconds: 86_400 }], account: [] };
      await store.applyUsage(usage(ids, { tokens: counts(200_000, 0) }), plan);
      const [state] = (await store.readTokenBudgets(ids.keyId, plan))!;
      expect(state).toMatchObject({ remaining: 0 });
      // Not before the debt has refilled: at least 2^53 µs from the epoch, less now.
      expect(state!.retryAfterMs).toBeGreaterThan((2 ** 53 - clock.now() * 1000) / 1000 - 1);
      await expect(store.authorize({ ...ids, defaultPlan: NO_LIMITS, defaultTokenBudgets: plan })).resolves.toMatchObject({
        kind: 'token_budget_exhausted',
      });
    });

    it('applies overrides: key over the account key override over the plan; the account scope over the plan', async () => {
      const plan = { key: [perMinuteTokens(1_000)], account: [perMinuteTokens(10_000)] };
      const ids = await seed({ tokenBudgets: { key: [perMinuteTokens(2_000)], account: [] } });
      await store.applyUsage(usage(ids, { tokens: counts(100, 0) }), plan);
      expect(await budgetsOf(ids.keyId, plan)).toEqual([{ scope: 'key', windowSeconds: 60, remaining: 1_900 }]);
      await store.updateKey(ids.keyId, { tokenBudgets: [{ tokens: 500, windowSeconds: 3_600 }] });
      expect(await budgetsOf(ids.keyId, plan)).toEqual([{ scope: 'key', windowSeconds: 3_600, remaining: 500 }]);
      await store.applyUsage(usage(ids, { tokens: counts(100, 0) }), plan);
      expect(await budgetsOf(ids.keyId, plan)).toEqual([{ scope: 'key', windowSeconds: 3_600, remaining: 400 }]);
    });

    it('shares account budgets across the keys of an account', async () => {
      const plan = { key: [], account: [perMinuteTokens(10_000)] };
      const a = await seed();
      const keyB = generateCustomerKey('live');
      const recordB = keyRecord(keyB, a.accountId);
      await store.insertKey(hashCustomerKey(keyB), recordB);
      await store.applyUsage(usage(a, { tokens: counts(1_000, 0) }), plan);
      await store.applyUsage(usage({ accountId: a.accountId, keyId: recordB.id }, { tokens: counts(2_000, 500) }), plan);
      expect(await budgetsOf(a.keyId, plan)).toEqual([{ scope: 'account', windowSeconds: 60, remaining: 6_500 }]);
      expect(await budgetsOf(recordB.id, plan)).toEqual([{ scope: 'account', windowSeconds: 60, remaining: 6_500 }]);
    });

    it('changes no bucket without budgets, or for a record without tokens; null for an unknown key', async () => {
      const ids = await seed();
      const plan = { key: [perMinuteTokens(1_000)], account: [] };
      await store.applyUsage(usage(ids, { tokens: counts(0, 0) }), plan);
      await store.applyUsage(usage(ids), NO_TOKEN_BUDGETS);
      expect(await store.readTokenBudgets(ids.keyId, NO_TOKEN_BUDGETS)).toEqual([]);
      expect(await budgetsOf(ids.keyId, plan)).toEqual([{ scope: 'key', windowSeconds: 60, remaining: 1_000 }]);
      expect(await store.readTokenBudgets('key_nothing', plan)).toBeNull();
    });
  });

  describe('authorize: spend caps and token budgets at Check time', () => {
    const perMinuteTokens = (tokens: number) => ({ tokens, windowSeconds: 60 });
    const check = (ids: { accountId: string; keyId: string }, budgets: TokenBudgetPlan = NO_TOKEN_BUDGETS, plan: RatePlan = NO_LIMITS) =>
      store.authorize({ accountId: ids.accountId, keyId: ids.keyId, defaultPlan: plan, defaultTokenBudgets: budgets });

    it('refuses once applied usage exhausts a budget, says when one token is back, and allows again when it is', async () => {
      const ids = await seed();
      const budgets = { key: [perMinuteTokens(1_000)], account: [] };
      expect(await check(ids, budgets)).toEqual({
        kind: 'allow',
        prefix: ids.record.prefix,
        environment: 'live',
        tightestBudget: { scope: 'key', tokens: 1_000, windowSeconds: 60, remaining: 1_000, resetMs: 0, retryAfterMs: 0 },
      });
      await store.applyUsage(usage(ids, { tokens: counts(600, 400) }), budgets);
      // Exactly used up: refused until one whole token (60 ms) has refilled (a token partly refilled is not back, as in readTokenBudgets).
      expect(await check(ids, budgets)).toEqual({
        kind: 'token_budget_exhausted',
        prefix: ids.record.prefix,
        budget: { scope: 'key', tokens: 1_000, windowSeconds: 60, remaining: 0, resetMs: 60_000, retryAfterMs: 60 },
      });
      clock.advance(59);
      expect(await check(ids, budgets)).toMatchObject({ kind: 'token_budget_exhausted', budget: { retryAfterMs: 1 } });
      clock.advance(1);
      expect(await check(ids, budgets)).toMatchObject({ kind: 'allow', tightestBudget: { remaining: 1, resetMs: 59_940 } });
    });

    it('refuses a budget in debt until the debt has refilled to one whole token available', async () => {
      const ids = await seed();
      const budgets = { key: [perMinuteTokens(1_000)], account: [] };
      await store.applyUsage(usage(ids, { tokens: counts(2_500, 0) }), budgets);
      // 1,501 of the 2,500 tokens (60 ms each) must refill before one is available.
      expect(await check(ids, budgets)).toMatchObject({
        kind: 'token_budget_exhausted',
        budget: { resetMs: 150_000, retryAfterMs: 90_060 },
      });
      clock.advance(90_059);
      expect((await check(ids, budgets)).kind).toBe('token_budget_exhausted');
      clock.advance(1);
      expect(await check(ids, budgets)).toMatchObject({ kind: 'allow', tightestBudget: { remaining: 1 } });
    });

    it('consumes no tokens at Check time: only applied usage moves a budget', async () => {
      const ids = await seed();
      const budgets = { key: [perMinuteTokens(1_000)], account: [{ tokens: 50_000, windowSeconds: 86_400 }] };
      await store.applyUsage(usage(ids, { tokens: counts(100, 0) }), budgets);
      for (let i = 0; i < 5; i += 1) expect((await check(ids, budgets)).kind).toBe('allow');
      expect(await budgetsOf(ids.keyId, budgets)).toEqual([
        { scope: 'key', windowSeconds: 60, remaining: 900 },
        { scope: 'account', windowSeconds: 86_400, remaining: 49_900 },
      ]);
    });

    it('names the budget with the fewest tokens left when allowed, and the one that keeps the caller waiting longest when refused', async () => {
      const plan = { key: [perMinuteTokens(1_000)], account: [{ tokens: 2_000, windowSeconds: 3_600 }] };
      const a = await seed();
      const keyB = generateCustomerKey('live');
      const recordB = keyRecord(keyB, a.accountId);
      await store.insertKey(hashCustomerKey(keyB), recordB);
      const b = { accountId: a.accountId, keyId: recordB.id };
      await store.applyUsage(usage(a, { tokens: counts(1_500, 0) }), plan);
      // Key B's own minute is untouched; the account's hour, shared with key A, has 500 left.
      expect(await check(b, plan)).toMatchObject({ kind: 'allow', tightestBudget: { scope: 'account', tokens: 2_000, remaining: 500 } });
      // Key A: its minute is 500 tokens (30 s) in debt, and one more token (60 ms) must come back; the account's hour is not exhausted: the minute refuses.
      expect(await check(a, plan)).toMatchObject({ kind: 'token_budget_exhausted', budget: { scope: 'key', retryAfterMs: 30_060 } });
      await store.applyUsage(usage(b, { tokens: counts(600, 0) }), plan);
      // Now both are exhausted for key A: the hour keeps it waiting longer.
      expect(await check(a, plan)).toMatchObject({ kind: 'token_budget_exhausted', budget: { scope: 'account', windowSeconds: 3_600 } });
    });

    it('applies budget overrides at Check time: key over the account key override over the plan; the account scope over the plan', async () => {
      const plan = { key: [perMinuteTokens(100)], account: [] };
      const ids = await seed({ tokenBudgets: { key: [perMinuteTokens(1_000)] } });
      await store.applyUsage(usage(ids, { tokens: counts(500, 0) }), plan);
      expect(await check(ids, plan)).toMatchObject({ kind: 'allow', tightestBudget: { tokens: 1_000, remaining: 500 } });
      await store.updateKey(ids.keyId, { tokenBudgets: [{ tokens: 10, windowSeconds: 3_600 }] });
      expect(await check(ids, plan)).toMatchObject({ kind: 'allow', tightestBudget: { tokens: 10, remaining: 10 } });
      await store.updateKey(ids.keyId, { tokenBudgets: [] });
      await store.updateAccount(ids.accountId, { tokenBudgets: { account: [perMinuteTokens(400)] } });
      expect(await check(ids, plan)).toMatchObject({ kind: 'allow', tightestBudget: { scope: 'account', tokens: 400, remaining: 400 } });
      await store.updateKey(ids.keyId, { tokenBudgets: null });
      await store.updateAccount(ids.accountId, { tokenBudgets: { key: null, account: null } });
      // The plan's minute, on the same bucket: 30 s of debt is half of its 100 tokens.
      expect(await check(ids, plan)).toMatchObject({ kind: 'allow', tightestBudget: { scope: 'key', tokens: 100, remaining: 50 } });
    });

    it('refuses at the monthly spend cap of the key or of the account, the key named first, and not one unit before', async () => {
      const ids = await seed({ monthlySpendCap: 100 }, { monthlySpendCap: 50 });
      await store.applyUsage(usage(ids, { costMinorUnits: 49 }), NO_TOKEN_BUDGETS);
      expect((await check(ids)).kind).toBe('allow');
      await store.applyUsage(usage(ids, { costMinorUnits: 1 }), NO_TOKEN_BUDGETS);
      expect(await check(ids)).toEqual({ kind: 'budget_exceeded', prefix: ids.record.prefix, scope: 'key', cap: 50 });
      // Another key of the account spends the rest of the account's cap: both keys are refused, each naming the account.
      const keyB = generateCustomerKey('live');
      const recordB = keyRecord(keyB, ids.accountId);
      await store.insertKey(hashCustomerKey(keyB), recordB);
      const b = { accountId: ids.accountId, keyId: recordB.id };
      await store.applyUsage(usage(b, { costMinorUnits: 49 }), NO_TOKEN_BUDGETS);
      expect((await check(b)).kind).toBe('allow');
      await store.applyUsage(usage(b, { costMinorUnits: 1 }), NO_TOKEN_BUDGETS);
      expect(await check(b)).toEqual({ kind: 'budget_exceeded', prefix: recordB.prefix, scope: 'account', cap: 100 });
      await store.updateKey(ids.keyId, { monthlySpendCap: null });
      expect(await check(ids)).toMatchObject({ kind: 'budget_exceeded', scope: 'account' });
      await store.updateAccount(ids.accountId, { monthlySpendCap: 1_000 });
      expect((await check(ids)).kind).toBe('allow');
      // A cap of 0 refuses from the start.
      await store.updateKey(recordB.id, { monthlySpendCap: 0 });
      expect(await check(b)).toMatchObject({ kind: 'budget_exceeded', scope: 'key', cap: 0 });
    });

    it("counts the cap against the current month's spend: the first instant of the next month (UTC) allows again", async () => {
      const lastInstant = Date.parse('2026-12-31T23:59:59.999Z');
      clock.set(lastInstant);
      const ids = await seed({ monthlySpendCap: 10 }, { monthlySpendCap: 10 });
      await store.applyUsage(usage(ids, { costMinorUnits: 10 }), NO_TOKEN_BUDGETS);
      expect(await check(ids)).toMatchObject({ kind: 'budget_exceeded', scope: 'key' });
      clock.advance(1);
      expect((await check(ids)).kind).toBe('allow');
      // Usage that happened in December, applied in January, does not count against January.
      await store.applyUsage(usage(ids, { costMinorUnits: 10, atMs: lastInstant }), NO_TOKEN_BUDGETS);
      expect((await check(ids)).kind).toBe('allow');
      await store.applyUsage(usage(ids, { costMinorUnits: 10 }), NO_TOKEN_BUDGETS);
      expect(await check(ids)).toMatchObject({ kind: 'budget_exceeded', scope: 'key' });
    });

    it('decides in order: credit, spend cap, request limits, token budgets; a refusal consumes no request', async () => {
      const plan = { key: [perMinute(2)], account: [] };
      const budgets = { key: [perMinuteTokens(100)], account: [] };
      const ids = await seed({ creditBalance: 0, monthlySpendCap: 5 });
      await store.applyUsage(usage(ids, { costMinorUnits: 5, tokens: counts(100, 0) }), budgets);
      expect((await check(ids, budgets, plan)).kind).toBe('credit_exhausted');
      await store.adjustCredit(ids.accountId, 1_000);
      expect((await check(ids, budgets, plan)).kind).toBe('budget_exceeded');
      await store.updateAccount(ids.accountId, { monthlySpendCap: null });
      // The budget is exhausted: refused, and the request limit keeps both its requests.
      expect(await kinds(ids, budgets, plan, 3)).toEqual(Array(3).fill('token_budget_exhausted'));
      clock.advance(60_000);
      expect(await kinds(ids, budgets, plan, 3)).toEqual(['allow', 'allow', 'rate_limited']);
      await store.applyUsage(usage(ids, { tokens: counts(100, 0) }), budgets);
      expect((await check(ids, budgets, plan)).kind).toBe('rate_limited');
    });

    async function kinds(ids: { accountId: string; keyId: string }, budgets: TokenBudgetPlan, plan: RatePlan, times: number) {
      const out: string[] = [];
      for (let i = 0; i < times; i += 1) out.push((await check(ids, budgets, plan)).kind);
      return out;
    }
  });

  describe('aggregates', () => {
    it('sums by hour and by day, per key and per model, with the empty periods of the range', async () => {
      const ids = await seed();
      const second = keyRecord(generateCustomerKey('test'), ids.accountId, { environment: 'test' });
      await store.insertKey('unused-hash-' + second.id, second);
      const hour = Date.parse('2026-11-22T10:00:00Z');
      clock.set(hour + 3 * 3_600_000);
      await store.applyUsage(
        usage(ids, { atMs: hour + 1, tokens: counts(10, 20, 30, 40), costMinorUnits: 5, estimated: true }),
        NO_TOKEN_BUDGETS,
      );
      await store.applyUsage(usage(ids, { atMs: hour + 2, model: 'ft:gpt-4o-mini:org:x', costMinorUnits: 6 }), NO_TOKEN_BUDGETS);
      await store.applyUsage(
        usage({ accountId: ids.accountId, keyId: second.id }, { atMs: hour + 3_600_000, model: undefined, costMinorUnits: 1 }),
        NO_TOKEN_BUDGETS,
      );
      const hours = await store.readUsage({
        accountId: ids.accountId,
        granularity: 'hour',
        fromMs: hour + 59_000,
        toMs: hour + 3 * 3_600_000,
      });
      expect(hours?.map((bucket) => new Date(bucket.startMs).toISOString())).toEqual([
        '2026-11-22T10:00:00.000Z',
        '2026-11-22T11:00:00.000Z',
        '2026-11-22T12:00:00.000Z',
      ]);
      const first = {
        requests: 1,
        inputTokens: 10,
        outputTokens: 20,
        cachedInputTokens: 30,
        cacheCreationTokens: 40,
        costMinorUnits: 5,
        estimatedRequests: 1,
      };
      const other = { ...zeroUsageTotals(), requests: 1, inputTokens: 100, outputTokens: 50 };
      expect(hours?.[0]).toEqual({
        startMs: hour,
        byKey: { [ids.keyId]: addUsageTotals({ ...first }, { ...other, costMinorUnits: 6 }) },
        byModel: { 'gpt-4o-mini': first, 'ft:gpt-4o-mini:org:x': { ...other, costMinorUnits: 6 } },
      });
      expect(hours?.[1]).toEqual({
        startMs: hour + 3_600_000,
        byKey: { [second.id]: { ...other, costMinorUnits: 1 } },
        byModel: { '': { ...other, costMinorUnits: 1 } },
      });
      expect(hours?.[2]).toEqual({ startMs: hour + 2 * 3_600_000, byKey: {}, byModel: {} });
      const days = await store.readUsage({ accountId: ids.accountId, granularity: 'day', fromMs: hour, toMs: hour + 1 });
      expect(days?.[0]?.startMs).toBe(Date.parse('2026-11-22T00:00:00Z'));
      expect(days?.[0]?.byKey[ids.keyId]?.costMinorUnits).toBe(11);
      expect(days?.[0]?.byKey[second.id]?.costMinorUnits).toBe(1);
    });

    it('keeps hours 48 hours and days 400 days after they end; a record older than that adds to neither', async () => {
      const ids = await seed();
      const day = Date.parse('2026-11-22T00:00:00Z');
      clock.set(day);
      await store.applyUsage(usage(ids, { atMs: day }), NO_TOKEN_BUDGETS);
      const read = async (granularity: 'hour' | 'day') =>
        (await store.readUsage({ accountId: ids.accountId, granularity, fromMs: day, toMs: day + 1 }))?.[0]?.byKey[ids.keyId]?.requests;
      clock.set(day + 3_600_000 + 48 * 3_600_000 - 1);
      expect(await read('hour')).toBe(1);
      clock.advance(1);
      expect(await read('hour')).toBeUndefined();
      // Applied late, 49 h after it happened: its hour is gone already, its day is not.
      await store.applyUsage(usage(ids, { atMs: day }), NO_TOKEN_BUDGETS);
      expect(await read('hour')).toBeUndefined();
      expect(await read('day')).toBe(2);
      clock.set(day + 86_400_000 + 400 * 86_400_000 - 1);
      expect(await read('day')).toBe(2);
      clock.advance(1);
      expect(await read('day')).toBeUndefined();
    });
  });

  describe('usage stream', () => {
    it('appends each record once, with every documented field and how it was billed', async () => {
      const ids = await seed({ creditBalance: 10 });
      const before = await store.readUsageStream({ count: 100_000 });
      const after = before.at(-1)?.id;
      const record = usage(ids, {
        tokens: { ...counts(1, 2, 3, 4), cacheCreation1hTokens: 1, reasoningTokens: 2, webSearchCalls: 1 },
        costMinorUnits: 9,
        charge: {
          priceTableHash: '0123456789abcdef',
          pricePattern: 'gpt-4o-mini*',
          tierAboveInputTokens: 5,
          exactCostMillionths: '8500001',
          currency: { code: 'USD', exponent: 6 },
        },
        estimated: true,
        malformed: 'cache-exceeds-prompt',
      });
      expect(usageRecordProblem(record)).toBeUndefined();
      const applied = await store.applyUsage(record, NO_TOKEN_BUDGETS);
      // Where the store streams on apply (Redis standalone and Sentinel) the entry went in with the debit, billed by the script.
      expect(await store.appendUsageStream(record, applied)).toBe(store.streamsOnApply ? 'duplicate' : 'appended');
      expect(await store.appendUsageStream(record, applied)).toBe('duplicate');
      const ghost = usage({ accountId: unique('ghost'), keyId: 'key_ghost' }, { model: undefined });
      expect(await store.appendUsageStream(ghost, { kind: 'account_not_found' })).toBe('appended');
      const entries = await store.readUsageStream({ count: 10, ...(after ? { after } : {}) });
      expect(entries.map((entry) => entry.fields)).toEqual([
        {
          version: '1',
          requestId: record.requestId,
          accountId: ids.accountId,
          keyId: ids.keyId,
          keyPrefix: 'gk_live_AbC4',
          family: 'chat-completions',
          style: 'chat',
          model: 'gpt-4o-mini',
          inputTokens: '1',
          outputTokens: '2',
          cachedInputTokens: '3',
          cacheCreationTokens: '4',
          costMinorUnits: '9',
          cacheCreation5mTokens: '3',
          cacheCreation1hTokens: '1',
          reasoningTokens: '2',
          inputAudioTokens: '0',
          inputImageTokens: '0',
          outputAudioTokens: '0',
          outputImageTokens: '0',
          webSearchCalls: '1',
          exactCostMinorUnits: '8.500001',
          priceTableHash: '0123456789abcdef',
          pricePattern: 'gpt-4o-mini*',
          priceTier: '5',
          currency: 'USD',
          currencyExponent: '6',
          estimated: 'true',
          malformed: 'cache-exceeds-prompt',
          billing: 'prepaid',
          creditShortfall: '0',
          time: new Date(T0).toISOString(),
          timeMs: String(T0),
        },
        // Without a price table: no charge, and the price fields are empty.
        expect.objectContaining({
          requestId: ghost.requestId,
          model: '',
          billing: 'account_not_found',
          exactCostMinorUnits: '',
          priceTableHash: '',
          currency: '',
        }),
      ]);
      expect(entries[0]!.id).toMatch(/^\d+-\d+$/);
    });
  });
});

describe('usage: the Lua token budget arithmetic is the BigInt one', () => {
  it('agrees on buckets moved by n tokens and on the tokens not yet refilled, for budgets up to the bounds', async () => {
    const redisClient = new Redis(redis.url, { disconnectTimeout: 50 });
    try {
      const lua = `${LUA_TOKEN_BUDGET}
local out = {}
for i = 1, #ARGV, 7 do
  local tat, fraction, now, n, tokens, window, debt = tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4]), tonumber(ARGV[i + 5]), tonumber(ARGV[i + 6])
  local moved_tat, moved_fraction = tb_consume(tat, fraction, now, n, tokens, window)
  out[#out + 1] = string.format('%.0f %.0f', moved_tat, moved_fraction)
  out[#out + 1] = string.format('%.0f', tb_unrefilled(debt, fraction or 0, tokens, window))
end
return out`;
      const NOW_US = 1_795_000_000_000_000;
      const budget = fc
        .record({ windowSeconds: fc.integer({ min: 1, max: MAX_WINDOW_SECONDS }), share: fc.double({ min: 0, max: 1, noNaN: true }) })
        .map(({ windowSeconds, share }) => {
          const most = Math.min(MAX_BUDGET_TOKENS, windowSeconds * MAX_BUDGET_TOKENS_PER_SECOND);
          return { windowSeconds, tokens: Math.max(1, Math.round(most * share)) };
        });
      const unit = fc.double({ min: 0, max: 1, noNaN: true, maxExcluded: true });
      const cases = fc.sample(fc.tuple(budget, fc.integer({ min: 0, max: 4 * MAX_TOKEN_COUNT }), unit, unit, fc.boolean()), {
        numRuns: 2_000,
        seed: 16,
      });
      const edges: typeof cases = [
        [{ tokens: MAX_BUDGET_TOKENS, windowSeconds: MAX_WINDOW_SECONDS }, 4 * MAX_TOKEN_COUNT, 0.999999, 0.999999, true],
        [{ tokens: 1, windowSeconds: MAX_WINDOW_SECONDS }, 4 * MAX_TOKEN_COUNT, 0.5, 0, true],
        [{ tokens: MAX_BUDGET_TOKENS_PER_SECOND, windowSeconds: 1 }, 1, 0.999999, 0.999999, true],
        [{ tokens: 1_000_000_000, windowSeconds: 86_400 }, 333, 0, 0, false],
        [{ tokens: 7, windowSeconds: 60 }, 3, 0, 0, false],
        // A debt of exactly one token (no remainder), and one with a fraction on top of it.
        [{ tokens: 2, windowSeconds: 1 }, 1, 0.5, 0, true],
        [{ tokens: 2, windowSeconds: 1 }, 1, 0.5, 0.5, true],
      ];
      const all = [...edges, ...cases].map(([b, n, debtShare, fractionShare, filled]) => {
        const debt = Math.floor(b.windowSeconds * 1_000_000 * debtShare);
        const fraction = Math.floor(b.tokens * fractionShare);
        const stored = filled ? { tatUs: NOW_US + debt, fraction } : undefined;
        return { budget: b, n, debt, stored };
      });
      // No bucket: a TAT and fraction that are not numbers, nil in Lua.
      const reply = (await redisClient.eval(
        lua,
        0,
        ...all.flatMap((c) =>
          [c.stored?.tatUs ?? '', c.stored?.fraction ?? '', NOW_US, c.n, c.budget.tokens, c.budget.windowSeconds, c.debt].map(String),
        ),
      )) as string[];
      const mismatches = all.flatMap((c, i) => {
        const moved = consumeTokenBudget(c.stored, NOW_US, c.budget, c.n);
        const exactScaled =
          BigInt(c.stored?.tatUs ?? NOW_US) * BigInt(c.budget.tokens) +
          BigInt(c.stored?.fraction ?? 0) +
          BigInt(c.n) * BigInt(c.budget.windowSeconds) * 1_000_000n;
        const expectedMove = `${moved.tatUs} ${moved.fraction}`;
        // Tokens not yet wholly refilled: a token begun counts (the quotient rounded up).
        const windowUs = BigInt(c.budget.windowSeconds) * 1_000_000n;
        const unrefilled = (BigInt(c.debt) * BigInt(c.budget.tokens) + BigInt(c.stored?.fraction ?? 0) + windowUs - 1n) / windowUs;
        // A TAT past 2^53 µs (285 years of debt) is not exact in a double, in either language; below it both must be.
        const moveMatches = exactScaled / BigInt(c.budget.tokens) > 2n ** 53n || reply[2 * i] === expectedMove;
        return moveMatches && reply[2 * i + 1] === unrefilled.toString()
          ? []
          : [{ case: c, lua: [reply[2 * i], reply[2 * i + 1]], expectedMove }];
      });
      expect(mismatches).toEqual([]);
    } finally {
      redisClient.disconnect();
    }
  });
});

describe('redis usage specifics', () => {
  const connect = async (options: Partial<Parameters<typeof RedisStore.connect>[0]> = {}) => {
    const store = await RedisStore.connect({ url: redis.url, commandTimeoutMs: 1000, ...options });
    opened.push(store);
    return store;
  };
  const seedAccount = async (store: Store, extra: Partial<Account> = {}) => {
    const accountId = unique('usage');
    await store.createAccount(account(accountId, extra));
    return accountId;
  };
  const record = (accountId: string, extra: Partial<UsageRecord> = {}): UsageRecord => ({
    requestId: unique('req'),
    accountId,
    keyId: 'key_r',
    keyPrefix: 'gk_live_AbC4',
    family: 'messages',
    style: 'messages',
    model: 'claude-sonnet-4-5',
    tokens: { inputTokens: 3, outputTokens: 4, cachedInputTokens: 0, cacheCreationTokens: 0 },
    costMinorUnits: 2,
    estimated: false,
    atMs: Date.now(),
    ...extra,
  });

  it('writes only keys redisKeys names, under the account tag, each marker and aggregate with its TTL', async () => {
    const store = await connect();
    const accountId = await seedAccount(store, { creditBalance: 5 });
    const usage = record(accountId);
    const applied = await store.applyUsage(usage, {
      key: [{ tokens: 100, windowSeconds: 60 }],
      account: [{ tokens: 1_000, windowSeconds: 3_600 }],
    });
    await store.appendUsageStream(usage, applied);
    const redisClient = new Redis(redis.url, { disconnectTimeout: 50 });
    try {
      const names = (await redisClient.keys(`*${accountId}*`)).sort();
      const hour = periodName(usage.atMs, 'hour');
      const day = periodName(usage.atMs, 'day');
      expect(names).toEqual(
        [
          redisKeys.account(accountId),
          redisKeys.usageApplied(accountId, usage.requestId),
          redisKeys.usageHour(accountId, hour),
          redisKeys.usageDay(accountId, day),
          redisKeys.usageStreamed(accountId, usage.requestId),
        ].sort(),
      );
      const ttl = await redisClient.pttl(redisKeys.usageApplied(accountId, usage.requestId));
      expect(ttl).toBeGreaterThan(USAGE_MARKER_TTL_MS - 60_000);
      expect(ttl).toBeLessThanOrEqual(USAGE_MARKER_TTL_MS);
      // A TTL from the service's clock: on Redis's clock it ends when the bucket's retention does, give or take the call's latency.
      const endsNear = async (name: string, expected: number) =>
        expect(Math.abs((await redisClient.pexpiretime(name)) - expected)).toBeLessThanOrEqual(5_000);
      await endsNear(redisKeys.usageHour(accountId, hour), bucketExpiresAtMs(usage.atMs, 'hour'));
      await endsNear(redisKeys.usageDay(accountId, day), bucketExpiresAtMs(usage.atMs, 'day'));
      const fields = Object.keys(await redisClient.hgetall(redisKeys.account(accountId))).sort();
      const month = usageMonthOf(usage.atMs);
      expect(fields).toEqual(
        [
          'id',
          'name',
          'status',
          'createdAt',
          'creditBalance',
          redisKeys.activeKeysIndexedField(),
          redisKeys.accountSpendField(month),
          redisKeys.keySpendField('key_r', month),
          redisKeys.keyTokenBucketField('key_r'),
          redisKeys.accountTokenBucketField(),
          redisKeys.usageSweepField(),
        ].sort(),
      );
    } finally {
      redisClient.disconnect();
    }
  });

  it('refuses a record for an account whose balance is unreadable, writing nothing', async () => {
    const store = await connect();
    const accountId = await seedAccount(store, { creditBalance: 5 });
    const redisClient = new Redis(redis.url, { disconnectTimeout: 50 });
    try {
      await redisClient.hset(redisKeys.account(accountId), 'creditBalance', '1e3');
      const before = await redisClient.hgetall(redisKeys.account(accountId));
      const usage = record(accountId);
      await expect(store.applyUsage(usage, NO_TOKEN_BUDGETS)).rejects.toThrow(CorruptRecordError);
      expect(await redisClient.hgetall(redisKeys.account(accountId))).toEqual(before);
      expect(await redisClient.exists(redisKeys.usageApplied(accountId, usage.requestId))).toBe(0);
    } finally {
      redisClient.disconnect();
    }
  });

  it('bounds the stream near USAGE_STREAM_MAX_LEN (MAXLEN ~ trims whole nodes of 100 entries)', async () => {
    const store = await connect({ usageStreamMaxLength: 50 });
    const accountId = await seedAccount(store);
    for (let i = 0; i < 400; i += 1)
      await store.appendUsageStream(record(accountId), { kind: 'applied', billing: 'postpaid', creditShortfall: 0 });
    const redisClient = new Redis(redis.url, { disconnectTimeout: 50 });
    try {
      const length = await redisClient.xlen(redisKeys.usageStream());
      expect(length).toBeGreaterThanOrEqual(50);
      expect(length).toBeLessThanOrEqual(150);
    } finally {
      redisClient.disconnect();
    }
  });
});
