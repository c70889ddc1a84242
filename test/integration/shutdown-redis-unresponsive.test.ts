import Redis from 'ioredis';
import { createOfficialCheckClient, envoyCheckRequest } from '../support/envoy-official-client';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { TEST_ADMIN_TOKEN } from '../support/running-app';
import { startServerProcess } from '../support/server-process';

/**
 * SIGTERM while Redis does not answer (paused, or cut off by the network):
 * shutdown still ends within SHUTDOWN_TIMEOUT_MS and exits 0. Before, the
 * last-used times still to be written went out in chunks of 100 keys, one
 * after the other, each waiting out REDIS_ADMIN_TIMEOUT_MS, then Redis was
 * asked to QUIT and waited for too: with a few hundred keys used since the
 * last flush, shutdown outlasted its timeout and only the last-resort exit
 * (exit code 1) ended it.
 */
const SHUTDOWN_TIMEOUT_MS = 1000;
const KEYS = 300;

let redis: TestRedis;

beforeAll(async () => {
  redis = await startTestRedis();
});

afterAll(async () => {
  await redis?.stop();
});

it('ends within SHUTDOWN_TIMEOUT_MS and exits 0 on SIGTERM while Redis does not answer, last-used writes pending', async () => {
  const replica = await startServerProcess({
    REDIS_URL: redis.url,
    ADMIN_TOKEN: TEST_ADMIN_TOKEN,
    SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS),
    // Nothing is written before the shutdown: every key's use is pending then.
    LAST_USED_FLUSH_MS: '3600000',
    REDIS_ADMIN_TIMEOUT_MS: '2000',
    // First sight of 300 keys at once on a loaded machine: no Check may miss the Redis deadline here.
    REDIS_TIMEOUT_MS: '1000',
    DEFAULT_MAX_ACTIVE_KEYS: String(KEYS),
  });
  const admin = async (path: string, body: object) => {
    const response = await fetch(`${replica.adminUrl}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(response.status).toBe(201);
    return (await response.json()) as { key: string };
  };
  const checks = createOfficialCheckClient(replica.grpcAddress);
  const pauser = new Redis(redis.url, { disconnectTimeout: 50 });
  try {
    await admin('/admin/accounts', { id: 'quiet', name: 'Quiet' });
    const keys: string[] = [];
    for (let i = 0; i < KEYS; i += 1) keys.push((await admin('/admin/accounts/quiet/keys', { name: `k${i}` })).key);
    const outcomes = await Promise.all(
      keys.map(
        async (key) =>
          (await checks.check(envoyCheckRequest({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${key}` } }), 5000))
            .status.code,
      ),
    );
    expect(outcomes.filter((code) => code !== 0)).toEqual([]);

    // Every client of this Redis now waits, as behind a network partition, for longer than the shutdown may take
    // (the last-resort exit included). The pause ends by itself: an UNPAUSE would wait behind it too.
    await pauser.call('CLIENT', 'PAUSE', '10000', 'ALL');
    const started = performance.now();
    const exited = new Promise<number | null>((resolve) => replica.child.once('exit', (code) => resolve(code)));
    replica.child.kill('SIGTERM');
    const code = await exited;
    const tookMs = performance.now() - started;

    expect(code).toBe(0);
    expect(replica.output()).toContain('"msg":"stopped"');
    // The pending uses that could not be written are said so, not silently lost.
    expect(replica.output()).toMatch(/"event":"last_used"/);
    // The shutdown timeout, plus room for a process start-up's worth of delay on a loaded machine.
    expect(tookMs).toBeLessThan(SHUTDOWN_TIMEOUT_MS + 1500);
  } finally {
    pauser.disconnect();
    checks.close();
    await replica.stop();
  }
}, 40_000);
