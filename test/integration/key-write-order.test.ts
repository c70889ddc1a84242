import { NO_TOKEN_BUDGETS } from '../../src/accounts/limits/token-budgets';
import Redis from 'ioredis';
import { ManualClock } from '../../src/platform/clock';
import { mintKey, successorTerms } from '../../src/keys/key-minting';
import { RedisStore } from '../../src/store/redis/redis-store';
import { redisKeys } from '../../src/store/redis/redis-keys';
import { createOfficialCheckClient, decisionFor, type OfficialCheckClient } from '../support/envoy-official-client';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { keyIdsOf, startAppUnderTest, type AppUnderTest } from '../support/running-app';
import { registerSecrets } from '../support/secret-scan';

/**
 * Issue 13, defect 3: a rotation or a key creation that fails half-way must
 * leave the old key working and nothing a retry trips over. Faults are
 * injected on a real Redis with ACLs: the service connects as a user that
 * may read but not write the global key indexes (or may not run scripts),
 * exactly what a failed or timed-out write looks like to the service. A
 * refused write is answered at once, so the app keeps the tests' 1 s Redis
 * deadline: at production's 50 ms, a Check on a busy machine could time out
 * and read store_unavailable where the test expects the key's own answer.
 */
const APP_USER = 'gwa-app';
const APP_PASSWORD = 'app-password-for-acl-tests';
const FULL_ACCESS = ['~gwa:{acct:*', '~gwa:accounts', '~gwa:audit', '~gwa:keyhash:*', '~gwa:keyid:*', '~gwa:{webhooks}:*', '+@all'];
const INDEXES_READ_ONLY = [
  '~gwa:{acct:*',
  '~gwa:accounts',
  '~gwa:audit',
  '%R~gwa:keyhash:*',
  '%R~gwa:keyid:*',
  '~gwa:{webhooks}:*',
  '+@all',
];

let redis: TestRedis;
let operator: Redis;
let app: AppUnderTest;
let check: OfficialCheckClient;

async function grant(rules: readonly string[]): Promise<void> {
  await operator.call('ACL', 'SETUSER', APP_USER, 'reset', 'on', `>${APP_PASSWORD}`, ...rules);
}

beforeAll(async () => {
  redis = await startTestRedis();
  operator = new Redis(redis.url, { disconnectTimeout: 50 });
  await grant(FULL_ACCESS);
  const url = new URL(redis.url);
  url.username = APP_USER;
  url.password = APP_PASSWORD;
  app = await startAppUnderTest({ redisUrl: url.toString() });
  check = createOfficialCheckClient(app.grpcAddress);
  expect((await app.admin('POST', '/admin/accounts', { id: 'acme', name: 'Acme' })).status).toBe(201);
});
afterAll(async () => {
  check?.close();
  await grant(FULL_ACCESS);
  await app?.close();
  operator?.disconnect();
  await redis?.stop();
});

const decide = (key: string) => decisionFor(check, key);
const keyIdsOfAcme = () => keyIdsOf(app, 'acme');

it('a rotation whose index writes fail answers 503, leaves the old key working and unchanged, and succeeds when retried', async () => {
  const created = await app.admin('POST', '/admin/accounts/acme/keys', { name: 'prod', expiresAt: '2099-01-01T00:00:00Z' });
  expect(created.status).toBe(201);
  const old: { id: string; key: string } = created.body;
  expect(await decide(old.key)).toBe('allow');
  const before = await app.admin('GET', `/admin/keys/${old.id}`);
  const keysBefore = await keyIdsOfAcme();

  await grant(INDEXES_READ_ONLY);
  const failed = await app.admin('POST', `/admin/keys/${old.id}/rotate`, { graceSeconds: 0 });
  expect(failed.status).toBe(503);
  expect(failed.body.error.code).toBe('store_unavailable');
  expect(failed.body).not.toHaveProperty('key');
  expect(await decide(old.key)).toBe('allow');
  expect(await app.admin('GET', `/admin/keys/${old.id}`)).toEqual(before);
  expect(await keyIdsOfAcme()).toEqual(keysBefore);

  await grant(FULL_ACCESS);
  const retried = await app.admin('POST', `/admin/keys/${old.id}/rotate`, { graceSeconds: 0 });
  expect(retried.status).toBe(201);
  expect(retried.body).toMatchObject({ replaces: old.id, oldKey: { id: old.id, status: 'revoked', replacedBy: retried.body.id } });
  expect(await decide(old.key)).toBe('key_revoked');
  expect(await decide(retried.body.key)).toBe('allow');
});

