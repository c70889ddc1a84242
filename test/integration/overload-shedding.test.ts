import * as grpc from '@grpc/grpc-js';
import Redis from 'ioredis';
import { chatCheckRequest, createOfficialCheckClient, type OfficialCheckClient } from '../support/envoy-official-client';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { startAppUnderTest, type AppUnderTest } from '../support/running-app';
import { parseDenyBody } from '../support/deny-body';
import { measuringLoopStall } from '../support/loop-stall';
import { mistyped } from '../support/mistyped';

/**
 * Past MAX_CHECKS_IN_FLIGHT a Check is answered gRPC UNAVAILABLE at once
 * (Envoy retries it on another replica or answers status_on_error), instead of
 * queueing behind Checks that wait for a slow Redis. Never an allow.
 */
const ENVOY_DEADLINE_MS = 250;
const MAX_IN_FLIGHT = 4;
const UNAVAILABLE = 14;
/** A Redis deadline (REDIS_TIMEOUT_MS) long enough that an answer at once and one at the deadline cannot be confused. */
const REDIS_DEADLINE_MS = 200;
/**
 * Client and server share this test process on a shared 2-core machine, so "at once" includes the client's own
 * work. What matters is that it is far from the Redis deadline. Times are judged net of the longest hold of this
 * process's loop meanwhile (its GC, the machine's other suites: 33 ms seen in CI), which is not the server's doing.
 */
const AT_ONCE_MS = 100;
/**
 * The client's own wait, well past Envoy's: with the Redis deadline at 200 ms, a loaded machine's lag would otherwise
 * turn an answer at the Redis deadline into the client's DEADLINE_EXCEEDED. "Within Envoy's deadline" is judged on the
 * server's own decision times (its decision log's durationMs).
 */
const CLIENT_DEADLINE_MS = 2000;

let redis: TestRedis;
let server: AppUnderTest;
let client: OfficialCheckClient;
let key: string;

/** `outcome`: 'allowed', a deny reason code (e.g. 'store_unavailable'), 'shed', or another gRPC error. */
interface Timed {
  ms: number;
  outcome: string;
}

async function timedCheck(credential: string): Promise<Timed> {
  const started = performance.now();
  try {
    const response = await client.check(chatCheckRequest(credential), CLIENT_DEADLINE_MS);
    const ms = performance.now() - started;
    if (response.http_response === 'ok_response') return { ms, outcome: 'allowed' };
    return { ms, outcome: String(parseDenyBody(response.denied_response.body).error.code) };
  } catch (error) {
    const { code, details } = error as { code: number; details: string };
    return { ms: performance.now() - started, outcome: code === UNAVAILABLE && /overloaded/.test(details) ? 'shed' : `grpc ${code}` };
  }
}

/** A Check whose message is not a CheckRequest at all: bytes no protobuf decoder reads (a field with wire type 7). */
function undecodableCheck(): Promise<Timed> {
  const raw = new grpc.Client(server.grpcAddress, grpc.credentials.createInsecure());
  const started = performance.now();
  return new Promise<Timed>((resolve) => {
    raw.makeUnaryRequest(
      '/envoy.service.auth.v3.Authorization/Check',
      (bytes: Buffer) => bytes,
      (bytes: Buffer) => bytes,
      Buffer.from([0x0f, 0xff, 0xff]),
      new grpc.Metadata(),
      { deadline: Date.now() + CLIENT_DEADLINE_MS },
      (error) => {
        raw.close();
        const { code, details } = (error ?? { code: 0, details: '' }) as { code: number; details: string };
        const outcome = code === UNAVAILABLE && /overloaded/.test(details) ? 'shed' : `grpc ${code}: ${details}`;
        resolve({ ms: performance.now() - started, outcome });
      },
    );
  });
}

