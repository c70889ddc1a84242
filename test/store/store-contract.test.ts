import { generateCustomerKey, hashCustomerKey } from '../../src/keys/customer-key';
import { MemoryStore } from '../../src/store/memory-store';
import { RedisStore } from '../../src/store/redis-store';
import type { Account, Store, StoredKey } from '../../src/store/store';
import { startTestRedis, type TestRedis } from '../support/redis-server';

/**
 * One contract, two implementations: the in-memory store (the embedded
 * default) must behave exactly like the Redis store.
 */
const account = (id: string): Account => ({ id, name: `Account ${id}`, status: 'active', createdAt: '2026-11-22T00:00:00.000Z' });
const keyRecord = (key: string, accountId: string, extra: Partial<StoredKey> = {}): StoredKey => ({
  id: `key_${hashCustomerKey(key).slice(0, 10)}`,
  accountId,
  prefix: key.slice(0, 12),
  name: 'ci',
  environment: 'live',
  status: 'active',
  createdAt: '2026-11-22T00:00:01.000Z',
  ...extra,
});

let redis: TestRedis;
const opened: Store[] = [];
beforeAll(async () => {
  redis = await startTestRedis();
});
afterAll(async () => {
  await Promise.all(opened.map((store) => store.close()));
  await redis?.stop();
});

const implementations: [string, () => Promise<Store>][] = [
  ['memory', async () => new MemoryStore()],
  [
    'redis',
    async () => {
      const store = await RedisStore.connect({ url: redis.url, commandTimeoutMs: 1000 });
      opened.push(store);
      return store;
    },
  ],
];

describe.each(implementations)('store contract: %s', (_name, open) => {
  let store: Store;
  let run = 0;
  const unique = (base: string) => `${base}-${process.pid}-${(run += 1)}-${Math.random().toString(36).slice(2, 8)}`;
  beforeEach(async () => {
    store = await open();
  });

  it('creates an account once and refuses a second create with the same id', async () => {
    const id = unique('acme');
    expect(await store.createAccount(account(id))).toBe(true);
    expect(await store.createAccount({ ...account(id), name: 'Impostor' })).toBe(false);
    expect(await store.getAccount(id)).toEqual(account(id));
  });

  it('returns null for an account that does not exist', async () => {
    expect(await store.getAccount(unique('nobody'))).toBeNull();
  });

  it('finds a stored key by its hash with every field intact', async () => {
    const id = unique('acme');
    await store.createAccount(account(id));
    const key = generateCustomerKey('live');
    const record = keyRecord(key, id, { expiresAt: '2027-01-01T00:00:00.000Z' });
    expect(await store.insertKey(hashCustomerKey(key), record)).toBe('created');
    expect(await store.findKeyByHash(hashCustomerKey(key))).toEqual(record);
  });

  it('keeps a revoked status', async () => {
    const id = unique('acme');
    await store.createAccount(account(id));
    const key = generateCustomerKey('test');
    const record = keyRecord(key, id, { status: 'revoked', environment: 'test' });
    await store.insertKey(hashCustomerKey(key), record);
    expect(await store.findKeyByHash(hashCustomerKey(key))).toEqual(record);
  });

  it('returns null for a hash it never stored', async () => {
    expect(await store.findKeyByHash(hashCustomerKey(generateCustomerKey('live')))).toBeNull();
  });

  it('refuses a key for an account that does not exist, storing nothing', async () => {
    const key = generateCustomerKey('live');
    expect(await store.insertKey(hashCustomerKey(key), keyRecord(key, unique('ghost')))).toBe('account_not_found');
    expect(await store.findKeyByHash(hashCustomerKey(key))).toBeNull();
  });

  it('returns copies, so a caller cannot change stored state by mutating a result', async () => {
    const id = unique('acme');
    await store.createAccount(account(id));
    const key = generateCustomerKey('live');
    await store.insertKey(hashCustomerKey(key), keyRecord(key, id));
    const found = await store.findKeyByHash(hashCustomerKey(key));
    found!.status = 'revoked';
    expect((await store.findKeyByHash(hashCustomerKey(key)))!.status).toBe('active');
  });
});

describe('redis store specifics', () => {
  it('stores only the hash: the full key appears nowhere in Redis', async () => {
    const store = await RedisStore.connect({ url: redis.url, commandTimeoutMs: 1000 });
    opened.push(store);
    const id = `acme-${Date.now()}`;
    await store.createAccount(account(id));
    const key = generateCustomerKey('live');
    await store.insertKey(hashCustomerKey(key), keyRecord(key, id));
    const Redis = (await import('ioredis')).default;
    const client = new Redis(redis.url);
    try {
      const names = await client.keys('*');
      expect(names.some((name) => name.includes(key))).toBe(false);
      for (const name of names) {
        const type = await client.type(name);
        const dump =
          type === 'hash' ? JSON.stringify(await client.hgetall(name)) : type === 'set' ? JSON.stringify(await client.smembers(name)) : String(await client.get(name));
        expect(dump).not.toContain(key);
      }
    } finally {
      client.disconnect();
    }
  });

  it('fails start-up loudly when Redis cannot be reached', async () => {
    await expect(RedisStore.connect({ url: 'redis://127.0.0.1:1', commandTimeoutMs: 50 })).rejects.toThrow(/cannot reach Redis/);
  });

  it('reports a corrupt key record as a store failure, never as a key', async () => {
    const store = await RedisStore.connect({ url: redis.url, commandTimeoutMs: 1000 });
    opened.push(store);
    const Redis = (await import('ioredis')).default;
    const client = new Redis(redis.url);
    const hash = hashCustomerKey(generateCustomerKey('live'));
    await client.hset(`gwa:key:${hash}`, { id: 'key_x', status: 'active' });
    client.disconnect();
    await expect(store.findKeyByHash(hash)).rejects.toThrow(/corrupt key record/);
  });
});
