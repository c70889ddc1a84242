import { createHash } from 'node:crypto';
import type { Session } from 'fastify';
import Redis from 'ioredis';
import { sessionIdHash, sessionStoreOver } from '../../src/http/sign-in/session-store-adapter';
import { ManualClock } from '../../src/platform/clock';
import type { SessionStorage } from '../../src/http/sign-in/session-storage';
import { MemorySessionStorage } from '../../src/store/memory-session-storage';
import { redisKeys } from '../../src/store/redis/redis-keys';
import { RedisSessionStorage } from '../../src/store/redis/redis-session-storage';
import { StoreUnavailableError } from '../../src/ports/store';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { freePort } from '../support/free-port';

/**
 * The customer session storage: one contract for Redis (shared by every
 * replica) and memory (the embedded store), and the @fastify/session store
 * adapter over it, which names entries by the hash of the session id.
 */
const T0 = Date.parse('2026-11-23T09:00:00Z');
let redis: TestRedis;
let client: Redis;
const opened: SessionStorage[] = [];

beforeAll(async () => {
  redis = await startTestRedis();
  client = new Redis(redis.url, { disconnectTimeout: 50 });
});
afterAll(async () => {
  await Promise.all(opened.map((storage) => storage.close()));
  client?.disconnect();
  await redis?.stop();
});

const unique = () => createHash('sha256').update(`${Date.now()}-${Math.random()}`).digest('hex');

const implementations: [string, (clock: ManualClock) => Promise<SessionStorage>][] = [
  ['memory', async (clock) => new MemorySessionStorage(clock)],
  [
    'redis',
    async () => {
      const storage = await RedisSessionStorage.connect({ mode: 'standalone', url: redis.url }, 1000);
      opened.push(storage);
      return storage;
    },
  ],
];

describe.each(implementations)('%s session storage', (_name, open) => {
  it('writes, reads, replaces and removes an entry', async () => {
    const storage = await open(new ManualClock(T0));
    const idHash = unique();
    expect(await storage.read(idHash)).toBeNull();
    await storage.write(idHash, '{"a":1}', 60_000);
    expect(await storage.read(idHash)).toBe('{"a":1}');
    await storage.write(idHash, '{"a":2}', 60_000);
    expect(await storage.read(idHash)).toBe('{"a":2}');
    await storage.remove(idHash);
    expect(await storage.read(idHash)).toBeNull();
    await storage.remove(idHash);
  });
});

it('memory: an entry is gone once its time to live has passed on the injected clock, and the storage stays bounded', async () => {
  const clock = new ManualClock(T0);
  const storage = new MemorySessionStorage(clock, 3);
  await storage.write('a', 'A', 1_000);
  clock.advance(999);
  expect(await storage.read('a')).toBe('A');
  clock.advance(1);
  expect(await storage.read('a')).toBeNull();
  await storage.write('long', 'L', 10_000);
  await storage.write('short', 'S', 1_000);
  await storage.write('mid', 'M', 5_000);
  await storage.write('new', 'N', 5_000);
  // Full: the entry closest to expiry made room.
  expect(await storage.read('short')).toBeNull();
  expect([await storage.read('long'), await storage.read('mid'), await storage.read('new')]).toEqual(['L', 'M', 'N']);
});

it('redis: one key per session named by redis-keys.ts, with the time to live as PX', async () => {
  const storage = await implementations[1]![1](new ManualClock(T0));
  const idHash = unique();
  await storage.write(idHash, 'data', 30_000);
  expect(await client.get(redisKeys.customerSession(idHash))).toBe('data');
  const ttl = await client.pttl(redisKeys.customerSession(idHash));
  expect(ttl).toBeGreaterThan(29_000);
  expect(ttl).toBeLessThanOrEqual(30_000);
  await storage.write(idHash, 'data', 50);
  await new Promise((resolve) => setTimeout(resolve, 150));
  expect(await storage.read(idHash)).toBeNull();
});

