import { hashCustomerKey, parseCustomerKey } from '../../src/keys/customer-key';
import { createOfficialCheckClient, envoyCheckRequest } from '../support/envoy-official-client';
import { ensureBuiltCli, runCli } from '../support/built-cli';
import { startServerProcess } from '../support/server-process';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { registerSecrets } from '../support/secret-scan';
import { startAppUnderTest, TEST_ADMIN_TOKEN, type AppUnderTest } from '../support/running-app';

describe('gateway-authz accounts / keys (against the admin API, real Redis)', () => {
  let redis: TestRedis;
  let server: AppUnderTest;
  let env: Record<string, string>;
  beforeAll(async () => {
    ensureBuiltCli();
    redis = await startTestRedis();
    server = await startAppUnderTest({ redisUrl: redis.url });
    env = { ADMIN_URL: server.adminUrl, ADMIN_TOKEN: TEST_ADMIN_TOKEN };
  });
  afterAll(async () => {
    await server?.close();
    await redis?.stop();
  });

  it('creates an account, then a key whose JSON carries the full key once', async () => {
    const account = await runCli(['accounts', 'create', '--id', 'acme', '--name', 'Acme'], env);
    expect(account.code).toBe(0);
    expect(JSON.parse(account.stdout)).toMatchObject({ id: 'acme', name: 'Acme' });

    const created = await runCli(['keys', 'create', '--account', 'acme', '--name', 'ci runner', '--env', 'test'], env);
    expect(created.code).toBe(0);
    const body = JSON.parse(created.stdout);
    expect(Object.keys(body).sort()).toEqual(['accountId', 'createdAt', 'environment', 'id', 'key', 'name', 'prefix']);
    expect(body).toMatchObject({ accountId: 'acme', name: 'ci runner', environment: 'test' });
    expect(parseCustomerKey(body.key).ok).toBe(true);

    // The key the CLI printed is accepted by the Check service.
    const client = createOfficialCheckClient(server.grpcAddress);
    try {
      const response = await client.check(
        envoyCheckRequest({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${body.key}` } }),
      );
      expect(response.status.code).toBe(0);
    } finally {
      client.close();
    }
  });

  it('exits 1 with the API error on stderr for an unknown account', async () => {
    const run = await runCli(['keys', 'create', '--account', 'ghost'], env);
    expect(run.code).toBe(1);
    expect(JSON.parse(run.stderr).error.code).toBe('account_not_found');
  });

  it('refuses an environment other than live or test before calling the API', async () => {
    const run = await runCli(['keys', 'create', '--account', 'acme', '--env', 'prod'], env);
    expect(run.code).not.toBe(0);
    expect(run.stderr).toContain("must be 'live' or 'test'");
  });

  it('says so when ADMIN_TOKEN is missing', async () => {
    const run = await runCli(['keys', 'create', '--account', 'acme'], { ADMIN_URL: server.adminUrl });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('ADMIN_TOKEN is not set');
  });

  describe('accounts get / billing / credit / limits', () => {
    /** Runs the CLI, expects exit 0, and answers its parsed JSON. */
    const ok = async (args: string[]) => {
      const run = await runCli(args, env);
      expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: '' });
      return JSON.parse(run.stdout);
    };
    beforeAll(async () => {
      await ok(['accounts', 'create', '--id', 'cli-billing', '--name', 'CLI Billing']);
    });

    it('shows an account', async () => {
      expect(await ok(['accounts', 'get', '--id', 'cli-billing'])).toMatchObject({
        id: 'cli-billing',
        billing: { status: 'active', creditBalance: null },
        limits: { key: null, account: null },
      });
    });

    it('makes an account prepaid, adds and debits credit, suspends it, then makes it post-paid', async () => {
      expect((await ok(['accounts', 'billing', '--id', 'cli-billing', '--credit-balance', '1000'])).billing).toEqual({
        status: 'active',
        creditBalance: 1000,
      });
      expect(await ok(['accounts', 'credit', '--id', 'cli-billing', '--amount', '250'])).toEqual({
        accountId: 'cli-billing',
        creditBalance: 1250,
      });
      expect((await ok(['accounts', 'credit', '--id', 'cli-billing', '--amount', '-1300'])).creditBalance).toBe(-50);
      expect((await ok(['accounts', 'billing', '--id', 'cli-billing', '--status', 'suspended'])).billing).toEqual({
        status: 'suspended',
        creditBalance: -50,
      });
      expect((await ok(['accounts', 'billing', '--id', 'cli-billing', '--postpaid', '--status', 'active'])).billing).toEqual({
        status: 'active',
        creditBalance: null,
      });
      expect((await ok(['accounts', 'get', '--id', 'cli-billing'])).billing).toEqual({ status: 'active', creditBalance: null });
    });

    it('exits 1 with not_prepaid on stderr when crediting a post-paid account', async () => {
      const run = await runCli(['accounts', 'credit', '--id', 'cli-billing', '--amount', '10'], env);
      expect(run.code).toBe(1);
      expect(run.stdout).toBe('');
      expect(JSON.parse(run.stderr).error.code).toBe('not_prepaid');
    });

    it('exits 1 with account_not_found for an unknown account', async () => {
      const run = await runCli(['accounts', 'billing', '--id', 'ghost', '--status', 'suspended'], env);
      expect(run.code).toBe(1);
      expect(JSON.parse(run.stderr).error.code).toBe('account_not_found');
    });

    it('sets and clears limit overrides per scope', async () => {
      const set = await ok(['accounts', 'limits', '--id', 'cli-billing', '--key-limits', '100/1m, 10000/1d', '--account-limits', '1000/3600']);
      expect(set.limits).toEqual({
        key: [
          { limit: 100, window: '1m' },
          { limit: 10000, window: '1d' },
        ],
        account: [{ limit: 1000, window: '1h' }],
      });
      const cleared = await ok(['accounts', 'limits', '--id', 'cli-billing', '--clear-key-limits']);
      expect(cleared.limits).toEqual({ key: null, account: [{ limit: 1000, window: '1h' }] });
      expect((await ok(['accounts', 'limits', '--id', 'cli-billing', '--clear-account-limits'])).limits).toEqual({
        key: null,
        account: null,
      });
    });

    it.each([
      [['accounts', 'limits', '--id', 'cli-billing', '--key-limits', '100/1x'], 'window'],
      [['accounts', 'limits', '--id', 'cli-billing', '--key-limits', '0/1m'], 'limit must be a whole number'],
      [['accounts', 'limits', '--id', 'cli-billing', '--account-limits', '100'], 'LIMIT/WINDOW'],
      [['accounts', 'limits', '--id', 'cli-billing', '--key-limits', '5/1m,6/60'], 'repeats the window'],
      [['accounts', 'limits', '--id', 'cli-billing', '--key-limits', '5/1m', '--clear-key-limits'], 'cannot be used with'],
      [['accounts', 'limits', '--id', 'cli-billing'], 'give --key-limits'],
      [['accounts', 'billing', '--id', 'cli-billing'], 'give --status'],
      [['accounts', 'billing', '--id', 'cli-billing', '--status', 'closed'], "'active' or 'suspended'"],
      [['accounts', 'billing', '--id', 'cli-billing', '--credit-balance', '5', '--postpaid'], 'cannot be used with'],
      [['accounts', 'billing', '--id', 'cli-billing', '--credit-balance', '12.50'], 'whole number of minor units'],
      [['accounts', 'credit', '--id', 'cli-billing', '--amount', '0'], 'must not be zero'],
      [['keys', 'limits', '--id', 'key_x'], 'give --limits or --clear'],
      [['keys', 'limits', '--id', 'key_x', '--limits', '1/1m', '--clear'], 'cannot be used with'],
    ])('refuses %j before calling the API, saying why', async (args, says) => {
      const run = await runCli(args, env);
      expect(run.code).not.toBe(0);
      expect(run.stdout).toBe('');
      expect(run.stderr).toContain(says);
    });

    it('changed nothing with the refused commands', async () => {
      expect(await ok(['accounts', 'get', '--id', 'cli-billing'])).toMatchObject({
        name: 'CLI Billing',
        billing: { status: 'active', creditBalance: null },
        limits: { key: null, account: null },
      });
    });
  });

  describe('keys get / limits', () => {
    let created: { id: string; key: string; prefix: string };
    beforeAll(async () => {
      await runCli(['accounts', 'create', '--id', 'cli-keys', '--name', 'CLI Keys'], env);
      const run = await runCli(['keys', 'create', '--account', 'cli-keys', '--name', 'worker'], env);
      created = JSON.parse(run.stdout);
      registerSecrets(created.key);
    });

    const expectNoKeyMaterial = (text: string) => {
      expect(text).not.toContain(created.key);
      expect(text).not.toContain(hashCustomerKey(created.key));
    };

    it('shows a key by id without the key or its hash', async () => {
      const run = await runCli(['keys', 'get', '--id', created.id], env);
      expect(run.code).toBe(0);
      expect(JSON.parse(run.stdout)).toMatchObject({ id: created.id, accountId: 'cli-keys', prefix: created.prefix, limits: null });
      expectNoKeyMaterial(run.stdout);
    });

    it('sets and clears the key limits', async () => {
      const set = await runCli(['keys', 'limits', '--id', created.id, '--limits', '5/1s,100/1m'], env);
      expect(set.code).toBe(0);
      expect(JSON.parse(set.stdout).limits).toEqual([
        { limit: 5, window: '1s' },
        { limit: 100, window: '1m' },
      ]);
      expectNoKeyMaterial(set.stdout);
      const cleared = await runCli(['keys', 'limits', '--id', created.id, '--clear'], env);
      expect(cleared.code).toBe(0);
      expect(JSON.parse(cleared.stdout).limits).toBeNull();
    });

    it('exits 1 with key_not_found for an unknown key id', async () => {
      const run = await runCli(['keys', 'get', '--id', 'key_nothing0000000'], env);
      expect(run.code).toBe(1);
      expect(JSON.parse(run.stderr).error.code).toBe('key_not_found');
    });

    it('logged the changes without key material or the admin token', () => {
      expect(server.logs.events('admin').some((line) => line.action === 'key.update' && line.keyId === created.id)).toBe(true);
      expect(server.logs.leaksOf([created.key, TEST_ADMIN_TOKEN])).toEqual([]);
    });
  });
});

describe('gateway-authz serve', () => {
  it('exits 2 listing every configuration problem at once', async () => {
    const run = await runCli(['serve'], {
      GRPC_PORT: 'ninety',
      REDIS_URL: 'http://localhost:6379',
      LOG_LEVEL: 'chatty',
      ADMIN_TOKEN: 'short',
      CONFIG_FILE: '/nonexistent/gateway-authz.json',
    });
    expect(run.code).toBe(2);
    for (const name of ['GRPC_PORT', 'REDIS_URL', 'LOG_LEVEL', 'ADMIN_TOKEN', 'CONFIG_FILE']) expect(run.stderr).toContain(name);
  });

  it('starts without Redis on the embedded store, says it keeps nothing, and answers Check', async () => {
    const server = await startServerProcess({});
    try {
      expect(server.output()).toContain('in-memory');
      expect(server.output()).toContain('keeps nothing');
      const client = createOfficialCheckClient(server.grpcAddress);
      try {
        const response = await client.check(envoyCheckRequest({ path: '/v1/chat/completions' }));
        expect(response.denied_response.status.code).toBe('Unauthorized');
      } finally {
        client.close();
      }
      const admin = await fetch(`${server.adminUrl}/admin/accounts/x`);
      expect(admin.status).toBe(503);
    } finally {
      expect(await server.stop()).toBe(0);
    }
  });
});
