import { ensureBuiltCli, runCli } from '../support/built-cli';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { startAppUnderTest, TEST_ADMIN_TOKEN, type AppUnderTest } from '../support/running-app';
import { WebhookReceiver } from '../support/webhook-receiver';
import { until } from '../support/waiting';

// Each CLI run is a fresh node process.
jest.setTimeout(60_000);

/** The operator's `gateway-authz webhooks` commands against the admin API, a real Redis and a real receiver. */
let redis: TestRedis;
let server: AppUnderTest;
let receiver: WebhookReceiver;
let env: Record<string, string>;

beforeAll(async () => {
  ensureBuiltCli();
  redis = await startTestRedis();
  receiver = await WebhookReceiver.start();
  server = await startAppUnderTest({ redisUrl: redis.url, env: { WEBHOOK_LOOPBACK_HTTP: 'true', WEBHOOK_POLL_INTERVAL_MS: '20' } });
  env = { ADMIN_URL: server.adminUrl, ADMIN_TOKEN: TEST_ADMIN_TOKEN };
});
afterAll(async () => {
  await server?.close();
  await receiver?.stop();
  await redis?.stop();
});

const json = async (args: string[]) => {
  const run = await runCli([...args, '--json'], env);
  expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: '' });
  return JSON.parse(run.stdout) as Record<string, unknown>;
};

it('adds an endpoint (secret once), which then receives signed events; lists, logs, disables, rotates and deletes it', async () => {
  await json(['accounts', 'create', '--id', 'cli-hooks', '--name', 'CLI hooks']);
  const added = await runCli(
    ['webhooks', 'add', '--account', 'cli-hooks', '--url', receiver.url('/cli'), '--events', 'key.created,key.revoked'],
    env,
  );
  expect(added.code).toBe(0);
  const secret = /signing secret \(shown once[^:]*\): (whsec_\S+)/.exec(added.stdout)?.[1];
  const endpointId = /Added endpoint (whe_\w+)/.exec(added.stdout)?.[1];
  expect(secret).toBeDefined();
  expect(endpointId).toBeDefined();

  await json(['keys', 'create', '--account', 'cli-hooks', '--name', 'watched']);
  await until(() => receiver.on('/cli').length >= 1, 'the key.created event');
  expect(WebhookReceiver.verified(receiver.on('/cli')[0]!, secret!).type).toBe('key.created');

  const list = await runCli(['webhooks', 'list', '--account', 'cli-hooks'], env);
  expect(list.stdout).toContain(endpointId);
  expect(list.stdout).not.toContain(secret);
  await until(
    async () => (await runCli(['webhooks', 'deliveries', '--account', 'cli-hooks', '--id', endpointId!], env)).stdout.includes('delivered'),
    'a delivered attempt in the log',
  );

  expect(await json(['webhooks', 'disable', '--account', 'cli-hooks', '--id', endpointId!])).toMatchObject({
    enabled: false,
    disabledReason: 'disabled by the operator',
  });
  const refused = await runCli(['webhooks', 'test', '--account', 'cli-hooks', '--id', endpointId!], env);
  expect({ code: refused.code, stderr: refused.stderr }).toEqual({ code: 1, stderr: expect.stringContaining('endpoint_disabled') });
  expect(await json(['webhooks', 'enable', '--account', 'cli-hooks', '--id', endpointId!])).toMatchObject({ enabled: true });

  const rotated = await json(['webhooks', 'rotate-secret', '--account', 'cli-hooks', '--id', endpointId!]);
  expect(rotated['secret']).toMatch(/^whsec_/);
  expect(rotated['secret']).not.toBe(secret);
  await json(['webhooks', 'test', '--account', 'cli-hooks', '--id', endpointId!]);
  await until(() => receiver.on('/cli').length >= 2, 'the test event');
  expect(WebhookReceiver.verified(receiver.on('/cli')[1]!, rotated['secret'] as string).type).toBe('webhook.test');

  expect(await json(['webhooks', 'delete', '--account', 'cli-hooks', '--id', endpointId!])).toEqual({ deleted: endpointId });
  expect(await json(['webhooks', 'list', '--account', 'cli-hooks'])).toMatchObject({ endpoints: [] });
});