it('a key creation whose index writes fail answers 503 and stores no key record; the retry creates one usable key', async () => {
  const keysBefore = await keyIdsOfAcme();
  await grant(INDEXES_READ_ONLY);
  const failed = await app.admin('POST', '/admin/accounts/acme/keys', { name: 'ci' });
  expect(failed.status).toBe(503);
  expect(failed.body).not.toHaveProperty('key');
  expect(await keyIdsOfAcme()).toEqual(keysBefore);

  await grant(FULL_ACCESS);
  const retried = await app.admin('POST', '/admin/accounts/acme/keys', { name: 'ci' });
  expect(retried.status).toBe(201);
  expect(await keyIdsOfAcme()).toEqual([...keysBefore, retried.body.id].sort());
  expect(await decide(retried.body.key)).toBe('allow');
});

describe('the script step failing after the indexes were written', () => {
  const clock = new ManualClock(Date.parse('2026-11-23T12:00:00Z'));
  let full: RedisStore;
  let noScripts: RedisStore;
  beforeAll(async () => {
    await operator.call('ACL', 'SETUSER', 'gwa-noscripts', 'reset', 'on', '>noscripts-password', '~*', '+@all', '-@scripting');
    const url = new URL(redis.url);
    full = await RedisStore.connect({ url: redis.url, commandTimeoutMs: 1000, clockOverride: () => clock.now() });
    url.username = 'gwa-noscripts';
    url.password = 'noscripts-password';
    noScripts = await RedisStore.connect({ url: url.toString(), commandTimeoutMs: 1000, clockOverride: () => clock.now() });
  });
  afterAll(async () => {
    await Promise.all([full?.close(), noScripts?.close()]);
  });

  it('leaves the old key allowed and unchanged; the orphan index answers unknown_key; the same rotation retried succeeds', async () => {
    const accountId = `orphans-${process.pid}`;
    await full.createAccount({ id: accountId, name: 'Orphans', status: 'active', createdAt: new Date(clock.now()).toISOString() });
    const old = mintKey({ accountId, name: 'old', environment: 'live' }, clock.now());
    registerSecrets(old.key);
    expect(await full.insertKey(old.keyHash, old.record)).toBe('created');
    const plan = { defaultPlan: { key: [], account: [] }, defaultTokenBudgets: NO_TOKEN_BUDGETS };

    const next = mintKey(successorTerms(old.record), clock.now());
    registerSecrets(next.key);
    const request = { oldKeyId: old.record.id, newKeyHash: next.keyHash, newKey: next.record, graceSeconds: 0 };
    await expect(noScripts.rotateKey(request)).rejects.toThrow(/Redis command failed/);

    expect((await full.authorize({ accountId, keyId: old.record.id, ...plan })).kind).toBe('allow');
    expect(await full.getKey(old.record.id)).toEqual(old.record);
    // The new key's index may exist without its record: it resolves, and is refused as unknown, never allowed.
    const orphan = await full.resolveKeyHash(next.keyHash);
    expect(orphan).toEqual({ keyId: next.record.id, accountId });
    expect((await full.authorize({ ...orphan!, ...plan })).kind).toBe('unknown_key');
    expect(await full.getKey(next.record.id)).toBeNull();
    expect((await full.listKeys(accountId))?.map((key) => key.id)).toEqual([old.record.id]);

    expect(await full.rotateKey(request)).toMatchObject({ kind: 'rotated', oldKey: { status: 'revoked' }, newKey: { id: next.record.id } });
    expect((await full.authorize({ accountId, keyId: old.record.id, ...plan })).kind).toBe('key_revoked');
    expect((await full.authorize({ accountId, keyId: next.record.id, ...plan })).kind).toBe('allow');
    expect(await operator.get(redisKeys.keyIdsByHash(next.keyHash))).toBe(`${next.record.id} ${accountId}`);
  });
});
