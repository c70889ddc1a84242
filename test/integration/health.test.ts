import * as grpc from '@grpc/grpc-js';
import Redis from 'ioredis';
import { createOfficialCheckClient, envoyCheckRequest } from '../support/envoy-official-client';
import { healthClient, waitForHealth } from '../support/health-client';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { startAppUnderTest, TEST_ADMIN_TOKEN, type AppUnderTest } from '../support/running-app';
import { startServerProcess } from '../support/server-process';

/**
 * grpc.health.v1 and /healthz, /readyz follow Redis and shutdown, and a
 * SIGTERM under load loses no in-flight Check.
 */
// Probes every 100 ms; a probe may take up to 1 s, so a loaded test machine does not read as Redis being down.
const FAST_HEALTH = { HEALTH_INTERVAL_MS: '100', HEALTH_TIMEOUT_MS: '1000' };
// For the paused-Redis test: a probe unanswered for 200 ms is down, so the 1.5 s pause is seen well within it.
const IMPATIENT_HEALTH = { HEALTH_INTERVAL_MS: '100', HEALTH_TIMEOUT_MS: '200' };

describe('on the embedded store', () => {
  let server: AppUnderTest;
  beforeAll(async () => {
    server = await startAppUnderTest({});
  });
  afterAll(async () => {
    await server?.close();
  });

  it('answers SERVING for the whole server and for the Authorization service, NOT_FOUND for others', async () => {
    const client = healthClient(server.grpcAddress);
    try {
      expect(await client.check('')).toEqual({ status: 'SERVING' });
      expect(await client.check('envoy.service.auth.v3.Authorization')).toEqual({ status: 'SERVING' });
      await expect(client.check('no.such.Service')).rejects.toMatchObject({ code: grpc.status.NOT_FOUND });
    } finally {
      client.close();
    }
  });

  it('serves /healthz and /readyz without the admin token', async () => {
    expect((await fetch(`${server.adminUrl}/healthz`)).status).toBe(200);
    const ready = await fetch(`${server.adminUrl}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready' });
  });
});

describe('with Redis', () => {
  let redis: TestRedis;
  beforeEach(async () => {
    redis = await startTestRedis();
  });
  afterEach(async () => {
    await redis?.stop();
  });

  it('is SERVING while Redis answers and NOT_SERVING once it does not; /readyz says why, /healthz stays alive', async () => {
    const server = await startAppUnderTest({ redisUrl: redis.url, env: FAST_HEALTH });
    const client = healthClient(server.grpcAddress);
    try {
      expect(await waitForHealth(() => client.check(), 'SERVING')).toBe('SERVING');
      await redis.stop();
      expect(await waitForHealth(() => client.check(), 'NOT_SERVING')).toBe('NOT_SERVING');
      const ready = await fetch(`${server.adminUrl}/readyz`);
      expect(ready.status).toBe(503);
      expect(await ready.json()).toEqual({ status: 'not_ready', reason: 'store_unreachable' });
      expect((await fetch(`${server.adminUrl}/healthz`)).status).toBe(200);
    } finally {
      client.close();
      await server.close();
    }
  });

  it('Watch sees every change as it happens (SERVING, NOT_SERVING with Redis down, SERVING again) and ends UNAVAILABLE on close', async () => {
    const server = await startAppUnderTest({ redisUrl: redis.url, env: FAST_HEALTH });
    const client = healthClient(server.grpcAddress);
    const waitFor = async (condition: () => boolean, what: string) => {
      const deadline = Date.now() + 5000;
      while (!condition()) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    };
    let closed = false;
    try {
      const whole = client.watch('');
      const authz = client.watch('envoy.service.auth.v3.Authorization');
      const unknown = client.watch('no.such.Service');
      await waitFor(
        () => whole.statuses.length === 1 && authz.statuses.length === 1 && unknown.statuses.length === 1,
        'the first statuses',
      );
      expect([whole.statuses, authz.statuses, unknown.statuses]).toEqual([['SERVING'], ['SERVING'], ['SERVICE_UNKNOWN']]);
      const admin = new Redis(redis.url, { disconnectTimeout: 50 });
      try {
        await admin.call('CLIENT', 'PAUSE', '1500', 'ALL');
      } finally {
        admin.disconnect();
      }
      await waitFor(() => whole.statuses.length === 2, 'NOT_SERVING');
      await waitFor(() => whole.statuses.length === 3, 'SERVING again');
      expect(whole.statuses).toEqual(['SERVING', 'NOT_SERVING', 'SERVING']);
      expect(authz.statuses).toEqual(['SERVING', 'NOT_SERVING', 'SERVING']);
      expect(unknown.statuses).toEqual(['SERVICE_UNKNOWN']);
      expect(whole.ended()).toBeUndefined();
      closed = true;
      await server.close();
      await waitFor(() => whole.ended() !== undefined && unknown.ended() !== undefined, 'the Watches to end');
      expect(whole.statuses.at(-1)).toBe('NOT_SERVING');
      expect(whole.ended()).toMatchObject({ code: grpc.status.UNAVAILABLE });
      expect(unknown.ended()).toMatchObject({ code: grpc.status.UNAVAILABLE });
    } finally {
      client.close();
      if (!closed) await server.close();
    }
  });

  it('treats a paused (slow) Redis as down, and serves again when it answers', async () => {
    const server = await startAppUnderTest({ redisUrl: redis.url, env: IMPATIENT_HEALTH });
    const client = healthClient(server.grpcAddress);
    const admin = new Redis(redis.url, { disconnectTimeout: 50 });
    try {
      await admin.call('CLIENT', 'PAUSE', '1500', 'ALL');
      expect(await waitForHealth(() => client.check(), 'NOT_SERVING', 1400)).toBe('NOT_SERVING');
      expect(await waitForHealth(() => client.check(), 'SERVING', 5000)).toBe('SERVING');
    } finally {
      admin.disconnect();
      client.close();
      await server.close();
    }
  });

  it('turns NOT_SERVING as soon as shutdown begins, while still answering Checks during the drain delay', async () => {
    const server = await startAppUnderTest({ redisUrl: redis.url, env: { ...FAST_HEALTH, SHUTDOWN_DRAIN_DELAY_MS: '800' } });
    const client = healthClient(server.grpcAddress);
    const checks = createOfficialCheckClient(server.grpcAddress);
    try {
      expect(await waitForHealth(() => client.check(), 'SERVING')).toBe('SERVING');
      const closing = server.close();
      expect(await waitForHealth(() => client.check(), 'NOT_SERVING', 500)).toBe('NOT_SERVING');
      const response = await checks.check(envoyCheckRequest({ path: '/v1/chat/completions' }));
      expect(response.denied_response.status.code).toBe('Unauthorized');
      await closing;
    } finally {
      checks.close();
      client.close();
    }
  });

  it('on SIGTERM under load, finishes every in-flight Check, then exits 0', async () => {
    const env = { REDIS_URL: redis.url, ADMIN_TOKEN: TEST_ADMIN_TOKEN, REDIS_TIMEOUT_MS: '1000' };
    const replica = await startServerProcess(env);
    const adminApi = async (method: string, path: string, body?: object) => {
      const response = await fetch(`${replica.adminUrl}${path}`, {
        method,
        headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify(body ?? {}),
      });
      return (await response.json()) as { key: string };
    };
    await adminApi('POST', '/admin/accounts', { id: 'drain', name: 'Drain' });
    const { key } = await adminApi('POST', '/admin/accounts/drain/keys', { name: 'load' });
    const checks = createOfficialCheckClient(replica.grpcAddress);
    const pauser = new Redis(redis.url, { disconnectTimeout: 50 });
    try {
      const request = envoyCheckRequest({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${key}` } });
      expect((await checks.check(request)).status.code).toBe(0);
      // Hold Redis so the Checks below are truly in flight inside the server when SIGTERM lands.
      await pauser.call('CLIENT', 'PAUSE', '600', 'WRITE');
      const inFlight = Array.from({ length: 100 }, () =>
        checks.check(request, 10_000).then(
          (response) => (response.status.code === 0 ? 'allowed' : 'denied'),
          (error: { code?: number }) => `rpc-error-${error.code}`,
        ),
      );
      await new Promise((resolve) => setTimeout(resolve, 200));
      const exited = replica.stop();
      const outcomes = await Promise.all(inFlight);
      expect(outcomes.filter((outcome) => outcome !== 'allowed')).toEqual([]);
      expect(await exited).toBe(0);
      expect(replica.output()).toContain('"msg":"stopped"');
    } finally {
      pauser.disconnect();
      checks.close();
    }
  });
});
