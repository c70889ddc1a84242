import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Redis from 'ioredis';
import { createOfficialCheckClient, envoyCheckRequest } from '../support/envoy-official-client';
import { spawnTestRedisServer, type TestRedis } from '../support/redis-server';
import { startAppUnderTest } from '../support/running-app';
import { freePort } from '../support/free-port';

/** A Sentinel-managed master: the service finds it through Sentinel and works as on one Redis. */
let master: TestRedis;
let sentinel: ChildProcess;
let sentinelPort: number;
let dir: string;

beforeAll(async () => {
  master = await spawnTestRedisServer();
  sentinelPort = await freePort();
  dir = mkdtempSync(join(tmpdir(), 'gateway-authz-sentinel-'));
  const config = join(dir, 'sentinel.conf');
  writeFileSync(
    config,
    [
      `port ${sentinelPort}`,
      'bind 127.0.0.1',
      'protected-mode no',
      `dir ${dir}`,
      `sentinel monitor mymaster 127.0.0.1 ${master.port} 1`,
      'sentinel down-after-milliseconds mymaster 2000',
    ].join('\n'),
  );
  sentinel = spawn('redis-server', [config, '--sentinel'], { stdio: 'ignore' });
  const deadline = Date.now() + 10_000;
  for (;;) {
    const probe = new Redis({ port: sentinelPort, lazyConnect: true, maxRetriesPerRequest: 0, disconnectTimeout: 50 });
    try {
      await probe.connect();
      const address = (await probe.call('SENTINEL', 'get-master-addr-by-name', 'mymaster')) as string[] | null;
      if (address && Number(address[1]) === master.port) break;
    } catch {
      /* not up yet */
    } finally {
      probe.disconnect();
    }
    if (Date.now() > deadline) throw new Error('redis sentinel did not come up (is redis-server installed with sentinel support?)');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
});
afterAll(async () => {
  sentinel?.kill('SIGKILL');
  await master?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

it('creates keys and decides through the master Sentinel names', async () => {
  const server = await startAppUnderTest({ env: { REDIS_SENTINELS: `127.0.0.1:${sentinelPort}`, REDIS_SENTINEL_MASTER: 'mymaster' } });
  const client = createOfficialCheckClient(server.grpcAddress);
  try {
    expect(server.app.store.description).toBe(`Redis master 'mymaster' via Sentinel 127.0.0.1:${sentinelPort}`);
    await server.admin('POST', '/admin/accounts', { id: 'sentinel-co', name: 'S' });
    const { key } = (await server.admin('POST', '/admin/accounts/sentinel-co/keys', {})).body;
    const response = await client.check(envoyCheckRequest({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${key}` } }));
    expect(response.status.code).toBe(0);
    // The data really is on the master Sentinel pointed to.
    const direct = new Redis(master.url, { disconnectTimeout: 50 });
    expect(await direct.exists('gwa:{acct:sentinel-co}:account')).toBe(1);
    direct.disconnect();
  } finally {
    client.close();
    await server.close();
  }
});
