import Redis from 'ioredis';
import { createOfficialCheckClient, envoyCheckRequest, type OfficialCheckClient } from '../support/envoy-official-client';
import { spawnTestRedisServer, type TestRedis } from '../support/redis-server';
import { untilWebhookWorkDone } from '../support/background-commands';
import { startAppUnderTest, type AppUnderTest } from '../support/running-app';

/**
 * SCRIPT FLUSH (what a Redis restart does to the script cache) while many
 * Checks are in flight on the Check path's connection: every EVALSHA that
 * reaches Redis before the script is back is refused with NOSCRIPT. The
 * first refusal sends the script again; the others go again as EVALSHA
 * behind it. So the authorize script's body crosses the wire once, not once
 * per Check in flight, and every Check is decided.
 */
const CLIENTS = 4;
const CHECKS_PER_CLIENT_BEFORE = 30;
const CHECKS_PER_CLIENT_AFTER = 30;

let redis: TestRedis;
let direct: Redis;
let server: AppUnderTest;
let clients: OfficialCheckClient[];

beforeAll(async () => {
  redis = await spawnTestRedisServer();
  direct = new Redis(redis.url, { maxRetriesPerRequest: 0 });
  // No last-used write (an ioredis EVALSHA, reloaded with EVAL of its own) during the count.
  server = await startAppUnderTest({ redisUrl: redis.url, env: { LAST_USED_FLUSH_MS: '3600000' } });
  clients = Array.from({ length: CLIENTS }, () => createOfficialCheckClient(server.grpcAddress));
});
afterAll(async () => {
  for (const client of clients ?? []) client.close();
  await server?.close();
  direct?.disconnect();
  await redis?.stop();
});

/** `calls` and `failed_calls` of one command from INFO commandstats (0 when it never ran since the reset). */
async function commandStats(name: string): Promise<{ calls: number; failed: number }> {
  const info = await direct.info('commandstats');
  const line = info.split('\r\n').find((entry) => entry.startsWith(`cmdstat_${name}:`));
  const field = (key: string) => Number(new RegExp(`${key}=(\\d+)`).exec(line ?? '')?.[1] ?? 0);
  return { calls: field('calls'), failed: field('failed_calls') };
}

it('sends the authorize script once for all the Checks in flight across SCRIPT FLUSH, and decides every one of them', async () => {
  await server.admin('POST', '/admin/accounts', { id: 'flushed', name: 'Flushed', billing: { creditBalance: 1_000_000 } });
  const { key } = (await server.admin('POST', '/admin/accounts/flushed/keys', { name: 'k' })).body as { key: string };
  const chat = envoyCheckRequest({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${key}` } });
  // Warm: the key index is cached and the connection has sent the script, so every Check below is one EVALSHA.
  expect((await clients[0]!.check(chat)).status.code).toBe(0);

  await untilWebhookWorkDone(direct);
  await direct.config('RESETSTAT');
  const round = (perClient: number) => clients.flatMap((client) => Array.from({ length: perClient }, () => client.check(chat)));
  const before = round(CHECKS_PER_CLIENT_BEFORE);
  await direct.script('FLUSH');
  const after = round(CHECKS_PER_CLIENT_AFTER);
  const answers = await Promise.all([...before, ...after]);

  const codes = answers.map((answer) => (answer.status.code === 0 ? 'allowed' : String(answer.denied_response?.status.code)));
  expect(codes.filter((code) => code !== 'allowed')).toEqual([]);
  const evalStats = await commandStats('eval');
  const evalshaStats = await commandStats('evalsha');
  // The Checks whose EVALSHA met the empty cache: refused once each, then resent.
  expect(evalshaStats.failed).toBeGreaterThan(1);
  expect(evalStats.calls).toBe(1);
  expect(evalshaStats.calls - evalshaStats.failed + evalStats.calls).toBe(answers.length);
});
