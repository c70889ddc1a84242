import Redis from 'ioredis';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { startServerProcess, type ServerProcess } from '../support/server-process';
import { WebhookReceiver } from '../support/webhook-receiver';
import { until } from '../support/waiting';
import { TEST_ADMIN_TOKEN } from '../support/running-app';

/**
 * No event lost when the service dies between a change and its delivery:
 * a real service process makes the change (the event goes to the account's
 * outbox in Redis in the same script), is killed with SIGKILL before it
 * delivers, and a new process on the same Redis delivers the event.
 */
let redis: TestRedis;
let operator: Redis;
let receiver: WebhookReceiver;
const processes: ServerProcess[] = [];

beforeAll(async () => {
  redis = await startTestRedis();
  operator = new Redis(redis.url, { disconnectTimeout: 50 });
  receiver = await WebhookReceiver.start();
});
afterAll(async () => {
  for (const server of processes) if (server.child.exitCode === null && server.child.signalCode === null) await server.stop();
  operator?.disconnect();
  await receiver?.stop();
  await redis?.stop();
});

const env = (pollIntervalMs: number) => ({
  REDIS_URL: redis.url,
  ADMIN_TOKEN: TEST_ADMIN_TOKEN,
  LOG_LEVEL: 'info',
  WEBHOOK_LOOPBACK_HTTP: 'true',
  WEBHOOK_POLL_INTERVAL_MS: String(pollIntervalMs),
});
const start = async (pollIntervalMs: number) => {
  const server = await startServerProcess(env(pollIntervalMs));
  processes.push(server);
  return server;
};
const admin = async (server: ServerProcess, method: string, path: string, body?: object) => {
  const response = await fetch(`${server.adminUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  return { status: response.status, body: (await response.json()) as Record<string, string> };
};

it('delivers an event whose service was killed (SIGKILL) after the change and before the delivery, once restarted', async () => {
  // Its first round runs at start-up, its next one a minute later: the change below is made between them.
  const first = await start(60_000);
  expect((await admin(first, 'POST', '/admin/accounts', { id: 'crash', name: 'Crash' })).status).toBe(201);
  const endpoint = await admin(first, 'POST', '/admin/accounts/crash/webhooks', { url: receiver.url('/crash'), events: ['key.created'] });
  expect(endpoint.status).toBe(201);
  const key = await admin(first, 'POST', '/admin/accounts/crash/keys', { name: 'made before the crash' });
  expect(key.status).toBe(201);
  first.child.kill('SIGKILL');
  await new Promise((resolve) => first.child.once('exit', resolve));
  expect(receiver.on('/crash')).toHaveLength(0);
  // The event is in Redis, written with the key. A crash between that script and the work-list notice that follows
  // it is survived too: the list is emptied here, and the next process's start-up sweep finds the event anyway.
  expect(await operator.xlen('gwa:{acct:crash}:webhook-outbox')).toBe(1);
  await operator.del('gwa:{webhooks}:accounts');

  await start(20);
  await until(() => receiver.on('/crash').length >= 1, 'the event, delivered by the restarted service', 15_000);
  const event = WebhookReceiver.verified(receiver.on('/crash')[0]!, endpoint.body['secret']!);
  expect(event).toMatchObject({ type: 'key.created', data: { account_id: 'crash', key: { id: key.body['id'] } } });
});
