import Redis from 'ioredis';
import { startTestRedis, type TestRedis } from './redis-server';
import { startAppUnderTest, type AppUnderTest } from './running-app';

export interface AppOnTestRedis {
  readonly redis: TestRedis;
  /** The service as it runs, on that Redis. */
  readonly app: AppUnderTest;
  /** A plain client, for what an operator reads or breaks in Redis directly. */
  readonly operator: Redis;
}

/**
 * A real Redis for the test file and the service on it, with a plain client:
 * started in the file's beforeAll and stopped in its afterAll, so call it at
 * the top level of the file. The fields are read inside tests, once started.
 */
export function appOnTestRedis(): AppOnTestRedis {
  const started: { redis?: TestRedis; app?: AppUnderTest; operator?: Redis } = {};
  const get = <K extends keyof typeof started>(name: K): NonNullable<(typeof started)[K]> => {
    const value = started[name];
    if (value === undefined) throw new Error(`appOnTestRedis: ${name} is read before beforeAll started it`);
    return value;
  };
  beforeAll(async () => {
    started.redis = await startTestRedis();
    started.operator = new Redis(started.redis.url, { disconnectTimeout: 50 });
    started.app = await startAppUnderTest({ redisUrl: started.redis.url });
  });
  afterAll(async () => {
    await started.app?.close();
    started.operator?.disconnect();
    await started.redis?.stop();
  });
  return {
    get redis() {
      return get('redis');
    },
    get app() {
      return get('app');
    },
    get operator() {
      return get('operator');
    },
  };
}
