import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createOfficialCheckClient, envoyCheckRequest, type OfficialCheckClient } from '../support/envoy-official-client';
import { spawnTestRedisServer, type TestRedis } from '../support/redis-server';
import { startAppUnderTest, type AppUnderTest } from '../support/running-app';
import { parseDenyBody } from '../support/deny-body';

/**
 * Redis killed and started again on the same port, with AOF persistence:
 * decisions are correct again within 2 s with no restart of the service
 * (scripts reloaded after NOSCRIPT), and keys and balances survived.
 */
let dir: string;
let redis: TestRedis;
let server: AppUnderTest;
let client: OfficialCheckClient;

const chat = (key: string) => envoyCheckRequest({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${key}` } });
const startRedis = (port?: number) =>
  spawnTestRedisServer({ dir, appendOnly: true, ...(port !== undefined ? { port } : {}), extraArgs: ['--appendfsync', 'always'] });

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'gateway-authz-aof-'));
  redis = await startRedis();
  server = await startAppUnderTest({ redisUrl: redis.url, env: { HEALTH_INTERVAL_MS: '100' } });
  client = createOfficialCheckClient(server.grpcAddress);
});
afterAll(async () => {
  client?.close();
  await server?.close();
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

it('answers 503 while Redis is down, then decides correctly again within 2 s of its return, keeping keys and balances', async () => {
  await server.admin('POST', '/admin/accounts', { id: 'durable', name: 'Durable', billing: { creditBalance: 700 } });
  await server.admin('POST', '/admin/accounts', { id: 'broke', name: 'Broke', billing: { creditBalance: 0 } });
  const { key } = (await server.admin('POST', '/admin/accounts/durable/keys', { name: 'k' })).body;
  const broke = (await server.admin('POST', '/admin/accounts/broke/keys', { name: 'k' })).body.key;
  expect((await client.check(chat(key))).status.code).toBe(0);

  const port = redis.port;
  await redis.stop();
  const down = await client.check(chat(key), 250);
  expect(down.denied_response.status.code).toBe('ServiceUnavailable');

  redis = await startRedis(port);
  const back = Date.now();
  let allowed = false;
  while (!allowed && Date.now() - back < 2000) {
    allowed = (await client.check(chat(key), 250)).status.code === 0;
    if (!allowed) await new Promise((resolve) => setTimeout(resolve, 25));
  }
  expect(allowed).toBe(true);
  // The script cache was empty after the restart: EVALSHA got NOSCRIPT and ioredis reloaded it.
  expect(parseDenyBody((await client.check(chat(broke))).denied_response.body).error.code).toBe('credit_exhausted');
  expect((await server.admin('GET', '/admin/accounts/durable')).body.billing.creditBalance).toBe(700);
  expect((await server.admin('GET', '/admin/accounts/durable/keys')).body.keys).toHaveLength(1);
});
