import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import Redis from 'ioredis';
import {
  chatCheckRequest,
  createOfficialCheckClient,
  OFFICIAL_EXTERNAL_AUTH_PROTO,
  OFFICIAL_LOADER_OPTIONS,
  type OfficialCheckClient,
  type OfficialCheckResponse,
} from '../support/envoy-official-client';
import { connect, grpcFrame, messagesOf, rawCall } from '../support/raw-grpc';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { startAppUnderTest, type AppUnderTest } from '../support/running-app';
import { until } from '../support/waiting';

/**
 * The gRPC transport inside the real service (real Redis, real sockets):
 * deadlines, client cancellation and the admission bound, and connection
 * recycling while Checks are in flight. The protocol itself is covered by
 * test/unit/grpc/grpc-transport.test.ts.
 */
const check = (
  protoLoader.loadSync(OFFICIAL_EXTERNAL_AUTH_PROTO, OFFICIAL_LOADER_OPTIONS)[
    'envoy.service.auth.v3.Authorization'
  ] as protoLoader.ServiceDefinition
).Check!;

let redis: TestRedis;
let admin: Redis;
beforeAll(async () => {
  redis = await startTestRedis();
  admin = new Redis(redis.url);
});
afterAll(async () => {
  admin?.disconnect();
  await redis?.stop();
});

async function withApp(env: Record<string, string>, body: (app: AppUnderTest, key: string) => Promise<void>): Promise<void> {
  const app = await startAppUnderTest({ redisUrl: redis.url, env });
  try {
    const account = `acct-${Math.random().toString(36).slice(2, 10)}`;
    await app.admin('POST', '/admin/accounts', { id: account, name: 'Transport' });
    const key = (await app.admin('POST', `/admin/accounts/${account}/keys`, {})).body.key;
    await body(app, key);
  } finally {
    await admin.call('CLIENT', 'UNPAUSE').catch(() => undefined);
    await app.close();
  }
}

async function metric(app: AppUnderTest, series: string): Promise<number> {
  const text = await (await fetch(`${app.adminUrl}/metrics`)).text();
  const total = text
    .split('\n')
    .filter((line) => line.startsWith(series))
    .reduce((sum, line) => sum + Number(line.split(' ').pop()), 0);
  return total;
}

function outcome(promise: Promise<OfficialCheckResponse>): Promise<string> {
  return promise.then(
    (response) => (response.status.code === 0 ? 'allowed' : `denied ${response.status.code}`),
    (error: grpc.ServiceError) => `grpc ${error.code}`,
  );
}

it('answers a Check whose grpc-timeout has already passed DEADLINE_EXCEEDED without deciding it', async () => {
  await withApp({}, async (app, key) => {
    const session = connect(app.grpcAddress);
    try {
      const body = [grpcFrame(check.requestSerialize(chatCheckRequest(key)))];
      const answer = await rawCall(session, { headers: { 'grpc-timeout': '0m' }, body });
      expect(answer.grpcStatus).toBe(grpc.status.DEADLINE_EXCEEDED);
      expect(answer.trailersOnly).toBe(true);
      expect(await metric(app, 'gateway_authz_decisions_total')).toBe(0);
      expect(await metric(app, 'gateway_authz_checks_shed_total{reason="past_deadline"}')).toBe(1);
      // With time left the same request is decided.
      const allowed = await rawCall(session, { headers: { 'grpc-timeout': '2S' }, body });
      expect(allowed.grpcStatus).toBe(0);
      expect(check.responseDeserialize(messagesOf(allowed.data)[0]!)).toMatchObject({ status: { code: 0 } });
    } finally {
      session.close();
    }
  });
});

it('answers DEADLINE_EXCEEDED when grpc-timeout passes during a decision (Redis paused), not when Redis answers', async () => {
  await withApp({ REDIS_TIMEOUT_MS: '1000' }, async (app, key) => {
    const session = connect(app.grpcAddress);
    try {
      await admin.call('CLIENT', 'PAUSE', '800', 'ALL');
      const started = Date.now();
      const answer = await rawCall(session, {
        headers: { 'grpc-timeout': '150m' },
        body: [grpcFrame(check.requestSerialize(chatCheckRequest(key)))],
      });
      expect(answer.grpcStatus).toBe(grpc.status.DEADLINE_EXCEEDED);
      expect(Date.now() - started).toBeGreaterThanOrEqual(145);
      expect(Date.now() - started).toBeLessThan(700);
      // The decision still finishes (the Redis call was sent) and its place is given back once.
      await until(async () => (await metric(app, 'gateway_authz_checks_in_flight')) === 0, 'the decision to finish');
    } finally {
      session.close();
    }
  });
});

