/**
 * Seeds accounts and keys for the benchmark. The bulk is written straight in
 * the store's Redis layout (src/store/redis/redis-keys.ts and
 * redis-records.ts) with pipelines, which is ~50x faster than one admin call
 * per key; the rate-limited keys go through RedisStore itself, and a sample
 * of the bulk is read back through RedisStore, so both paths are known to
 * agree.
 */
import Redis from 'ioredis';
import { generateCustomerKey, displayPrefixOf, hashCustomerKey } from '../../src/keys/customer-key';
import { redisKeys } from '../../src/store/redis/redis-keys';
import { accountToFields, keyToFields } from '../../src/store/redis/redis-records';
import { RedisStore } from '../../src/store/redis/redis-store';
import type { Account, StoredKey } from '../../src/keys/key-records';
import { restrictionsText, type KeyRestrictions } from '../../src/keys/key-restrictions';

export interface SeedOptions {
  /** Keys to create (besides the rate-limited ones). */
  keys: number;
  /** Keys per account (accounts = keys / keysPerAccount). */
  keysPerAccount: number;
  /** Keys whose own limit is 1 per day: after their first request they are always refused with 429. */
  rateLimitedKeys: number;
  /** How many plaintext keys to keep for the traffic (evenly spread over all seeded keys). */
  keep: number;
  /** Restrictions every seeded key carries (the rate-limited ones too); absent: none, as most keys have. */
  restrictions?: KeyRestrictions;
  /** A prepaid balance (minor units) for every seeded account, so each metered Check holds credit; absent: postpaid, as most are. */
  creditBalance?: number;
}

export interface SeededKeys {
  /** Plaintext of `keep` keys, spread evenly over the whole seeded key space. */
  kept: string[];
  rateLimited: string[];
  accounts: number;
  keys: number;
  seconds: number;
}

const PIPELINE_KEYS = 2_000;
const PIPELINES_IN_FLIGHT = 4;

export function accountIdOf(index: number): string {
  return `bench-acct-${index}`;
}

export async function seedKeys(redisUrl: string, options: SeedOptions, progress: (text: string) => void): Promise<SeededKeys> {
  const started = Date.now();
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: null, enableAutoPipelining: false });
  const createdAt = new Date().toISOString();
  const accountCount = Math.max(1, Math.ceil(options.keys / options.keysPerAccount));
  const stride = Math.max(1, Math.floor(options.keys / Math.max(1, options.keep)));
  const kept: string[] = [];
  try {
    // Accounts.
    for (let first = 0; first < accountCount; first += PIPELINE_KEYS * 4) {
      const pipeline = redis.pipeline();
      const ids: string[] = [];
      for (let i = first; i < Math.min(accountCount, first + PIPELINE_KEYS * 4); i += 1) {
        const account: Account = {
          id: accountIdOf(i),
          name: `Bench account ${i}`,
          status: 'active',
          createdAt,
          ...(options.creditBalance !== undefined ? { creditBalance: options.creditBalance } : {}),
        };
        pipeline.hset(redisKeys.account(account.id), ...accountToFields(account));
        ids.push(account.id);
      }
      pipeline.sadd(redisKeys.accounts(), ...ids);
      await execOrThrow(pipeline);
    }

    // Keys, a few pipelines in flight at a time.
    const inFlight = new Set<Promise<void>>();
    let lastReport = Date.now();
    for (let first = 0; first < options.keys; first += PIPELINE_KEYS) {
      const pipeline = redis.pipeline();
      for (let i = first; i < Math.min(options.keys, first + PIPELINE_KEYS); i += 1) {
        const plaintext = generateCustomerKey(i % 10 === 9 ? 'test' : 'live');
        const key: StoredKey = {
          id: `key_bench${i}`,
          accountId: accountIdOf(i % accountCount),
          prefix: displayPrefixOf(plaintext),
          name: `bench key ${i}`,
          environment: plaintext.startsWith('gk_test_') ? 'test' : 'live',
          status: 'active',
          createdAt,
          ...(options.restrictions ? { restrictions: options.restrictions } : {}),
        };
        writeKey(pipeline, hashCustomerKey(plaintext), key);
        if (i % stride === 0 && kept.length < options.keep) kept.push(plaintext);
      }
      const done: Promise<void> = execOrThrow(pipeline).then(() => void inFlight.delete(done));
      inFlight.add(done);
      if (inFlight.size >= PIPELINES_IN_FLIGHT) await Promise.race(inFlight);
      if (Date.now() - lastReport > 5000) {
        lastReport = Date.now();
        progress(`  seeded ${first.toLocaleString('en-US')} / ${options.keys.toLocaleString('en-US')} keys`);
      }
    }
    await Promise.all(inFlight);
  } finally {
    redis.disconnect();
  }

  // The rate-limited keys, and a read-back of the bulk, through the store itself.
  const store = await RedisStore.connect({ url: redisUrl, commandTimeoutMs: 2000 });
  const rateLimited: string[] = [];
  try {
    // All rate-limited keys live in one account: its active-key cap must hold them.
    const account: Account = {
      id: 'bench-acct-limited',
      name: 'Bench limited',
      status: 'active',
      createdAt,
      maxActiveKeys: options.rateLimitedKeys,
      ...(options.creditBalance !== undefined ? { creditBalance: options.creditBalance } : {}),
    };
    await store.createAccount(account);
    for (let i = 0; i < options.rateLimitedKeys; i += 1) {
      const plaintext = generateCustomerKey('live');
      const result = await store.insertKey(hashCustomerKey(plaintext), {
        id: `key_benchlimited${i}`,
        accountId: account.id,
        prefix: displayPrefixOf(plaintext),
        name: `bench limited key ${i}`,
        environment: 'live',
        status: 'active',
        createdAt,
        limits: [{ limit: 1, windowSeconds: 86_400 }],
        ...(options.restrictions ? { restrictions: options.restrictions } : {}),
      });
      if (result !== 'created') throw new Error(`seeding a rate-limited key failed: ${JSON.stringify(result)}`);
      rateLimited.push(plaintext);
    }
    for (const plaintext of [kept[0], kept.at(-1)]) {
      if (plaintext === undefined) continue;
      const ids = await store.resolveKeyHash(hashCustomerKey(plaintext));
      const key = ids ? await store.getKey(ids.keyId) : null;
      if (
        !key ||
        key.prefix !== displayPrefixOf(plaintext) ||
        key.status !== 'active' ||
        restrictionsText(key.restrictions) !== restrictionsText(options.restrictions)
      ) {
        throw new Error('seeded keys do not read back through RedisStore: the bench layout is out of date');
      }
    }
  } finally {
    await store.close();
  }
  return { kept, rateLimited, accounts: accountCount, keys: options.keys, seconds: (Date.now() - started) / 1000 };
}

/** The same records RedisStore.insertKey writes, in the same layout. */
function writeKey(pipeline: ReturnType<Redis['pipeline']>, keyHash: string, key: StoredKey): void {
  pipeline.hset(redisKeys.key(key.accountId, key.id), ...keyToFields(key));
  pipeline.sadd(redisKeys.accountKeys(key.accountId), key.id);
  pipeline.set(redisKeys.keyIdsByHash(keyHash), `${key.id} ${key.accountId}`);
  pipeline.set(redisKeys.accountIdByKeyId(key.id), key.accountId);
}

async function execOrThrow(pipeline: ReturnType<Redis['pipeline']>): Promise<void> {
  const results = (await pipeline.exec()) ?? [];
  const failed = results.find(([error]) => error);
  if (failed?.[0]) throw failed[0];
}
