import { hashCustomerKey, parseCustomerKey } from '../../src/keys/customer-key';
import { createOfficialCheckClient, envoyCheckRequest } from '../support/envoy-official-client';
import { ensureBuiltCli, runCli } from '../support/built-cli';
import { startServerProcess } from '../support/server-process';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { registerSecrets } from '../support/secret-scan';
import { startAppUnderTest, TEST_ADMIN_TOKEN, type AdminBody, type AppUnderTest } from '../support/running-app';

// Each CLI run is a fresh node process; some tests make several, so allow for a loaded machine.
jest.setTimeout(60_000);

describe('gateway-authz accounts / keys (against the admin API, real Redis)', () => {
  let redis: TestRedis;
  let server: AppUnderTest;
  let env: Record<string, string>;
  beforeAll(async () => {
    ensureBuiltCli();
    redis = await startTestRedis();
    // These tests are about the CLI, not the store deadline: a loaded machine must not turn a slow Redis reply into 503.
    server = await startAppUnderTest({ redisUrl: redis.url, env: { REDIS_TIMEOUT_MS: '1000' } });
    env = { ADMIN_URL: server.adminUrl, ADMIN_TOKEN: TEST_ADMIN_TOKEN };
  });
  afterAll(async () => {
    await server?.close();
    await redis?.stop();
  });

  it('creates an account, then a key whose JSON carries the full key once', async () => {
    const account = await runCli(['accounts', 'create', '--id', 'acme', '--name', 'Acme', '--json'], env);
    expect(account.code).toBe(0);
    expect(JSON.parse(account.stdout)).toMatchObject({ id: 'acme', name: 'Acme' });

    const created = await runCli(['keys', 'create', '--account', 'acme', '--name', 'ci runner', '--env', 'test', '--json'], env);
    expect(created.code).toBe(0);
    const body = JSON.parse(created.stdout) as AdminBody;
    registerSecrets(body.key);
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

  it.each([[[]], [['--json']]])('exits 1 with the API error as one plain line on stderr for an unknown account (%j)', async (extra) => {
    const run = await runCli(['keys', 'create', '--account', 'ghost', ...extra], env);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(/^error: account_not_found: No account 'ghost'\.[^\n]*\n$/);
  });

  it('refuses an environment other than live or test before calling the API', async () => {
    const run = await runCli(['keys', 'create', '--account', 'acme', '--env', 'prod'], env);
    expect(run.code).not.toBe(0);
    expect(run.stderr).toContain("must be 'live' or 'test'");
  });

  it('says so when no token is set', async () => {
    const run = await runCli(['keys', 'create', '--account', 'acme'], { ADMIN_URL: server.adminUrl });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('No operator token: set OPERATOR_TOKEN');
  });

  describe('accounts get / billing / credit / limits', () => {
    /** Runs the CLI with --json, expects exit 0, and answers its parsed JSON. */
    const ok = async (args: string[]) => {
      const run = await runCli([...args, '--json'], env);
      expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: '' });
      return JSON.parse(run.stdout) as AdminBody;
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
      const usage = {
        monthlySpendCap: null,
        spentThisMonth: 0,
        creditShortfall: 0,
        currency: { code: 'USD', exponent: 6 },
        monthlySpendCapFormatted: null,
        spentThisMonthFormatted: '$0.00',
        creditShortfallFormatted: '$0.00',
      };
      const postpaid = { creditBalance: null, creditBalanceFormatted: null };
      expect((await ok(['accounts', 'billing', '--id', 'cli-billing', '--credit-balance', '1000'])).billing).toEqual({
        status: 'active',
        creditBalance: 1000,
        creditBalanceFormatted: '$0.001',
        ...usage,
      });
      expect(await ok(['accounts', 'credit', '--id', 'cli-billing', '--amount', '250'])).toEqual({
        accountId: 'cli-billing',
        creditBalance: 1250,
        currency: { code: 'USD', exponent: 6 },
        creditBalanceFormatted: '$0.00125',
      });
      expect((await ok(['accounts', 'credit', '--id', 'cli-billing', '--amount', '-1300'])).creditBalance).toBe(-50);
      expect((await ok(['accounts', 'billing', '--id', 'cli-billing', '--status', 'suspended'])).billing).toEqual({
        status: 'suspended',
        creditBalance: -50,
        creditBalanceFormatted: '-$0.00005',
        ...usage,
      });
      expect((await ok(['accounts', 'billing', '--id', 'cli-billing', '--postpaid', '--status', 'active'])).billing).toEqual({
        status: 'active',
        ...postpaid,
        ...usage,
      });
      expect((await ok(['accounts', 'get', '--id', 'cli-billing'])).billing).toEqual({ status: 'active', ...postpaid, ...usage });
    });

    it('exits 1 with not_prepaid on stderr when crediting a post-paid account', async () => {
      const run = await runCli(['accounts', 'credit', '--id', 'cli-billing', '--amount', '10'], env);
      expect(run.code).toBe(1);
      expect(run.stdout).toBe('');
      expect(run.stderr).toMatch(/^error: not_prepaid: /);
    });

    it('sends a new Idempotency-Key on each run, and the one given with --idempotency-key on every run that repeats it', async () => {
      await ok(['accounts', 'create', '--id', 'cli-idempotent', '--name', 'CLI Idempotent']);
      await ok(['accounts', 'billing', '--id', 'cli-idempotent', '--credit-balance', '0']);
      // Two runs are two adjustments.
      expect((await ok(['accounts', 'credit', '--id', 'cli-idempotent', '--amount', '5'])).creditBalance).toBe(5);
      expect((await ok(['accounts', 'credit', '--id', 'cli-idempotent', '--amount', '5'])).creditBalance).toBe(10);
      // A script that repeats a run with its key has it applied once, and is told so.
      const run = ['accounts', 'credit', '--id', 'cli-idempotent', '--amount', '7', '--idempotency-key', 'batch 2026-11-28 #3'];
      expect(await ok(run)).toMatchObject({ accountId: 'cli-idempotent', creditBalance: 17, creditBalanceFormatted: '$0.000017' });
      const repeated = await runCli(run, env);
      expect({ code: repeated.code, stderr: repeated.stderr }).toEqual({ code: 0, stderr: '' });
      expect(repeated.stdout).toMatch(
        /^Not applied again: idempotency key batch 2026-11-28 #3 was already used .* balance at \$0\.000017\.$/m,
      );
      expect((await ok(['accounts', 'get', '--id', 'cli-idempotent'])).billing.creditBalance).toBe(17);
      const audit = await server.admin('GET', '/admin/accounts/cli-idempotent/audit?limit=20');
      expect(audit.body.entries.filter((entry) => entry.action === 'account.credit')).toHaveLength(3);

      const reused = await runCli([...run.slice(0, 5), '8', ...run.slice(6)], env);
      expect(reused.code).toBe(1);
      expect(reused.stderr).toMatch(/^error: idempotency_key_reused: .*an amount of 7, not 8/);
    });

    it('refuses a bad --idempotency-key before calling the API', async () => {
      const run = await runCli(
        ['accounts', 'credit', '--id', 'cli-idempotent', '--amount', '1', '--idempotency-key', 'k'.repeat(256)],
        env,
      );
      expect(run.code).not.toBe(0);
      expect(run.stderr).toContain('at most 255');
    });

    it('names the key to retry with when the admin API cannot be reached', async () => {
      const run = await runCli(['accounts', 'credit', '--id', 'cli-idempotent', '--amount', '1'], {
        ADMIN_URL: 'http://127.0.0.1:1',
        ADMIN_TOKEN: TEST_ADMIN_TOKEN,
      });
      expect(run.code).toBe(1);
      expect(run.stderr).toMatch(
        /^error: cannot reach the admin API .* may or may not have been applied\. .* --idempotency-key [0-9a-f-]{36}\n$/,
      );
    });

    it('exits 1 with account_not_found for an unknown account', async () => {
      const run = await runCli(['accounts', 'billing', '--id', 'ghost', '--status', 'suspended'], env);
      expect(run.code).toBe(1);
      expect(run.stderr).toMatch(/^error: account_not_found: No account 'ghost'\./);
    });

    it('sets and clears limit overrides per scope', async () => {
      const set = await ok([
        'accounts',
        'limits',
        '--id',
        'cli-billing',
        '--key-limits',
        '100/1m, 10000/1d',
        '--account-limits',
        '1000/3600',
      ]);
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
      [['accounts', 'billing', '--id', 'cli-billing', '--credit-balance', '12.50'], 'whole number of units'],
      [['accounts', 'credit', '--id', 'cli-billing', '--amount', '0'], 'must not be zero'],
      [['keys', 'limits', '--id', 'key_x'], 'give --limits or --clear'],
      [['keys', 'limits', '--id', 'key_x', '--limits', '1/1m', '--clear'], 'cannot be used with'],
      [
        ['accounts', 'set', '--id', 'cli-billing'],
        'give --name, --status, --credit-balance, --postpaid, --monthly-spend-cap or --no-monthly-spend-cap',
      ],
      [['accounts', 'set', '--id', 'cli-billing', '--credit-balance', '5', '--postpaid'], 'cannot be used with'],
      [['accounts', 'set', '--id', 'cli-billing', '--name', 'X', '--status', 'closed'], "'active' or 'suspended'"],
      [['accounts', 'list', '--id', 'cli-billing'], "unknown option '--id'"],
      [['keys', 'list'], "required option '--account <id>' not specified"],
      [['keys', 'rotate', '--id', 'key_x', '--grace', '8d'], 'at most 7d'],
      [['keys', 'rotate', '--id', 'key_x', '--grace', 'tomorrow'], 'such as 30s, 15m, 1h, 24h or 7d'],
      [['keys', 'rotate', '--id', 'key_x', '--grace', '-1h'], 'such as 30s, 15m, 1h, 24h or 7d'],
      [['keys', 'set', '--id', 'key_x'], 'give --name, --expires-at, --no-expiry, --monthly-spend-cap or --no-monthly-spend-cap'],
      [['keys', 'set', '--id', 'key_x', '--expires-at', '2030-01-01', '--no-expiry'], 'cannot be used with'],
      [['keys', 'create', '--account', 'cli-billing', '--expires-at', '2030-01-01T00:00:00'], 'with a zone'],
      [['keys', 'create', '--account', 'cli-billing', '--expires-at', '2030-02-30'], 'not a day of the calendar'],
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
      const run = await runCli(['keys', 'create', '--account', 'cli-keys', '--name', 'worker', '--json'], env);
      created = JSON.parse(run.stdout) as AdminBody;
      registerSecrets(created.key);
    });

    const expectNoKeyMaterial = (text: string) => {
      expect(text).not.toContain(created.key);
      expect(text).not.toContain(hashCustomerKey(created.key));
    };

    it('shows a key by id without the key or its hash', async () => {
      const run = await runCli(['keys', 'get', '--id', created.id, '--json'], env);
      expect(run.code).toBe(0);
      expect(JSON.parse(run.stdout)).toMatchObject({ id: created.id, accountId: 'cli-keys', prefix: created.prefix, limits: null });
      expectNoKeyMaterial(run.stdout);
    });

    it('sets and clears the key limits', async () => {
      const set = await runCli(['keys', 'limits', '--id', created.id, '--limits', '5/1s,100/1m', '--json'], env);
      expect(set.code).toBe(0);
      expect((JSON.parse(set.stdout) as AdminBody).limits).toEqual([
        { limit: 5, window: '1s' },
        { limit: 100, window: '1m' },
      ]);
      expectNoKeyMaterial(set.stdout);
      const cleared = await runCli(['keys', 'limits', '--id', created.id, '--clear', '--json'], env);
      expect(cleared.code).toBe(0);
      expect((JSON.parse(cleared.stdout) as AdminBody).limits).toBeNull();
    });

    it('exits 1 with key_not_found for an unknown key id', async () => {
      const run = await runCli(['keys', 'get', '--id', 'key_nothing0000000'], env);
      expect(run.code).toBe(1);
      expect(run.stderr).toBe(
        "error: key_not_found: No key 'key_nothing0000000'. Key ids look like key_… (see the answer of key creation).\n",
      );
    });

    it('logged the changes without key material or the admin token', () => {
      expect(server.logs.events('admin').some((line) => line.action === 'key.update' && line.keyId === created.id)).toBe(true);
      expect(server.logs.leaksOf([created.key, TEST_ADMIN_TOKEN])).toEqual([]);
    });
  });

  /** Runs the CLI, expects exit 0 and nothing on stderr, and answers stdout. */
  const text = async (args: string[]) => {
    const run = await runCli(args, env);
    expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: '' });
    return run.stdout;
  };
  /** Runs the CLI with --json, expects exit 0, and answers its one parsed JSON document. */
  const json = async (args: string[]) => JSON.parse(await text([...args, '--json'])) as AdminBody;
  /** Creates a key with --json and registers it as a secret for the suite's log scan. */
  const newKey = async (account: string, ...extra: string[]) => {
    const created = await json(['keys', 'create', '--account', account, ...extra]);
    registerSecrets(created.key);
    return created as { id: string; key: string; prefix: string; name: string };
  };
  const occurrences = (haystack: string, needle: string) => haystack.split(needle).length - 1;

  describe('keys create / list (text and --json)', () => {
    let first: { id: string; key: string; prefix: string };
    let second: { id: string; key: string; prefix: string };
    beforeAll(async () => {
      await json(['accounts', 'create', '--id', 'cli-list', '--name', 'CLI List']);
      first = await newKey('cli-list', '--name', 'deploy bot');
      second = await newKey('cli-list', '--name', 'staging', '--env', 'test', '--expires-at', '2031-06-30');
    });

    it('prints a new key once, set apart, with the warning to store it', async () => {
      const out = await text(['keys', 'create', '--account', 'cli-list', '--name', 'printed']);
      const key = /^ {4}(gk_live_\S+)$/m.exec(out)?.[1];
      expect(key).toBeDefined();
      registerSecrets(key!);
      expect(parseCustomerKey(key!).ok).toBe(true);
      expect(occurrences(out, key!)).toBe(1);
      expect(out).toContain('Store this key now: it will not be shown again.');
      expect(out).toMatch(/^id +key_\S+$/m);
      expect(out).toMatch(new RegExp(`^prefix +${key!.slice(0, 12)}…$`, 'm'));
      expect(out).toMatch(/^name +printed$/m);
      expect(out).toMatch(/^environment +live$/m);
      expect(() => JSON.parse(out) as unknown).toThrow();
    });

    it('lists keys as a table of prefixes and names, never a full key', async () => {
      const out = await text(['keys', 'list', '--account', 'cli-list']);
      const [header, ...rows] = out.trimEnd().split('\n');
      expect(header!.split(/\s{2,}/)).toEqual(['PREFIX', 'NAME', 'ENV', 'STATUS', 'CREATED', 'LAST USED', 'EXPIRES', 'ID']);
      expect(rows).toHaveLength(3);
      const row = (id: string) => rows.find((line) => line.endsWith(id))!;
      expect(row(first.id)).toMatch(
        new RegExp(
          `^${first.prefix}…\\s+deploy bot\\s+live\\s+active\\s+\\d{4}-\\d{2}-\\d{2} \\d{2}:\\d{2}Z\\s+never\\s+-\\s+${first.id}$`,
        ),
      );
      expect(row(second.id)).toMatch(/staging\s+test\s+active\s+.*never\s+2031-06-30 00:00Z\s+key_/);
      for (const key of [first.key, second.key]) expect(out).not.toContain(key);
      expect(out).not.toContain(hashCustomerKey(first.key));
    });

    it('lists the same keys as the API JSON with --json', async () => {
      const body = await json(['keys', 'list', '--account', 'cli-list']);
      expect(Object.keys(body)).toEqual(['keys']);
      expect(body.keys.map((key: { id: string }) => key.id)).toEqual(expect.arrayContaining([first.id, second.id]));
      expect(body.keys.find((key: { id: string }) => key.id === second.id)).toMatchObject({
        name: 'staging',
        environment: 'test',
        status: 'active',
        lastUsedAt: null,
        expiresAt: '2031-06-30T00:00:00.000Z',
      });
      const raw = JSON.stringify(body);
      for (const key of [first.key, second.key]) expect(raw).not.toContain(key);
    });

    it('says so for an account without keys, and exits 1 for an unknown account', async () => {
      await json(['accounts', 'create', '--id', 'cli-empty', '--name', 'Empty']);
      expect(await text(['keys', 'list', '--account', 'cli-empty'])).toBe('Account cli-empty has no keys.\n');
      const run = await runCli(['keys', 'list', '--account', 'ghost'], env);
      expect(run.code).toBe(1);
      expect(run.stderr).toMatch(/^error: account_not_found: No account 'ghost'\./);
    });
  });

  describe('keys rotate / revoke / set', () => {
    beforeAll(async () => {
      await json(['accounts', 'create', '--id', 'cli-rotate', '--name', 'CLI Rotate']);
    });

    const checkStatus = async (key: string) => {
      const client = createOfficialCheckClient(server.grpcAddress);
      try {
        const response = await client.check(
          envoyCheckRequest({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${key}` } }),
        );
        return response.status.code;
      } finally {
        client.close();
      }
    };

    it('rotates immediately by default: prints the new key once, and the old key is revoked and refused', async () => {
      const old = await newKey('cli-rotate', '--name', 'rotate me');
      expect(await checkStatus(old.key)).toBe(0);
      const out = await text(['keys', 'rotate', '--id', old.id]);
      const key = /^ {4}(gk_live_\S+)$/m.exec(out)?.[1];
      expect(key).toBeDefined();
      registerSecrets(key!);
      expect(occurrences(out, key!)).toBe(1);
      expect(out).not.toContain(old.key);
      expect(out).toContain('Store this key now: it will not be shown again.');
      expect(out).toMatch(new RegExp(`^replaces +${old.id}$`, 'm'));
      expect(out).toContain(`The old key ${old.prefix}… (${old.id}) is refused from now on.`);

      const oldView = await json(['keys', 'get', '--id', old.id]);
      expect(oldView).toMatchObject({ status: 'revoked', replacedBy: expect.stringMatching(/^key_/) });
      expect(await json(['keys', 'get', '--id', oldView.replacedBy!])).toMatchObject({
        status: 'active',
        name: 'rotate me',
        replaces: old.id,
      });
      expect(await checkStatus(old.key)).not.toBe(0);
      expect(await checkStatus(key!)).toBe(0);
    });

    it('rotates with --grace 1h: the old key keeps working until revokeAt, an hour on', async () => {
      const old = await newKey('cli-rotate', '--name', 'graceful');
      const before = Date.now();
      const rotated = await json(['keys', 'rotate', '--id', old.id, '--grace', '1h']);
      registerSecrets(rotated.key);
      expect(rotated).toMatchObject({ replaces: old.id, oldKey: { id: old.id, status: 'active' } });
      expect(parseCustomerKey(rotated.key).ok).toBe(true);
      const revokeAt = Date.parse(rotated.oldKey.revokeAt!);
      expect(revokeAt).toBeGreaterThanOrEqual(before + 3600_000 - 2000);
      expect(revokeAt).toBeLessThanOrEqual(Date.now() + 3600_000 + 2000);

      const oldView = await json(['keys', 'get', '--id', old.id]);
      expect(oldView).toMatchObject({ status: 'active', revokeAt: rotated.oldKey.revokeAt, replacedBy: rotated.id });
      expect(await checkStatus(old.key)).toBe(0);
      expect(await text(['keys', 'get', '--id', old.id])).toMatch(
        new RegExp(`^stops working +${rotated.oldKey.revokeAt!.replace(/\./g, '\\.')}$`, 'm'),
      );
    });

    it('says in text until when the old key keeps working', async () => {
      const old = await newKey('cli-rotate', '--name', 'graceful text');
      const out = await text(['keys', 'rotate', '--id', old.id, '--grace', '30s']);
      registerSecrets(/^ {4}(gk_live_\S+)$/m.exec(out)![1]!);
      expect(out).toMatch(
        new RegExp(
          `The old key ${old.prefix}… \\(${old.id}\\) keeps working until \\d{4}-\\d{2}-\\d{2} \\d{2}:\\d{2}Z \\(grace 30s\\), then is refused\\.`,
        ),
      );
    });

    it('refuses a bad --grace before calling the API', async () => {
      const old = await newKey('cli-rotate', '--name', 'not rotated');
      // Against the real API, and against a URL where no API could answer: either way the option is refused first.
      for (const environment of [env, { ...env, ADMIN_URL: 'http://127.0.0.1:9' }]) {
        const run = await runCli(['keys', 'rotate', '--id', old.id, '--grace', '8d'], environment);
        expect(run.code).not.toBe(0);
        expect(run.stdout).toBe('');
        expect(run.stderr).toContain("option '--grace <duration>' argument '8d' is invalid");
        expect(run.stderr).toContain('at most 7d');
        expect(run.stderr).not.toContain('cannot reach');
      }
      expect(await json(['keys', 'get', '--id', old.id])).toMatchObject({ status: 'active', revokeAt: null, replacedBy: null });
      expect(server.logs.events('admin').some((line) => line.action === 'key.rotate' && line.keyId === old.id)).toBe(false);
    });

    it('shows an API refusal of a rotation plainly', async () => {
      const old = await newKey('cli-rotate');
      await json(['keys', 'revoke', '--id', old.id]);
      const run = await runCli(['keys', 'rotate', '--id', old.id], env);
      expect(run.code).toBe(1);
      expect(run.stdout).toBe('');
      expect(run.stderr).toMatch(/^error: key_revoked: .+\n$/);
    });

    it('revokes a key: it is refused from now on', async () => {
      const key = await newKey('cli-rotate', '--name', 'revoke me');
      const out = await text(['keys', 'revoke', '--id', key.id]);
      expect(out).toContain(`Revoked key ${key.id} (${key.prefix}…): it is refused from now on.`);
      expect(out).toMatch(/^status +revoked$/m);
      expect(out).toMatch(/^revoked +\d{4}-/m);
      expect(out).not.toContain(key.key);
      expect(await json(['keys', 'get', '--id', key.id])).toMatchObject({ status: 'revoked', revokedAt: expect.any(String) });
      expect(await checkStatus(key.key)).not.toBe(0);
    });

    it('renames a key and sets and removes its expiry', async () => {
      const key = await newKey('cli-rotate', '--name', 'old name');
      const set = await json(['keys', 'set', '--id', key.id, '--name', 'new name', '--expires-at', '2030-01-31T18:00:00+02:00']);
      expect(set).toMatchObject({ id: key.id, name: 'new name', expiresAt: '2030-01-31T16:00:00.000Z' });
      const out = await text(['keys', 'set', '--id', key.id, '--no-expiry']);
      expect(out).toMatch(/^expires +never$/m);
      expect(out).toMatch(/^name +new name$/m);
      expect((await json(['keys', 'get', '--id', key.id])).expiresAt).toBeNull();
    });
  });

  describe('accounts list / set / get (text and --json)', () => {
    beforeAll(async () => {
      await json(['accounts', 'create', '--id', 'cli-set', '--name', 'CLI Set']);
    });

    it('lists accounts as a table, and as the API JSON with --json', async () => {
      await json(['accounts', 'billing', '--id', 'cli-set', '--credit-balance', '4200']);
      const out = await text(['accounts', 'list']);
      const [header, ...rows] = out.trimEnd().split('\n');
      expect(header!.split(/\s{2,}/)).toEqual(['ID', 'NAME', 'BILLING', 'BALANCE', 'CREATED']);
      expect(rows.find((line) => line.startsWith('cli-set '))).toMatch(
        /^cli-set\s+CLI Set\s+active, prepaid\s+\$0\.0042\s+\d{4}-\d{2}-\d{2} \d{2}:\d{2}Z$/,
      );
      expect(rows.find((line) => line.startsWith('acme '))).toMatch(/^acme\s+Acme\s+active, post-paid\s+-\s+\d{4}-/);

      const body = await json(['accounts', 'list']);
      expect(Object.keys(body)).toEqual(['accounts', 'unreadable']);
      expect(body.unreadable).toEqual([]);
      expect(body.accounts.find((account: { id: string }) => account.id === 'cli-set')).toMatchObject({
        name: 'CLI Set',
        billing: { status: 'active', creditBalance: 4200 },
      });
    });

    it('changes name and billing in one call', async () => {
      const out = await text([
        'accounts',
        'set',
        '--id',
        'cli-set',
        '--name',
        'CLI Set Renamed',
        '--status',
        'suspended',
        '--credit-balance',
        '10',
      ]);
      expect(out).toMatch(/^name +CLI Set Renamed$/m);
      expect(out).toMatch(/^status +suspended$/m);
      expect(out).toMatch(/^credit balance +\$0\.00001$/m);
      const patches = server.logs.events('admin').filter((line) => line.action === 'account.update' && line.accountId === 'cli-set');
      expect(patches.length).toBeGreaterThan(0);

      expect(await json(['accounts', 'set', '--id', 'cli-set', '--postpaid', '--status', 'active'])).toMatchObject({
        name: 'CLI Set Renamed',
        billing: { status: 'active', creditBalance: null },
      });
    });

    it('prints key-value text by default and the API JSON with --json', async () => {
      const out = await text(['accounts', 'get', '--id', 'cli-set']);
      expect(() => JSON.parse(out) as unknown).toThrow();
      expect(out).toMatch(/^id +cli-set$/m);
      expect(out).toMatch(/^billing +post-paid$/m);
      expect(out).toMatch(/^key limits +not overridden/m);
      const run = await runCli(['accounts', 'get', '--id', 'cli-set', '--json'], env);
      expect(JSON.parse(run.stdout)).toMatchObject({ id: 'cli-set', name: 'CLI Set Renamed', limits: { key: null, account: null } });
    });

    it('prints a credit change as one line', async () => {
      await json(['accounts', 'set', '--id', 'cli-set', '--credit-balance', '100']);
      expect(await text(['accounts', 'credit', '--id', 'cli-set', '--amount', '-30'])).toBe('Credit balance of cli-set is now $0.00007.\n');
    });

    it('shows an invalid field from the API plainly, naming it', async () => {
      const run = await runCli(['accounts', 'set', '--id', 'cli-set', '--name', '   '], env);
      expect(run.code).toBe(1);
      expect(run.stdout).toBe('');
      expect(run.stderr).toMatch(/^error: invalid_field: name: .+\n$/);
    });
  });

  describe('members add / list / role / remove, and accounts key-cap (issue 15)', () => {
    beforeAll(async () => {
      await json(['accounts', 'create', '--id', 'cli-team', '--name', 'CLI Team']);
    });

    it('adds an owner by identity and invites a developer by email, lists them, changes a role, removes the invitation', async () => {
      const owner = await json([
        'members',
        'add',
        '--account',
        'cli-team',
        '--role',
        'owner',
        '--issuer',
        'https://login.example.com',
        '--subject',
        'user-42',
      ]);
      expect(owner).toMatchObject({ role: 'owner', status: 'active', issuer: 'https://login.example.com', subject: 'user-42' });
      const invitedText = await text(['members', 'add', '--account', 'cli-team', '--role', 'developer', '--email', 'Dev@Example.com']);
      expect(invitedText).toMatch(/^Invited dev@example\.com to account cli-team as developer\.\n/);
      const list = await text(['members', 'list', '--account', 'cli-team']);
      const [header, ...rows] = list.trimEnd().split('\n');
      expect(header!.split(/\s{2,}/)).toEqual(['ID', 'ROLE', 'STATUS', 'WHO', 'ADDED', 'BY']);
      expect(rows).toHaveLength(2);
      expect(rows[0]).toMatch(/^mem_\w+\s+owner\s+active\s+user-42 @ https:\/\/login\.example\.com\s+\d{4}-.*\s+operator$/);
      expect(rows[1]).toMatch(/^mem_\w+\s+developer\s+invited\s+dev@example\.com\s+/);
      const invitedId = rows[1]!.split(/\s+/)[0]!;
      expect(await json(['members', 'role', '--account', 'cli-team', '--id', invitedId, '--role', 'viewer'])).toMatchObject({
        id: invitedId,
        role: 'viewer',
      });
      expect(await text(['members', 'remove', '--account', 'cli-team', '--id', invitedId])).toBe(
        `Removed dev@example.com (${invitedId}) from account cli-team.\n`,
      );
      expect((await json(['members', 'list', '--account', 'cli-team'])).members).toHaveLength(1);
    });

    it('exits 1 with last_owner when removing the only owner', async () => {
      const only = (await json(['members', 'list', '--account', 'cli-team'])).members.find((m) => m.role === 'owner')!;
      const run = await runCli(['members', 'remove', '--account', 'cli-team', '--id', only.id], env);
      expect(run.code).toBe(1);
      expect(run.stdout).toBe('');
      expect(run.stderr).toMatch(/^error: last_owner: /);
    });

    it('sets and removes an account key cap, and the API refuses a key past it', async () => {
      expect((await json(['accounts', 'key-cap', '--id', 'cli-team', '--max', '1'])).maxActiveKeys).toBe(1);
      expect(await text(['accounts', 'get', '--id', 'cli-team'])).toMatch(/^max active keys +1$/m);
      await json(['keys', 'create', '--account', 'cli-team']).then((created) => registerSecrets(created.key));
      const refused = await runCli(['keys', 'create', '--account', 'cli-team'], env);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(/^error: active_key_cap_reached: Account 'cli-team' holds 1 keys/);
      expect((await json(['accounts', 'key-cap', '--id', 'cli-team', '--default'])).maxActiveKeys).toBeNull();
      expect(await text(['accounts', 'get', '--id', 'cli-team'])).toMatch(/^max active keys +not set \(the service default applies\)$/m);
    });

    it("sets what is done with the account's exposed keys, and returns to the default", async () => {
      expect(await text(['accounts', 'get', '--id', 'cli-team'])).toMatch(/^exposed keys +revoked at once$/m);
      expect((await json(['accounts', 'exposed-keys', '--id', 'cli-team', '--action', 'rotate'])).exposedKeyAction).toBe('rotate');
      expect(await text(['accounts', 'get', '--id', 'cli-team'])).toMatch(/^exposed keys +rotated, refused after an hour's grace$/m);
      expect((await json(['accounts', 'exposed-keys', '--id', 'cli-team', '--action', 'default'])).exposedKeyAction).toBe('revoke');
    });

    it.each([
      [['accounts', 'exposed-keys', '--id', 'cli-team', '--action', 'ignore'], 'Allowed choices are revoke, rotate, default'],
      [['accounts', 'exposed-keys', '--id', 'cli-team'], "required option '--action <action>' not specified"],
      [['members', 'add', '--account', 'cli-team', '--role', 'admin', '--email', 'a@example.com'], 'owner, developer, viewer'],
      [['members', 'add', '--account', 'cli-team', '--role', 'owner'], 'give --email, or both --issuer and --subject'],
      [['members', 'add', '--account', 'cli-team', '--role', 'owner', '--email', 'nope'], 'email address'],
      [['members', 'add', '--account', 'cli-team', '--role', 'owner', '--email', 'a@example.com', '--subject', 's'], 'cannot be used with'],
      [['members', 'add', '--account', 'cli-team', '--role', 'owner', '--issuer', 'ftp://x', '--subject', 's'], 'https URL'],
      [['members', 'remove', '--account', 'cli-team'], "required option '--id <member-id>' not specified"],
      [['accounts', 'key-cap', '--id', 'cli-team'], 'give --max or --default'],
      [['accounts', 'key-cap', '--id', 'cli-team', '--max', '-1'], 'from 0 to 10000'],
      [['accounts', 'key-cap', '--id', 'cli-team', '--max', '3', '--default'], 'cannot be used with'],
    ])('refuses %j before calling the API, saying why', async (args, says) => {
      const run = await runCli(args, env);
      expect(run.code).not.toBe(0);
      expect(run.stdout).toBe('');
      expect(run.stderr).toContain(says);
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
      // Without ADMIN_TOKEN the admin API still runs, for operator tokens and sign-ins; a call without one is refused.
      const admin = await fetch(`${server.adminUrl}/admin/accounts/x`);
      expect(admin.status).toBe(401);
    } finally {
      expect(await server.stop()).toBe(0);
    }
  });
});