async function metricValue(name: string): Promise<number> {
  const text = await (await fetch(`${server.adminUrl}/metrics`)).text();
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${name} `));
  return line ? Number(line.split(' ')[1]) : 0;
}

async function waitForInFlight(count: number): Promise<void> {
  for (let attempt = 0; attempt < 100; attempt += 1) {
    if ((await metricValue('gateway_authz_checks_in_flight')) === count) return;
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  throw new Error(`never saw ${count} Checks in flight`);
}

beforeAll(async () => {
  redis = await startTestRedis();
  server = await startAppUnderTest({
    redisUrl: redis.url,
    env: { MAX_CHECKS_IN_FLIGHT: String(MAX_IN_FLIGHT), REDIS_TIMEOUT_MS: String(REDIS_DEADLINE_MS) },
  });
  client = createOfficialCheckClient(server.grpcAddress);
  await server.admin('POST', '/admin/accounts', { id: 'acme', name: 'Acme' });
  key = (await server.admin('POST', '/admin/accounts/acme/keys', { name: 'ci' })).body.key;
  expect((await timedCheck(key)).outcome).toBe('allowed');
  // The client's first gRPC error (a Check past its own deadline) loads its error path, stack traces and all.
  await expect(client.check(chatCheckRequest(key), 0)).rejects.toMatchObject({ code: 4 });
  // The first scrape loads fetch and prom-client's collectors (tens of ms): not inside the timed burst.
  expect(await metricValue('gateway_authz_checks_in_flight')).toBe(0);
});

afterAll(async () => {
  client?.close();
  await server?.close();
  await redis?.stop();
});

it('sheds the Checks beyond the bound at once while Redis is slow, answers the rest by the rules, and never allows', async () => {
  const admin = new Redis(redis.url);
  try {
    await admin.call('CLIENT', 'PAUSE', '1000', 'ALL');
    const { result, stallMs } = await measuringLoopStall(async () => {
      // Fill the bound with Checks that wait for the paused Redis…
      const admitted = Array.from({ length: MAX_IN_FLIGHT }, () => timedCheck(key));
      await waitForInFlight(MAX_IN_FLIGHT);
      // …then a burst: valid keys and malformed ones alike are shed (the bound counts every Check, see docs/configuration/settings.md).
      const malformed = mistyped(key);
      // A shed Check's request is not even decoded (a decode is the CPU and memory the admitted ones need): one
      // that would not decode is shed too, where outside overload it is answered INTERNAL.
      const burst = [...Array.from({ length: 6 }, () => timedCheck(key)), timedCheck(malformed), timedCheck(malformed), undecodableCheck()];
      return { burstAnswers: await Promise.all(burst), admittedAnswers: await Promise.all(admitted) };
    });
    const { burstAnswers, admittedAnswers } = result;

    expect(burstAnswers.map((answer) => answer.outcome)).toEqual(Array(9).fill('shed'));
    for (const answer of burstAnswers) expect(answer.ms - stallMs).toBeLessThan(AT_ONCE_MS);
    expect(admittedAnswers.map((answer) => answer.outcome)).toEqual(Array(MAX_IN_FLIGHT).fill('store_unavailable'));
    // Answered at the Redis deadline, not shed, and within Envoy's deadline as the server timed them.
    for (const answer of admittedAnswers) expect(answer.ms).toBeGreaterThanOrEqual(REDIS_DEADLINE_MS - 5);
    const serverMs = server.logs
      .events('decision')
      .filter((line) => line.reason === 'store_unavailable')
      .map((line) => Number(line.durationMs));
    expect(serverMs).toHaveLength(MAX_IN_FLIGHT);
    for (const ms of serverMs) expect(ms - stallMs).toBeLessThan(ENVOY_DEADLINE_MS);
    expect(await metricValue('gateway_authz_checks_shed_total{reason="over_capacity"}')).toBe(9);
    expect(await metricValue('gateway_authz_checks_in_flight')).toBe(0);
  } finally {
    await admin.call('CLIENT', 'UNPAUSE').catch(() => undefined);
    admin.disconnect();
  }
});

it('allows everything again once Redis answers, a full bound at a time', async () => {
  for (let round = 0; round < 3; round += 1) {
    const answers = await Promise.all(Array.from({ length: MAX_IN_FLIGHT }, () => timedCheck(key)));
    expect(answers.map((answer) => answer.outcome)).toEqual(Array(MAX_IN_FLIGHT).fill('allowed'));
  }
  expect(await metricValue('gateway_authz_checks_shed_total{reason="over_capacity"}')).toBe(9);
});

it('answers a request that does not decode INTERNAL when it is not shed', async () => {
  const answer = await undecodableCheck();
  expect(answer.outcome).toMatch(/^grpc 13: Error deserializing request/);
});