it('redis: an unreachable Redis is a StoreUnavailableError at connect', async () => {
  const port = await freePort();
  await expect(RedisSessionStorage.connect({ mode: 'standalone', url: `redis://127.0.0.1:${port}` }, 200)).rejects.toBeInstanceOf(
    StoreUnavailableError,
  );
});

describe('the @fastify/session store adapter', () => {
  const lifetime = { idleMs: 60_000, maxAgeMs: 600_000 };
  const call = <T>(run: (callback: (error?: Error, result?: T) => void) => void) =>
    new Promise<T | undefined>((resolve, reject) => run((error, result) => (error ? reject(error) : resolve(result))));

  it('stores the session fields under the SHA-256 of the id, never the id, with the session lifetime as time to live', async () => {
    const storage = await implementations[1]![1](new ManualClock(T0));
    const clock = new ManualClock(T0);
    const store = sessionStoreOver(storage, clock, lifetime);
    const sessionId = `live-session-id-${unique()}`;
    const session = {
      identity: { issuer: 'https://login.example.com', subject: 'u-1' },
      signedInAtMs: T0,
      lastSeenAtMs: T0,
      cookie: { path: '/', secure: true, originalMaxAge: null },
    } as unknown as Session;
    await call((callback) => store.set(sessionId, session, callback));
    expect(sessionIdHash(sessionId)).toBe(createHash('sha256').update(sessionId).digest('hex'));
    expect(await client.keys(`*${sessionId}*`)).toEqual([]);
    const key = redisKeys.customerSession(sessionIdHash(sessionId));
    expect(JSON.parse((await client.get(key))!)).toEqual({ identity: session.identity, signedInAtMs: T0, lastSeenAtMs: T0 });
    expect(await client.pttl(key)).toBeLessThanOrEqual(lifetime.idleMs);

    expect(await call<Session | null>((callback) => store.get(sessionId, callback))).toEqual({
      identity: session.identity,
      signedInAtMs: T0,
      lastSeenAtMs: T0,
    });
    await call((callback) => store.destroy(sessionId, callback));
    expect(await client.exists(key)).toBe(0);
    expect(await call<Session | null>((callback) => store.get(sessionId, callback))).toBeNull();
  });

  it('removes instead of writing a session with nothing left to keep (its time is up)', async () => {
    const storage = new MemorySessionStorage(new ManualClock(T0));
    const clock = new ManualClock(T0);
    const store = sessionStoreOver(storage, clock, lifetime);
    const session = { identity: { issuer: 'i', subject: 's' }, signedInAtMs: T0, lastSeenAtMs: T0 } as unknown as Session;
    await call((callback) => store.set('id', session, callback));
    expect(await storage.read(sessionIdHash('id'))).not.toBeNull();
    clock.advance(lifetime.idleMs);
    await call((callback) => store.set('id', session, callback));
    expect(await storage.read(sessionIdHash('id'))).toBeNull();
  });

  it('reads a corrupt entry as no session, and passes storage failures on', async () => {
    const storage = new MemorySessionStorage(new ManualClock(T0));
    await storage.write(sessionIdHash('id'), '{"identity":"not an object"}', 60_000);
    const store = sessionStoreOver(storage, new ManualClock(T0), lifetime);
    expect(await call<Session | null>((callback) => store.get('id', callback))).toBeNull();
    const failing: SessionStorage = {
      read: () => Promise.reject(new StoreUnavailableError('down')),
      write: () => Promise.reject(new StoreUnavailableError('down')),
      remove: () => Promise.reject(new StoreUnavailableError('down')),
      close: async () => undefined,
    };
    const broken = sessionStoreOver(failing, new ManualClock(T0), lifetime);
    await expect(call((callback) => broken.get('id', callback))).rejects.toBeInstanceOf(StoreUnavailableError);
    await expect(call((callback) => broken.destroy('id', callback))).rejects.toBeInstanceOf(StoreUnavailableError);
  });
});
