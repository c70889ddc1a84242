import Redis from 'ioredis';
import { startTestRedis, type TestRedis } from './redis-server';
import { startAppUnderTest, type AppUnderTest } from './running-app';
import { startedForFile } from './started-for-file';

export interface AppOnTestRedis {
  readonly redis: TestRedis;
  /** The service as it runs, on that Redis. */
  readonly app: AppUnderTest;
  /** A plain client, for what an operator reads or breaks in Redis directly. */
  readonly operator: Redis;
}

/** A real Redis for the test file and the service on it, with a plain client (startedForFile). */
export function appOnTestRedis(): AppOnTestRedis {
  return startedForFile(
    'appOnTestRedis',
    async () => {
      const redis = await startTestRedis();
      const operator = new Redis(redis.url, { disconnectTimeout: 50 });
      try {
        return { redis, operator, app: await startAppUnderTest({ redisUrl: redis.url }) };
      } catch (error) {
        // Not left running behind a failed start: they would keep the jest worker alive.
        operator.disconnect();
        await redis.stop();
        throw error;
      }
    },
    async ({ redis, operator, app }) => {
      await app.close();
      operator.disconnect();
      await redis.stop();
    },
  );
}
