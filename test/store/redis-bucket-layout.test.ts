import { NO_TOKEN_BUDGETS } from '../../src/accounts/limits/token-budgets';
import type { RatePlan } from '../../src/accounts/limits/rate-limits';
import { generateCustomerKey, hashCustomerKey } from '../../src/keys/customer-key';
import { redisKeys } from '../../src/store/redis/redis-keys';
import { authorizePlanArgument } from '../../src/store/redis/authorize-plan';
import { parsePackedBuckets } from '../../src/store/redis/redis-records';
import { storeOnTestRedis } from '../support/store-on-test-redis';

/**
 * The rate-limit buckets are packed, one account hash field per key and one
 * for the account (redisKeys.keyBucketField), and the hourly sweep deletes
 * those with no window ahead. And the EVALSHA carries what the decision
 * needs and no more.
 */
const nowMs = Date.parse('2026-11-27T12:00:00.000Z');
const nowUs = () => nowMs * 1000;

// Key: 3 a minute (a request every 20 s); account: 100 an hour (every 36 s).
const plan: RatePlan = Object.freeze({ key: [{ limit: 3, windowSeconds: 60 }], account: [{ limit: 100, windowSeconds: 3600 }] });

const world = storeOnTestRedis({ commandTimeoutMs: 1000, clockOverride: () => nowMs });

async function accountWithKeys(name: string, count: number): Promise<{ accountId: string; keyIds: string[] }> {
  const suffix = `${Date.now()}${Math.floor(Math.random() * 1e6)}`;
  const accountId = `acct_${name}${suffix}`;
  expect(await world.store.createAccount({ id: accountId, name, status: 'active', createdAt: '2026-11-27T12:00:00.000Z' })).toBe(true);
  const keyIds: string[] = [];
  for (let i = 0; i < count; i++) {
    const keyId = `key_${name}${i}${suffix}`;
    const key = generateCustomerKey('live');
    expect(
      await world.store.insertKey(hashCustomerKey(key), {
        id: keyId,
        accountId,
        prefix: key.slice(0, 12),
        name,
        environment: 'live',
        status: 'active',
        createdAt: '2026-11-27T12:00:00.000Z',
      }),
    ).toBe('created');
    keyIds.push(keyId);
  }
  return { accountId, keyIds };
}

const authorize = (accountId: string, keyId: string) =>
  world.store.authorize({ accountId, keyId, defaultPlan: plan, defaultTokenBudgets: NO_TOKEN_BUDGETS });

async function bucketFields(accountId: string): Promise<Record<string, Map<number, number> | undefined>> {
  const hash = await world.client.hgetallBuffer(redisKeys.account(accountId));
  return Object.fromEntries(
    Object.entries(hash)
      .filter(([field]) => field.startsWith(redisKeys.keyBucketFieldPrefix()) || field === redisKeys.accountBucketField())
      .map(([field, value]) => [field, parsePackedBuckets(value)]),
  );
}

it('packs each key’s windows into one field and the account’s into another: two bucket fields per decision, however many windows', async () => {
  const { accountId, keyIds } = await accountWithKeys('packed', 3);
  const windows: RatePlan = Object.freeze({
    key: [
      { limit: 100, windowSeconds: 1 },
      { limit: 1000, windowSeconds: 60 },
      { limit: 10000, windowSeconds: 86_400 },
    ],
    account: [
      { limit: 1000, windowSeconds: 60 },
      { limit: 100000, windowSeconds: 86_400 },
    ],
  });
  for (const keyId of keyIds) {
    expect((await world.store.authorize({ accountId, keyId, defaultPlan: windows, defaultTokenBudgets: NO_TOKEN_BUDGETS })).kind).toBe(
      'allow',
    );
  }
  const fields = await bucketFields(accountId);
  expect(Object.keys(fields).sort()).toEqual([redisKeys.accountBucketField(), ...keyIds.map((id) => redisKeys.keyBucketField(id))].sort());
  for (const keyId of keyIds) expect([...fields[redisKeys.keyBucketField(keyId)]!.keys()]).toEqual([1, 60, 86_400]);
  expect([...fields[redisKeys.accountBucketField()]!.entries()]).toEqual([
    [60, nowUs() + 3 * 60_000],
    [86_400, nowUs() + 3 * 864_000],
  ]);
});

/** A binary argument as MONITOR prints it (Redis's sdscatrepr, then ioredis's reading of the quoted text). */
function monitorRepr(bytes: Buffer): string {
  const escapes: Record<number, string> = { 0x5c: '\\\\', 0x22: '\\"', 0x0a: '\\n', 0x0d: '\\r', 0x09: '\\t', 0x07: '\\a', 0x08: '\\b' };
  return [...bytes]
    .map((byte) => escapes[byte] ?? (byte >= 0x20 && byte < 0x7f ? String.fromCharCode(byte) : `\\x${byte.toString(16).padStart(2, '0')}`))
    .join('');
}

it('an EVALSHA of the authorize script carries the two records, the key id, the time and the packed plan, nothing else', async () => {
  const { accountId, keyIds } = await accountWithKeys('argv', 1);
  const keyId = keyIds[0]!;
  expect((await authorize(accountId, keyId)).kind).toBe('allow'); // loads the script
  const monitor = await world.client.monitor();
  const seen: string[][] = [];
  monitor.on('monitor', (_time: string, args: string[]) => {
    if (/^evalsha$/i.test(args[0] ?? '')) seen.push(args);
  });
  try {
    // MONITOR is on once Redis answered its OK; a PING through it marks where the decision's commands end.
    expect((await authorize(accountId, keyId)).kind).toBe('allow');
    await world.client.ping();
    await new Promise((resolve) => setTimeout(resolve, 100));
  } finally {
    monitor.disconnect();
  }
  expect(seen).toHaveLength(1);
  // EVALSHA sha numkeys account key keyId time (the tests' clock, a packed double) plan
  const time = Buffer.alloc(8);
  time.writeDoubleLE(nowUs());
  expect(seen[0]!.slice(2)).toEqual([
    '2',
    redisKeys.account(accountId),
    redisKeys.key(accountId, keyId),
    keyId,
    monitorRepr(time),
    monitorRepr(authorizePlanArgument(plan, NO_TOKEN_BUDGETS).buffer),
  ]);
});
