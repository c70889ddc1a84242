import Redis from 'ioredis';
import { generateCustomerKey } from '../../src/keys/customer-key';
import { chatCheckRequest, createOfficialCheckClient, type OfficialCheckClient } from '../support/envoy-official-client';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { startAppUnderTest, type AppUnderTest } from '../support/running-app';
import { parseDenyBody } from '../support/deny-body';
import { measuringLoopStall } from '../support/loop-stall';
import { mistyped } from '../support/mistyped';

/**
 * Redis slow or gone: every Check is still answered before Envoy's deadline
 * (200 ms by default), with a 503 denial (or a gRPC UNAVAILABLE when the
 * operator chose that), and never with an allow.
 */
// envoy.yaml gives ext_authz 0.25 s; Envoy's own default is 0.2 s.
const ENVOY_DEFAULT_DEADLINE_MS = 250;
/**
 * The client's own wait: on a loaded machine the test's event loop can lag
 * past Envoy's deadline by itself, so "within the deadline" is judged on the
 * server's own timing of each decision (its decision log's durationMs), net
 * of the time this process's loop was held meanwhile (the server runs in the
 * jest worker: a GC of its heap or the machine's other suites taking the CPU
 * stretch every duration measured across them, and are not the store's doing).
 */
const CLIENT_DEADLINE_MS = 5000;

/** The store_unavailable decisions logged since `from`: how long the server took, and why the store failed. */
function storeUnavailableDecisions(app: AppUnderTest, from: number): { durationMs: number; detail: string }[] {
  return app.logs
    .events('decision')
    .slice(from)
    .filter((line) => line.reason === 'store_unavailable')
    .map((line) => ({ durationMs: Number(line.durationMs), detail: String(line.detail) }));
}

/** Fires `count` concurrent Checks with the key; their answers, and the longest hold of this process's loop meanwhile. */
function concurrentChecks(count: number): Promise<{ result: Awaited<ReturnType<OfficialCheckClient['check']>>[]; stallMs: number }> {
  return measuringLoopStall(() =>
    Promise.all(Array.from({ length: count }, () => client.check(chatCheckRequest(key), CLIENT_DEADLINE_MS))),
  );
}

let redis: TestRedis;
let server: AppUnderTest;
let client: OfficialCheckClient;
let key: string;

beforeAll(async () => {
  redis = await startTestRedis();
  server = await startAppUnderTest({ redisUrl: redis.url, env: { REDIS_TIMEOUT_MS: '50' } });
  client = createOfficialCheckClient(server.grpcAddress);
  await server.admin('POST', '/admin/accounts', { id: 'acme', name: 'Acme' });
  key = (await server.admin('POST', '/admin/accounts/acme/keys', { name: 'ci' })).body.key;
});

afterAll(async () => {
  client?.close();
  await server?.close();
  await redis?.stop();
});

it('allows a valid key while Redis is healthy', async () => {
  // With the 50 ms Redis deadline, a loaded machine can make the first Checks of a fresh process miss it: those are
  // 503s (never an allow of anything else); one of a few tries must be allowed.
  const outcomes: string[] = [];
  for (let attempt = 0; attempt < 5 && !outcomes.includes('allowed'); attempt += 1) {
    const response = await client.check(chatCheckRequest(key), CLIENT_DEADLINE_MS);
    outcomes.push(response.status.code === 0 ? 'allowed' : String(parseDenyBody(response.denied_response.body).error.code));
  }
  expect(outcomes.at(-1)).toBe('allowed');
  expect(new Set(outcomes.slice(0, -1))).toEqual(new Set(outcomes.length > 1 ? ['store_unavailable'] : []));
});

it('answers 503 store_unavailable within the deadline while Redis is paused (slow)', async () => {
  const admin = new Redis(redis.url);
  try {
    await admin.call('CLIENT', 'PAUSE', '600', 'ALL');
    const from = server.logs.events('decision').length;
    const { result: responses, stallMs } = await concurrentChecks(5);
    for (const response of responses) {
      expect(response.http_response).toBe('denied_response');
      expect(response.denied_response.status.code).toBe('ServiceUnavailable');
      expect(parseDenyBody(response.denied_response.body).error.code).toBe('store_unavailable');
    }
    const decisions = storeUnavailableDecisions(server, from);
    expect(decisions).toHaveLength(5);
    for (const { durationMs, detail } of decisions) {
      // Failed by the 50 ms Redis deadline, not by waiting for the pause to end.
      expect(detail).toContain('did not answer within 50 ms');
      expect(durationMs - stallMs).toBeLessThan(ENVOY_DEFAULT_DEADLINE_MS);
    }
  } finally {
    await admin.call('CLIENT', 'UNPAUSE').catch(() => undefined);
    admin.disconnect();
  }
});

describe('with Redis stopped', () => {
  let failOverServer: AppUnderTest;
  let failOverClient: OfficialCheckClient;

  beforeAll(async () => {
    // A second replica configured to hand store failures to Envoy's failure_mode_allow.
    failOverServer = await startAppUnderTest({
      redisUrl: redis.url,
      env: { STORE_FAILURE_MODE: 'grpc-unavailable', REDIS_TIMEOUT_MS: '50' },
    });
    failOverClient = createOfficialCheckClient(failOverServer.grpcAddress);
    await redis.stop();
  });
  afterAll(async () => {
    failOverClient?.close();
    await failOverServer?.close();
  });

  it('denies every concurrent Check with 503 before the deadline, never allowing', async () => {
    const from = server.logs.events('decision').length;
    const { result: responses, stallMs } = await concurrentChecks(20);
    for (const response of responses) {
      expect(response.status.code).toBe(14);
      expect(response.denied_response.status.code).toBe('ServiceUnavailable');
    }
    const decisions = storeUnavailableDecisions(server, from);
    expect(decisions).toHaveLength(20);
    for (const { durationMs, detail } of decisions) {
      // Refused at once, not left to wait for a deadline on a connection that is gone.
      expect(detail).toMatch(/not connected to Redis|the connection to Redis was lost/);
      expect(durationMs - stallMs).toBeLessThan(ENVOY_DEFAULT_DEADLINE_MS);
    }
  });

  it('still refuses malformed keys with 401: they never need Redis', async () => {
    // Its last checksum character changed: 'x' would leave a key that already ends in 'x' valid (1 in 62), and valid keys need Redis.
    const malformed = mistyped(key);
    const response = await client.check(chatCheckRequest(malformed), ENVOY_DEFAULT_DEADLINE_MS);
    expect(response.denied_response.status.code).toBe('Unauthorized');
    expect(parseDenyBody(response.denied_response.body).error.code).toBe('malformed_key');
  });

  it('answers a gRPC UNAVAILABLE error when STORE_FAILURE_MODE=grpc-unavailable', async () => {
    await expect(failOverClient.check(chatCheckRequest(generateCustomerKey('live')), ENVOY_DEFAULT_DEADLINE_MS)).rejects.toMatchObject({
      code: 14,
    });
  });

  it('logs the store failure as an error with the reason, without the key', () => {
    const failures = server.logs.events('decision').filter((line) => line.reason === 'store_unavailable');
    expect(failures.length).toBeGreaterThanOrEqual(20);
    expect(failures[0]).toMatchObject({ level: 'error', keyPrefix: key.slice(0, 12) });
    expect(server.logs.leaksOf([key])).toEqual([]);
  });
});
