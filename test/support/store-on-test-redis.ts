import Redis from 'ioredis';
import { RedisStore, type RedisStoreOptions } from '../../src/store/redis/redis-store';
import { startTestRedis, type TestRedis } from './redis-server';

export interface StoreOnTestRedis {
  readonly redis: TestRedis;
  /** The store as the service connects it, with the options given. */
  readonly store: RedisStore;
  /** A plain client, for reading and writing what the store keeps. */
  readonly client: Redis;
}

/**
 * A real Redis for the test file, a RedisStore on it and a plain client:
 * started in the file's beforeAll and stopped in its afterAll, so call it at
 * the top level of the file. The fields are read inside tests, once started.
 */
export function storeOnTestRedis(options: Omit<RedisStoreOptions, 'url' | 'topology'>): StoreOnTestRedis {
  const started: { redis?: TestRedis; store?: RedisStore; client?: Redis } = {};
  const get = <K extends keyof typeof started>(name: K): NonNullable<(typeof started)[K]> => {
    const value = started[name];
    if (value === undefined) throw new Error(`storeOnTestRedis: ${name} is read before beforeAll started it`);
    return value;
  };
  beforeAll(async () => {
    started.redis = await startTestRedis();
    started.store = await RedisStore.connect({ ...options, url: started.redis.url });
    started.client = new Redis(started.redis.url, { disconnectTimeout: 50 });
  });
  afterAll(async () => {
    started.client?.disconnect();
    await started.store?.close();
    await started.redis?.stop();
  });
  return {
    get redis() {
      return get('redis');
    },
    get store() {
      return get('store');
    },
    get client() {
      return get('client');
    },
  };
}
