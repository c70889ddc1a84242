import Redis from 'ioredis';
import { RedisStore, type RedisStoreOptions } from '../../src/store/redis/redis-store';
import { startTestRedis, type TestRedis } from './redis-server';
import { startedForFile } from './started-for-file';

export interface StoreOnTestRedis {
  readonly redis: TestRedis;
  /** The store as the service connects it, with the options given. */
  readonly store: RedisStore;
  /** A plain client, for reading and writing what the store keeps. */
  readonly client: Redis;
}

/** A real Redis for the test file, a RedisStore on it and a plain client (startedForFile). */
export function storeOnTestRedis(options: Omit<RedisStoreOptions, 'url' | 'topology'>): StoreOnTestRedis {
  return startedForFile(
    'storeOnTestRedis',
    async () => {
      const redis = await startTestRedis();
      try {
        const store = await RedisStore.connect({ ...options, url: redis.url });
        return { redis, store, client: new Redis(redis.url, { disconnectTimeout: 50 }) };
      } catch (error) {
        // Not left running behind a failed start: it would keep the jest worker alive.
        await redis.stop();
        throw error;
      }
    },
    async ({ redis, store, client }) => {
      client.disconnect();
      await store.close();
      await redis.stop();
    },
  );
}
