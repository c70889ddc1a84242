import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { envoyCheckRequest, OFFICIAL_EXTERNAL_AUTH_PROTO, OFFICIAL_LOADER_OPTIONS } from '../support/envoy-official-client';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { TEST_ADMIN_TOKEN, type AdminBody } from '../support/running-app';
import { startServerProcess, type ServerProcess } from '../support/server-process';
import { until } from '../support/waiting';

/**
 * GRPC_WORKERS=2: two worker processes behind the same ports. Every worker
 * decides, /metrics sums them, a worker that dies is replaced, and SIGTERM
 * drains them all with exit code 0.
 */
let redis: TestRedis;
let server: ServerProcess;

type Check = (request: object) => Promise<{ status: { code: number } }>;
interface CheckClient extends grpc.Client {
  Check(
    request: object,
    metadata: grpc.Metadata,
    options: grpc.CallOptions,
    callback: (error: grpc.ServiceError | null, response?: unknown) => void,
  ): void;
}
const Authorization = (
  grpc.loadPackageDefinition(protoLoader.loadSync(OFFICIAL_EXTERNAL_AUTH_PROTO, OFFICIAL_LOADER_OPTIONS)) as unknown as {
    envoy: { service: { auth: { v3: { Authorization: grpc.ServiceClientConstructor } } } };
  }
).envoy.service.auth.v3.Authorization;

/** Clients on separate connections (as Envoy holds several), so they reach different workers. */
function clients(count: number): { check: Check; close(): void }[] {
  return Array.from({ length: count }, (_, index) => {
    const client = new Authorization(server.grpcAddress, grpc.credentials.createInsecure(), {
      'grpc.use_local_subchannel_pool': 1,
      'grpc.primary_user_agent': `workers-test-${index}`,
    }) as unknown as CheckClient;
    return {
      check: (request) =>
        new Promise((resolve, reject) =>
          // waitForReady: a connection attempt that fails once on a loaded machine is retried within the deadline
          // instead of failing the call at once with UNAVAILABLE; every Check must still be answered in 5 s.
          client.Check(request, new grpc.Metadata({ waitForReady: true }), { deadline: Date.now() + 5000 }, (error, response) =>
            error ? reject(error) : resolve(response as { status: { code: number } }),
          ),
        ),
      close: () => client.close(),
    };
  });
}

async function admin(method: string, path: string, body?: object): Promise<AdminBody> {
  const response = await fetch(`${server.adminUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  return (await response.json()) as AdminBody;
}

const lines = () =>
  server
    .output()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);

const listening = () => lines().filter((line) => line.msg === 'gateway-authz listening').length;

beforeAll(async () => {
  redis = await startTestRedis();
  server = await startServerProcess({
    REDIS_URL: redis.url,
    ADMIN_TOKEN: TEST_ADMIN_TOKEN,
    GRPC_WORKERS: '2',
    LAST_USED_FLUSH_MS: '3600000',
    // What is tested is which worker decides, not the Redis deadline: on a busy machine a worker's first Checks (its
    // connection's first EVAL) took longer than the 50 ms default and were answered UNAVAILABLE.
    REDIS_TIMEOUT_MS: '1000',
  });
  await until(() => listening() >= 2, 'both workers to listen', 15_000);
});
afterAll(async () => {
  await server?.stop();
  await redis?.stop();
});

it('every worker decides, and /metrics reports the sum over the workers', async () => {
  await admin('POST', '/admin/accounts', { id: 'workers', name: 'Workers' });
  const { key } = await admin('POST', '/admin/accounts/workers/keys', {});
  const pool = clients(6);
  try {
    const request = envoyCheckRequest({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${key}` } });
    for (let round = 0; round < 5; round += 1) {
      const answers = await Promise.all(pool.map((client) => client.check(request)));
      for (const answer of answers) expect(answer.status.code).toBe(0);
    }
  } finally {
    for (const client of pool) client.close();
  }
  const deciders = new Set(
    lines()
      .filter((line) => line.event === 'decision')
      .map((line) => line.worker),
  );
  expect(deciders).toEqual(new Set([1, 2]));
  for (let scrape = 0; scrape < 4; scrape += 1) {
    const text = await (await fetch(`${server.adminUrl}/metrics`)).text();
    expect(text).toContain('gateway_authz_decisions_total{style="chat",family="chat-completions",result="allow",reason="allowed"} 30');
  }
});

it('replaces a worker that dies, and keeps answering', async () => {
  const started = lines().filter((line) => line.msg === 'worker started');
  const victim = started[0]!;
  process.kill(victim.pid as number, 'SIGKILL');
  await until(() => lines().some((line) => line.msg === 'worker exited unexpectedly; starting another'), 'the restart', 15_000);
  await until(() => listening() >= 3, 'the new worker to listen', 15_000);
  const [client] = clients(1);
  try {
    const answer = await client!.check(
      envoyCheckRequest({ path: '/v1/chat/completions', headers: { authorization: 'Bearer gk_live_nope' } }),
    );
    expect(answer.status.code).toBe(16);
  } finally {
    client!.close();
  }
});

it('drains every worker on SIGTERM and exits 0', async () => {
  expect(await server.stop()).toBe(0);
  expect(lines().filter((line) => line.msg === 'stopped').length).toBeGreaterThanOrEqual(2);
  expect(lines().some((line) => line.msg === 'all workers stopped')).toBe(true);
});
