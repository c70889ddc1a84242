import { NO_TOKEN_BUDGETS } from '../../src/accounts/limits/token-budgets';
import { generateCustomerKey, hashCustomerKey } from '../../src/keys/customer-key';
import { OPERATOR } from '../../src/accounts/customer-identity';
import { principalKey } from '../../src/accounts/members';
import { redisKeys } from '../../src/store/redis/redis-keys';
import { parsePackedBuckets } from '../../src/store/redis/redis-records';
import { storeOnTestRedis } from '../support/store-on-test-redis';

/**
 * redis-keys.ts is the one place that knows the key layout: every key the
 * store (its Lua scripts included) writes for an account is one that
 * redisKeys names, and the rate-limit buckets are the account hash's fields
 * that redisKeys names.
 */

const world = storeOnTestRedis({ commandTimeoutMs: 1000 });

it('writes exactly the keys redisKeys names, buckets being one account field per key and one for the account', async () => {
  // Unique ids, so that a shared Redis (TEST_REDIS_URL) holding other data does not matter.
  const suffix = `${Date.now()}${Math.floor(Math.random() * 1e6)}`;
  const accountId = `acct_layout${suffix}`;
  const keyId = `key_layout${suffix}`;
  const key = generateCustomerKey('live');
  const keyHash = hashCustomerKey(key);
  expect(await world.store.createAccount({ id: accountId, name: 'Layout', status: 'active', createdAt: '2026-11-22T12:00:00.000Z' })).toBe(
    true,
  );
  const record = {
    id: keyId,
    accountId,
    prefix: key.slice(0, 12),
    name: 'layout',
    environment: 'live' as const,
    status: 'active' as const,
    createdAt: '2026-11-22T12:00:00.000Z',
  };
  expect(await world.store.insertKey(keyHash, record)).toBe('created');
  const plan = { key: [{ limit: 5, windowSeconds: 60 }], account: [{ limit: 50, windowSeconds: 3600 }] };
  expect((await world.store.authorize({ accountId, keyId, defaultPlan: plan, defaultTokenBudgets: NO_TOKEN_BUDGETS })).kind).toBe('allow');

  const written = [...(await world.client.keys(`*${suffix}*`)), ...(await world.client.keys(`*${keyHash}*`))].sort();
  expect(written).toEqual(
    [
      redisKeys.keyIdsByHash(keyHash),
      redisKeys.accountIdByKeyId(keyId),
      redisKeys.account(accountId),
      redisKeys.key(accountId, keyId),
      redisKeys.accountKeys(accountId),
      redisKeys.activeKeys(accountId),
    ].sort(),
  );
  const accountHash = await world.client.hgetallBuffer(redisKeys.account(accountId));
  const bucketFields = Object.keys(accountHash).filter(
    (field) => field.startsWith(redisKeys.keyBucketFieldPrefix()) || field === redisKeys.accountBucketField(),
  );
  expect(bucketFields.sort()).toEqual([redisKeys.accountBucketField(), redisKeys.keyBucketField(keyId)].sort());
  // One field per key and one for the account, each holding all of its windows.
  const keyBuckets = parsePackedBuckets(accountHash[redisKeys.keyBucketField(keyId)]);
  const accountBuckets = parsePackedBuckets(accountHash[redisKeys.accountBucketField()]);
  expect([...(keyBuckets?.keys() ?? [])]).toEqual([60]);
  expect([...(accountBuckets?.keys() ?? [])]).toEqual([3600]);
  // A TAT is a whole number of µs, one emission interval (12 s, 72 s) past the decision.
  const decidedUs = Number(accountHash[redisKeys.bucketSweepField()]!.toString()) - 3_600_000_000;
  expect(keyBuckets?.get(60)).toBe(decidedUs + 12_000_000);
  expect(accountBuckets?.get(3600)).toBe(decidedUs + 72_000_000);
  expect(await world.client.hexists(redisKeys.account(accountId), redisKeys.bucketSweepField())).toBe(1);
  // The account hash never expires: it is the account record.
  expect(await world.client.pttl(redisKeys.account(accountId))).toBe(-1);
  expect(await world.client.sismember(redisKeys.accounts(), accountId)).toBe(1);
});

it('writes members, their principal index and the account audit trail only where redisKeys says', async () => {
  const suffix = `${Date.now()}${Math.floor(Math.random() * 1e6)}`;
  const accountId = `acct_members${suffix}`;
  await world.store.createAccount({ id: accountId, name: 'Members', status: 'active', createdAt: '2026-11-22T12:00:00.000Z' });
  const identity = { issuer: 'https://login.example.com', subject: `sub${suffix}`, verifiedEmail: `inv${suffix}@example.com` };
  const base = { accountId, addedAt: '2026-11-22T12:00:00.000Z', addedBy: OPERATOR };
  await world.store.addMember({
    ...base,
    id: `mem_a${suffix}`,
    role: 'owner',
    principal: { kind: 'invitation', email: identity.verifiedEmail },
  });
  await world.store.addMember({
    ...base,
    id: `mem_b${suffix}`,
    role: 'viewer',
    principal: { kind: 'invitation', email: `other${suffix}@example.com` },
  });
  expect(await world.store.bindInvitations(identity, Date.parse('2026-11-22T12:01:00Z'))).toHaveLength(1);
  await world.store.appendAudit({ action: 'member.bind', actor: OPERATOR, accountId, memberId: `mem_a${suffix}` }, Date.now());

  const written = (await world.client.keys(`*${suffix}*`)).sort();
  expect(written).toEqual(
    [
      redisKeys.account(accountId),
      redisKeys.members(accountId),
      redisKeys.memberPrincipals(accountId),
      redisKeys.accountAudit(accountId),
      redisKeys.principalAccounts(principalKey({ kind: 'identity', issuer: identity.issuer, subject: identity.subject })),
      redisKeys.principalAccounts(principalKey({ kind: 'invitation', email: `other${suffix}@example.com` })),
    ].sort(),
  );
  // The bound invitation's index entry is gone; the identity's names the account.
  expect(await world.client.exists(redisKeys.principalAccounts(principalKey({ kind: 'invitation', email: identity.verifiedEmail })))).toBe(
    0,
  );
  expect(await world.client.smembers(written.find((name) => name.includes('identity'))!)).toEqual([accountId]);
});
