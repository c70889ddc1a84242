import Redis from 'ioredis';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { generateCustomerKey } from '../../src/keys/customer-key';
import { createOfficialCheckClient, envoyCheckRequest, type OfficialCheckClient } from '../support/envoy-official-client';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { startAppUnderTest, type AppUnderTest } from '../support/running-app';
import { parseDenyBody } from '../support/deny-body';
import { isBackgroundCommand, untilWebhookWorkDone } from '../support/background-commands';

/**
 * A flood of well-formed but unknown keys: at most one Redis command per
 * distinct key (none for repeats, thanks to the bounded negative cache), and
 * no unbounded memory growth.
 */
let redis: TestRedis;
let server: AppUnderTest;
let client: OfficialCheckClient;
let stats: Redis;

beforeAll(async () => {
  redis = await startTestRedis();
  server = await startAppUnderTest({
    redisUrl: redis.url,
    env: {
      LOG_LEVEL: 'warn',
      KEY_CACHE_NEGATIVE_TTL_MS: '60000',
      // This counts commands, not time: a loaded machine must not turn lookups into store_unavailable.
      REDIS_TIMEOUT_MS: '1000',
    },
  });
  client = createOfficialCheckClient(server.grpcAddress);
  stats = new Redis(redis.url, { disconnectTimeout: 50 });
});
afterAll(async () => {
  stats?.disconnect();
  client?.close();
  await server?.close();
  await redis?.stop();
});

async function commandsDuring(work: () => Promise<void>): Promise<number> {
  await untilWebhookWorkDone(stats);
  await stats.config('RESETSTAT');
  await work();
  const info = await stats.info('commandstats');
  return [...info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)]
    .filter((m) => !isBackgroundCommand(m[1]!))
    .reduce((sum, m) => sum + Number(m[2]), 0);
}

const chat = (key: string) => envoyCheckRequest({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${key}` } });

async function flood(keys: string[]): Promise<void> {
  for (let i = 0; i < keys.length; i += 100) {
    const responses = await Promise.all(keys.slice(i, i + 100).map((key) => client.check(chat(key))));
    for (const response of responses) expect(parseDenyBody(response.denied_response.body).error.code).toBe('unknown_key');
  }
}

it('costs at most one Redis command per distinct unknown key', async () => {
  const keys = Array.from({ length: 1000 }, () => generateCustomerKey('live'));
  expect(await commandsDuring(() => flood(keys))).toBeLessThanOrEqual(1000);
});

it('costs no Redis command for unknown keys repeated within the negative TTL', async () => {
  const few = Array.from({ length: 10 }, () => generateCustomerKey('live'));
  await flood(few); // first sight of each
  const repeats = Array.from({ length: 1000 }, (_, i) => few[i % few.length]!);
  expect(await commandsDuring(() => flood(repeats))).toBe(0);
});

it('keeps memory bounded under a flood of distinct unknown keys', async () => {
  // Measure what is retained, not garbage waiting for collection.
  setFlagsFromString('--expose_gc');
  const gc = runInNewContext('gc') as () => void;
  gc();
  const before = process.memoryUsage().heapUsed;
  await flood(Array.from({ length: 5000 }, () => generateCustomerKey('live')));
  gc();
  // The negative cache keeps at most a bounded number of 64-character hashes.
  expect(process.memoryUsage().heapUsed - before).toBeLessThan(30 * 1024 * 1024);
});