it('gives back the admission place of a Check the client cancelled exactly once, when its decision ends', async () => {
  await withApp({ MAX_CHECKS_IN_FLIGHT: '2', REDIS_TIMEOUT_MS: '1000' }, async (app, key) => {
    const client = createOfficialCheckClient(app.grpcAddress);
    try {
      expect(await outcome(client.check(chatCheckRequest(key)))).toBe('allowed');
      await admin.call('CLIENT', 'PAUSE', '700', 'ALL');
      // Two Checks fill the bound; their client gives up after 150 ms and resets both streams (RST_STREAM CANCEL).
      const cancelled = [outcome(client.check(chatCheckRequest(key), 150)), outcome(client.check(chatCheckRequest(key), 150))];
      expect(await Promise.all(cancelled)).toEqual(['grpc 4', 'grpc 4']);
      // Their Redis calls still run: the places stay taken, so a third Check is shed.
      expect(await metric(app, 'gateway_authz_checks_in_flight')).toBe(2);
      expect(await outcome(client.check(chatCheckRequest(key), 2000))).toBe('grpc 14');
      // Redis answers: both places come back, once each.
      await until(async () => (await metric(app, 'gateway_authz_checks_in_flight')) === 0, 'the places to come back');
      await admin.call('CLIENT', 'PAUSE', '500', 'ALL');
      const three = [client.check(chatCheckRequest(key)), client.check(chatCheckRequest(key)), client.check(chatCheckRequest(key))].map(
        outcome,
      );
      expect((await Promise.all(three)).sort()).toEqual(['allowed', 'allowed', 'grpc 14']);
      expect(await metric(app, 'gateway_authz_checks_in_flight')).toBe(0);
      const errors = app.logs.lines
        .map((line) => JSON.parse(line) as { level: string; msg: string })
        .filter((line) => line.level === 'error');
      expect(errors.filter((line) => line.msg !== 'key store unavailable: request denied')).toEqual([]);
    } finally {
      client.close();
    }
  });
});

it('recycles a connection at GRPC_MAX_CONNECTION_AGE_MS with GOAWAY while its Checks in flight complete', async () => {
  await withApp({ GRPC_MAX_CONNECTION_AGE_MS: '1000', REDIS_TIMEOUT_MS: '1000' }, async (app, key) => {
    const session = connect(app.grpcAddress);
    const goaways: number[] = [];
    const opened = Date.now();
    session.on('goaway', (code: number) => goaways.push(code));
    try {
      const body = [grpcFrame(check.requestSerialize(chatCheckRequest(key)))];
      expect((await rawCall(session, { body })).grpcStatus).toBe(0);
      // Hold the next Checks in Redis across the connection's age (1 s ± 10 %).
      await admin.call('CLIENT', 'PAUSE', '1200', 'ALL');
      await new Promise((resolve) => setTimeout(resolve, 600 - (Date.now() - opened)));
      const inFlight = Array.from({ length: 5 }, () => rawCall(session, { body, waitMs: 5000 }));
      await until(() => goaways.length > 0, 'GOAWAY', 2000);
      expect(goaways[0]).toBe(0);
      const answers = await Promise.all(inFlight);
      expect(answers.map((answer) => answer.grpcStatus)).toEqual([0, 0, 0, 0, 0]);
      for (const answer of answers) expect(check.responseDeserialize(messagesOf(answer.data)[0]!)).toMatchObject({ status: { code: 0 } });
    } finally {
      session.destroy();
    }
  });
});

it('keeps the official client working across connection recycling, with no failed Check', async () => {
  // A Redis deadline that a loaded test machine cannot miss: only the transport is under test here.
  await withApp({ GRPC_MAX_CONNECTION_AGE_MS: '1000', REDIS_TIMEOUT_MS: '1000' }, async (app, key) => {
    const client: OfficialCheckClient = createOfficialCheckClient(app.grpcAddress);
    try {
      const outcomes: string[] = [];
      const end = Date.now() + 3500;
      // Paced and capped below the default plan's 600 per key per minute: a rate-limited answer is not what this test is about.
      while (Date.now() < end && outcomes.length < 480) {
        outcomes.push(...(await Promise.all(Array.from({ length: 8 }, () => outcome(client.check(chatCheckRequest(key)))))));
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(outcomes.length).toBeGreaterThan(50);
      expect(outcomes.filter((entry) => entry !== 'allowed')).toEqual([]);
    } finally {
      client.close();
    }
  });
});

it('advertises GRPC_MAX_CONCURRENT_STREAMS in its SETTINGS (default 100); a real client holds its extra streams until one ends', async () => {
  const remoteMaxStreams = async (app: AppUnderTest): Promise<number | undefined> => {
    const session = connect(app.grpcAddress);
    try {
      return await new Promise<number | undefined>((resolve) =>
        session.once('remoteSettings', (settings: { maxConcurrentStreams?: number }) => resolve(settings.maxConcurrentStreams)),
      );
    } finally {
      session.close();
    }
  };
  await withApp({}, async (app) => {
    expect(await remoteMaxStreams(app)).toBe(100);
  });
  await withApp({ GRPC_MAX_CONCURRENT_STREAMS: '3', REDIS_TIMEOUT_MS: '1000' }, async (app, key) => {
    expect(await remoteMaxStreams(app)).toBe(3);
    const body = [grpcFrame(Buffer.from(check.requestSerialize(chatCheckRequest(key))))];
    const session = connect(app.grpcAddress);
    try {
      // The first Check caches the key; then the authorize script (a write) waits while Redis is paused.
      expect((await rawCall(session, { body })).grpcStatus).toBe(0);
      await admin.call('CLIENT', 'PAUSE', '600', 'WRITE');
      const calls = Array.from({ length: 5 }, () => rawCall(session, { headers: { 'grpc-timeout': '5S' }, body }));
      await new Promise((resolve) => setTimeout(resolve, 300));
      // Two of the five are still in the client: the server was never handed more than it advertised.
      expect(await metric(app, 'gateway_authz_checks_in_flight')).toBe(3);
      const answers = await Promise.all(calls);
      expect(answers.map((answer) => answer.grpcStatus)).toEqual([0, 0, 0, 0, 0]);
    } finally {
      session.close();
    }
  });
});
