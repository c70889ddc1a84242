import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { TEST_ADMIN_TOKEN } from '../support/running-app';
import { startServerProcess, type ServerProcess } from '../support/server-process';
import { registerSecrets } from '../support/secret-scan';
import { AuthzCluster } from './authz-cluster';
import { sendHttp, startEnvoyFront, type EnvoyFront } from './envoy-front';
import { E2E_FRONT_TIMEOUT_MS } from './e2e-world';
import { startFakeUpstream, type FakeUpstream } from './fake-upstream';

/**
 * A rolling restart of two gateway-authz replicas behind the Envoy-faithful
 * front, under steady load from several clients: replica A gets SIGTERM,
 * its successor A2 joins, then B gets SIGTERM. The front balances and
 * retries exactly as envoy.yaml tells Envoy to (authz-cluster.ts reads the
 * ext_authz cluster's health check and the filter's retry policy from it).
 * Every client request must succeed: zero 503s, zero errors.
 */
jest.setTimeout(90_000);

const CLIENTS = 8;

describe('rolling restart behind the Envoy-faithful front', () => {
  let redis: TestRedis;
  let upstream: FakeUpstream;
  let configDir: string;
  const replicas: ServerProcess[] = [];

  beforeAll(async () => {
    redis = await startTestRedis();
    upstream = await startFakeUpstream();
    configDir = fs.mkdtempSync(path.join(os.tmpdir(), 'rolling-restart-'));
  });
  afterAll(async () => {
    for (const replica of replicas) await replica.stop();
    await upstream?.close();
    await redis?.stop();
    fs.rmSync(configDir, { recursive: true, force: true });
  });

  async function startReplica(): Promise<ServerProcess> {
    // Limits far above the load, so every request is a plain allow.
    const huge = [{ limit: 1_000_000_000, window: '1m' }];
    const configFile = path.join(configDir, 'config.json');
    fs.writeFileSync(configFile, JSON.stringify({ defaultPlan: { key: huge, account: huge } }));
    const replica = await startServerProcess({
      REDIS_URL: redis.url,
      ADMIN_TOKEN: TEST_ADMIN_TOKEN,
      CONFIG_FILE: configFile,
      // Envoy's 0.25 s covers the Check; a loaded 2-core machine needs the slack on Redis.
      REDIS_TIMEOUT_MS: '200',
      // The hard case: no drain delay, so nothing but Envoy's retries keeps clients whole.
      SHUTDOWN_DRAIN_DELAY_MS: '0',
    });
    replicas.push(replica);
    return replica;
  }

  it('loses no client request while each replica in turn is stopped and replaced', async () => {
    const a = await startReplica();
    const b = await startReplica();
    const created = await fetch(`${a.adminUrl}/admin/accounts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ id: 'rolling', name: 'Rolling' }),
    });
    expect(created.status).toBe(201);
    const keyResponse = await fetch(`${a.adminUrl}/admin/accounts/rolling/keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'load' }),
    });
    const { key } = (await keyResponse.json()) as { key: string };
    registerSecrets(key);

    const cluster = new AuthzCluster([a.grpcAddress, b.grpcAddress]);
    let front: EnvoyFront | undefined;
    try {
      await cluster.runHealthChecks();
      expect(cluster.healthyAddresses().sort()).toEqual([a.grpcAddress, b.grpcAddress].sort());
      // Envoy's 0.25 s would measure the shared test machine, not the retries: the e2e suites' 2 s.
      front = await startEnvoyFront({ authzCluster: cluster, upstreamUrl: upstream.url, timeoutMs: E2E_FRONT_TIMEOUT_MS });

      const outcomes = new Map<string, number>();
      let running = true;
      const client = async () => {
        while (running) {
          const reply = await sendHttp(front!.url, {
            method: 'POST',
            path: '/v1/chat/completions',
            headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
            body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }),
          }).then(
            (r) => String(r.status),
            (error: Error) => `error: ${error.message}`,
          );
          outcomes.set(reply, (outcomes.get(reply) ?? 0) + 1);
        }
      };
      const load = Array.from({ length: CLIENTS }, client);
      const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
      const served = () => [...outcomes.values()].reduce((sum, n) => sum + n, 0);

      await pause(700);
      const beforeFirstStop = served();
      // Step 1: A drains and exits while the load runs; its host stays listed
      // (Envoy has not re-resolved yet), so Checks sent to it are retried on B.
      expect(await a.stop()).toBe(0);
      await pause(300);
      // Step 2: A's successor joins; A leaves the host list.
      const a2 = await startReplica();
      cluster.setHosts([b.grpcAddress, a2.grpcAddress]);
      await pause(700);
      // Step 3: B drains and exits under load; then only A2 remains.
      expect(await b.stop()).toBe(0);
      await pause(300);
      cluster.setHosts([a2.grpcAddress]);
      await pause(500);
      running = false;
      await Promise.all(load);

      const stats = cluster.stats();
      expect({ outcomes: Object.fromEntries(outcomes), failures: stats.failures }).toEqual({ outcomes: { '200': served() }, failures: {} });
      expect(beforeFirstStop).toBeGreaterThan(5);
      expect(served()).toBeGreaterThan(30);
      // Every replica did real work, and the stopped ones were retried around.
      expect(stats.attempts[a.grpcAddress]).toBeGreaterThan(0);
      expect(stats.attempts[b.grpcAddress]).toBeGreaterThan(0);
      expect(stats.attempts[a2.grpcAddress]).toBeGreaterThan(0);
      expect(stats.retries).toBeGreaterThan(0);
      expect(stats.failedAttempts[a2.grpcAddress]).toBe(0);
      const out = path.join(__dirname, '..', '..', 'test-artifacts');
      fs.mkdirSync(out, { recursive: true });
      fs.writeFileSync(
        path.join(out, 'rolling-restart.json'),
        `${JSON.stringify({ date: new Date().toISOString(), clients: CLIENTS, requests: served(), outcomes: Object.fromEntries(outcomes), ...stats }, null, 2)}\n`,
      );
      // The upstream saw every allowed request, none with the customer key.
      expect(upstream.requests.length).toBe(served());
      expect(upstream.requests.some((request) => JSON.stringify(request.headers).includes(key))).toBe(false);
    } finally {
      await front?.close();
      cluster.close();
    }
  });

  it('without the retry policy, the same stop costs clients 503s (the test above can fail)', async () => {
    const a = await startReplica();
    const b = await startReplica();
    const noRetries = new AuthzCluster([a.grpcAddress, b.grpcAddress]);
    const settings = { ...noRetries.settings, retry: { ...noRetries.settings.retry, numRetries: 0 } };
    noRetries.close();
    const cluster = new AuthzCluster([a.grpcAddress, b.grpcAddress], settings);
    const front = await startEnvoyFront({ authzCluster: cluster, upstreamUrl: upstream.url });
    try {
      expect(await a.stop()).toBe(0);
      const statuses = await Promise.all(
        Array.from({ length: 20 }, () =>
          sendHttp(front.url, { method: 'POST', path: '/v1/chat/completions', headers: { authorization: 'Bearer gk_live_x' } }).then(
            (r) => r.status,
          ),
        ),
      );
      expect(statuses).toContain(503);
    } finally {
      await front.close();
      cluster.close();
    }
  });
});
