import { createHash } from 'node:crypto';
import { parseCustomerKey, hashCustomerKey } from '../../src/keys/customer-key';
import { ADMIN_KEY_VIEW_FIELDS } from '../support/key-view-fields';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { startAppUnderTest, TEST_ADMIN_TOKEN, type AppUnderTest } from '../support/running-app';

/** The admin API over real HTTP, backed by a real Redis. */
let redis: TestRedis;
let server: AppUnderTest;
const createdKeys: string[] = [];

beforeAll(async () => {
  redis = await startTestRedis();
  server = await startAppUnderTest({ redisUrl: redis.url });
});
afterAll(async () => {
  await server?.close();
  await redis?.stop();
});

describe('authentication', () => {
  it('refuses a call without the admin token', async () => {
    const response = await server.admin('POST', '/admin/accounts', { id: 'a', name: 'A' }, '');
    expect(response.status).toBe(401);
    expect(response.body.error.code).toBe('unauthorized');
  });

  it('answers a wrong token slowly (brute force is pointless) and the right one at once', async () => {
    const wrongStarted = Date.now();
    expect((await server.admin('GET', '/admin/accounts', undefined, 'guess-guess-guess-1')).status).toBe(401);
    expect(Date.now() - wrongStarted).toBeGreaterThanOrEqual(450);
    expect((await server.admin('GET', '/admin/accounts')).status).toBe(200);
  });

  it('refuses a wrong token, including one that shares a prefix with the right one', async () => {
    for (const token of ['nope', TEST_ADMIN_TOKEN.slice(0, -1), `${TEST_ADMIN_TOKEN}x`]) {
      expect((await server.admin('GET', '/admin/accounts/a', undefined, token)).status).toBe(401);
    }
  });

  it.each([
    ['not configured', { ADMIN_TOKEN: '' }],
    ['turned off', { ADMIN_TOKEN_ENABLED: 'false' }],
  ])('refuses the break-glass token when ADMIN_TOKEN is %s, saying what it takes instead', async (_case, env) => {
    const tokenless = await startAppUnderTest({ env });
    try {
      const response = await tokenless.admin('POST', '/admin/accounts', { id: 'a', name: 'A' });
      expect(response.status).toBe(401);
      expect(response.body.error).toMatchObject({ code: 'unauthorized' });
      expect(response.body.error.message).toContain('operator API token');
      expect(response.body.error.message).not.toContain('ADMIN_TOKEN');
      expect(tokenless.logs.lines.some((line) => line.includes('break-glass ADMIN_TOKEN is off'))).toBe(true);
    } finally {
      await tokenless.close();
    }
  });
});

describe('accounts', () => {
  it('creates an account (201) and reads it back', async () => {
    const created = await server.admin('POST', '/admin/accounts', { id: 'acme', name: 'Acme Corp' });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      id: 'acme',
      name: 'Acme Corp',
      billing: { status: 'active', creditBalance: null },
      limits: { key: null, account: null },
    });
    expect(Date.parse(created.body.createdAt)).not.toBeNaN();
    expect((await server.admin('GET', '/admin/accounts/acme')).body).toEqual(created.body);
  });

  it('answers 409 naming the id for a duplicate account', async () => {
    await server.admin('POST', '/admin/accounts', { id: 'dup', name: 'One' });
    const again = await server.admin('POST', '/admin/accounts', { id: 'dup', name: 'Two' });
    expect(again.status).toBe(409);
    expect(again.body.error).toMatchObject({ code: 'account_exists', field: 'id' });
  });

  it.each([
    [{ name: 'No id' }, 'id'],
    [{ id: 'has space', name: 'X' }, 'id'],
    [{ id: 'ok' }, 'name'],
    [{ id: 'ok', name: '   ' }, 'name'],
    [{ id: 'ok', name: 'X', plan: 'gold' }, 'plan'],
  ])('answers 400 naming the bad field for %j', async (body, field) => {
    const response = await server.admin('POST', '/admin/accounts', body);
    expect(response.status).toBe(400);
    expect(response.body.error).toMatchObject({ code: 'invalid_field', field });
    expect(response.body.error.message).toContain(field);
  });

  it('answers 400 invalid_json for a body that is not JSON', async () => {
    const response = await fetch(`${server.adminUrl}/admin/accounts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: '{"id": "x",',
    });
    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('invalid_json');
  });

  it('answers 404 for an unknown account and for an unknown route', async () => {
    expect((await server.admin('GET', '/admin/accounts/nobody')).body.error.code).toBe('account_not_found');
    const route = await server.admin('GET', '/admin/nothing-here');
    expect(route.status).toBe(404);
    expect(route.body.error.code).toBe('not_found');
  });
});

describe('keys', () => {
  beforeAll(async () => {
    await server.admin('POST', '/admin/accounts', { id: 'keyed', name: 'Keyed Ltd' });
  });

  it('creates a live key by default and returns the full key once, with its prefix', async () => {
    const response = await server.admin('POST', '/admin/accounts/keyed/keys', { name: 'prod backend' });
    expect(response.status).toBe(201);
    const { key, ...rest } = response.body;
    createdKeys.push(key);
    expect(Object.keys(response.body).sort()).toEqual(['accountId', 'createdAt', 'environment', 'id', 'key', 'name', 'prefix']);
    expect(parseCustomerKey(key)).toEqual({ ok: true, environment: 'live', displayPrefix: rest.prefix });
    expect(rest).toMatchObject({ accountId: 'keyed', name: 'prod backend', environment: 'live' });
    expect(rest.prefix).toBe(key.slice(0, 12));
  });

  it('creates a test-environment key when asked', async () => {
    const response = await server.admin('POST', '/admin/accounts/keyed/keys', { name: 'ci', environment: 'test' });
    createdKeys.push(response.body.key);
    expect(response.body.key.startsWith('gk_test_')).toBe(true);
  });

  it('answers 400 naming environment for an unknown environment', async () => {
    const response = await server.admin('POST', '/admin/accounts/keyed/keys', { environment: 'prod' });
    expect(response.status).toBe(400);
    expect(response.body.error.field).toBe('environment');
  });

  it('answers 404 for a key on an account that does not exist', async () => {
    const response = await server.admin('POST', '/admin/accounts/ghost/keys', {});
    expect(response.status).toBe(404);
    expect(response.body.error.code).toBe('account_not_found');
  });

  it('never shows the key again: the account read has no key material', async () => {
    const account = await server.admin('GET', '/admin/accounts/keyed');
    for (const key of createdKeys) {
      expect(JSON.stringify(account.body)).not.toContain(key);
      expect(JSON.stringify(account.body)).not.toContain(hashCustomerKey(key));
    }
  });

  it('logs key creation with the display prefix only, and never the admin token', () => {
    const created = server.logs.lines.filter((line) => line.includes('"action":"key.create"'));
    expect(created.length).toBeGreaterThanOrEqual(2);
    expect(server.logs.leaksOf([...createdKeys, TEST_ADMIN_TOKEN])).toEqual([]);
  });
});

const ACCOUNT_VIEW_FIELDS = [
  'billing',
  'createdAt',
  'exposedKeyAction',
  'id',
  'keyRestrictions',
  'limits',
  'maxActiveKeys',
  'name',
  'tokenBudgets',
];
/** What the account view's billing says about usage (issue 16) for an account that has used nothing. */
const NO_USAGE = {
  monthlySpendCap: null,
  spentThisMonth: 0,
  creditShortfall: 0,
  // Issue 35: the amounts as money, in the default currency (micro-dollars).
  currency: { code: 'USD', exponent: 6 },
  monthlySpendCapFormatted: null,
  spentThisMonthFormatted: '$0.00',
  creditShortfallFormatted: '$0.00',
};
const POSTPAID = { creditBalance: null, creditBalanceFormatted: null };

describe('account view, billing and limits', () => {
  it('answers GET with the account view: billing, limit overrides (null = not overridden) and nothing else', async () => {
    await server.admin('POST', '/admin/accounts', { id: 'viewed', name: 'Viewed Inc' });
    const response = await server.admin('GET', '/admin/accounts/viewed');
    expect(response.status).toBe(200);
    expect(Object.keys(response.body).sort()).toEqual(ACCOUNT_VIEW_FIELDS);
    expect(response.body).toEqual({
      id: 'viewed',
      name: 'Viewed Inc',
      billing: { status: 'active', ...POSTPAID, ...NO_USAGE },
      limits: { key: null, account: null },
      maxActiveKeys: null,
      tokenBudgets: { key: null, account: null },
      keyRestrictions: null,
      exposedKeyAction: 'revoke',
      createdAt: expect.any(String),
    });
  });

  it('creates an account with billing and limits given up front, windows shown as text', async () => {
    const created = await server.admin('POST', '/admin/accounts', {
      id: 'upfront',
      name: 'Up Front',
      billing: { creditBalance: 2500 },
      limits: { key: [{ limit: 100, window: 60 }], account: null },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      billing: { status: 'active', creditBalance: 2500 },
      limits: { key: [{ limit: 100, window: '1m' }], account: null },
    });
    expect((await server.admin('GET', '/admin/accounts/upfront')).body).toEqual(created.body);
  });

  it('suspends and reactivates an account', async () => {
    await server.admin('POST', '/admin/accounts', { id: 'billed', name: 'Billed' });
    const suspended = await server.admin('PATCH', '/admin/accounts/billed', { billing: { status: 'suspended' } });
    expect(suspended.status).toBe(200);
    expect(suspended.body.billing).toEqual({ status: 'suspended', ...POSTPAID, ...NO_USAGE });
    expect((await server.admin('GET', '/admin/accounts/billed')).body.billing.status).toBe('suspended');
    const active = await server.admin('PATCH', '/admin/accounts/billed', { billing: { status: 'active' } });
    expect(active.body.billing.status).toBe('active');
  });

  it('makes an account prepaid with a balance, changes it, then makes it post-paid again with null', async () => {
    await server.admin('POST', '/admin/accounts', { id: 'prepaid', name: 'Prepaid' });
    const prepaid = await server.admin('PATCH', '/admin/accounts/prepaid', { billing: { creditBalance: 5000 } });
    expect(prepaid.status).toBe(200);
    expect(prepaid.body.billing).toEqual({ status: 'active', creditBalance: 5000, creditBalanceFormatted: '$0.005', ...NO_USAGE });
    const both = await server.admin('PATCH', '/admin/accounts/prepaid', { billing: { status: 'suspended', creditBalance: 0 } });
    expect(both.body.billing).toEqual({ status: 'suspended', creditBalance: 0, creditBalanceFormatted: '$0.00', ...NO_USAGE });
    const postpaid = await server.admin('PATCH', '/admin/accounts/prepaid', { billing: { creditBalance: null } });
    expect(postpaid.body.billing).toEqual({ status: 'suspended', ...POSTPAID, ...NO_USAGE });
    expect((await server.admin('GET', '/admin/accounts/prepaid')).body.billing).toEqual({ status: 'suspended', ...POSTPAID, ...NO_USAGE });
  });

  it('renames an account and leaves everything else as it was', async () => {
    await server.admin('POST', '/admin/accounts', { id: 'renamed', name: 'Old', billing: { creditBalance: 7 } });
    const before = (await server.admin('GET', '/admin/accounts/renamed')).body;
    const renamed = await server.admin('PATCH', '/admin/accounts/renamed', { name: '  New Name ' });
    expect(renamed.status).toBe(200);
    expect(renamed.body).toEqual({ ...before, name: 'New Name' });
  });

  it('sets limit overrides per scope, and clears one scope with null without touching the other', async () => {
    await server.admin('POST', '/admin/accounts', { id: 'limited', name: 'Limited' });
    const set = await server.admin('PATCH', '/admin/accounts/limited', {
      limits: {
        key: [
          { limit: 100, window: '1m' },
          { limit: 10000, window: 86400 },
        ],
        account: [{ limit: 1000, window: '60m' }],
      },
    });
    expect(set.status).toBe(200);
    expect(set.body.limits).toEqual({
      key: [
        { limit: 100, window: '1m' },
        { limit: 10000, window: '1d' },
      ],
      account: [{ limit: 1000, window: '1h' }],
    });
    expect((await server.admin('GET', '/admin/accounts/limited')).body.limits).toEqual(set.body.limits);

    const cleared = await server.admin('PATCH', '/admin/accounts/limited', { limits: { key: null } });
    expect(cleared.status).toBe(200);
    expect(cleared.body.limits).toEqual({ key: null, account: [{ limit: 1000, window: '1h' }] });

    const both = await server.admin('PATCH', '/admin/accounts/limited', { limits: { account: null } });
    expect(both.body.limits).toEqual({ key: null, account: null });
    expect((await server.admin('GET', '/admin/accounts/limited')).body.limits).toEqual({ key: null, account: null });
  });

  it('keeps a window that is not a whole minute in seconds (90s)', async () => {
    await server.admin('POST', '/admin/accounts', { id: 'seconds', name: 'Seconds' });
    const response = await server.admin('PATCH', '/admin/accounts/seconds', { limits: { key: [{ limit: 5, window: 90 }] } });
    expect(response.body.limits.key).toEqual([{ limit: 5, window: '90s' }]);
  });

  const elevenLimits = Array.from({ length: 11 }, (_, index) => ({ limit: 10, window: index + 1 }));
  it.each([
    ['a bad window', { limits: { key: [{ limit: 1, window: '1x' }] } }, 'limits.key.0.window'],
    ['a window of 0', { limits: { key: [{ limit: 1, window: 0 }] } }, 'limits.key.0.window'],
    ['a window over 31 days', { limits: { key: [{ limit: 1, window: '32d' }] } }, 'limits.key.0.window'],
    ['a missing window', { limits: { key: [{ limit: 1 }] } }, 'limits.key.0.window'],
    ['a limit of 0', { limits: { key: [{ limit: 0, window: '1m' }] } }, 'limits.key.0.limit'],
    ['a fractional limit', { limits: { account: [{ limit: 1.5, window: '1m' }] } }, 'limits.account.0.limit'],
    ['a limit over 1e9', { limits: { account: [{ limit: 1_000_000_001, window: '1m' }] } }, 'limits.account.0.limit'],
    ['a limit given as text', { limits: { key: [{ limit: '100', window: '1m' }] } }, 'limits.key.0.limit'],
    [
      'a window given twice (1m and 60)',
      {
        limits: {
          account: [
            { limit: 10, window: '1m' },
            { limit: 20, window: 60 },
          ],
        },
      },
      'limits.account.1.window',
    ],
    ['more than 10 limits in a scope', { limits: { key: elevenLimits } }, 'limits.key'],
    ['limits that are not a list', { limits: { key: '100/1m' } }, 'limits.key'],
    ['an unknown field in a limit', { limits: { key: [{ limit: 1, window: '1m', burst: 5 }] } }, 'limits.key.0.burst'],
    ['an unknown limit scope', { limits: { team: [] } }, 'limits.team'],
    ['an empty limits object', { limits: {} }, 'limits'],
    ['an unknown billing status', { billing: { status: 'closed' } }, 'billing.status'],
    ['a fractional balance', { billing: { creditBalance: 10.5 } }, 'billing.creditBalance'],
    ['a balance beyond safe integers', { billing: { creditBalance: 2 ** 60 } }, 'billing.creditBalance'],
    ['an unknown billing field', { billing: { credit: 5 } }, 'billing.credit'],
    ['an empty billing object', { billing: {} }, 'billing'],
    ['an unknown top-level field', { plan: 'gold' }, 'plan'],
    ['an empty name', { name: ' ' }, 'name'],
    [
      'a default restriction that is no CIDR range',
      { keyRestrictions: { sourceAddresses: ['10.0.0.0/33'] } },
      'keyRestrictions.sourceAddresses',
    ],
    ['an empty list of default endpoints', { keyRestrictions: { endpoints: [] } }, 'keyRestrictions.endpoints'],
  ])('answers 400 naming the field for %s', async (_what, body, field) => {
    await server.admin('POST', '/admin/accounts', { id: 'strict', name: 'Strict' });
    const before = (await server.admin('GET', '/admin/accounts/strict')).body;
    const response = await server.admin('PATCH', '/admin/accounts/strict', body);
    expect(response.status).toBe(400);
    expect(response.body.error).toMatchObject({ code: 'invalid_field', field });
    expect(response.body.error.message).toContain(field);
    // Nothing was applied.
    expect((await server.admin('GET', '/admin/accounts/strict')).body).toEqual(before);
  });

  it('answers 400 for an empty body, saying which fields it takes', async () => {
    await server.admin('POST', '/admin/accounts', { id: 'empty-patch', name: 'Empty' });
    const response = await server.admin('PATCH', '/admin/accounts/empty-patch', {});
    expect(response.status).toBe(400);
    expect(response.body.error.code).toBe('invalid_field');
    expect(response.body.error.message).toMatch(/at least one of: name, billing, limits/);
  });

  it('validates billing and limits on create too', async () => {
    const response = await server.admin('POST', '/admin/accounts', {
      id: 'bad-create',
      name: 'Bad',
      limits: { key: [{ limit: 5, window: '5y' }] },
    });
    expect(response.status).toBe(400);
    expect(response.body.error.field).toBe('limits.key.0.window');
    expect((await server.admin('GET', '/admin/accounts/bad-create')).status).toBe(404);
  });

  it('answers 404 account_not_found when patching an account that does not exist', async () => {
    const response = await server.admin('PATCH', '/admin/accounts/nobody', { name: 'X' });
    expect(response.status).toBe(404);
    expect(response.body.error.code).toBe('account_not_found');
    expect((await server.admin('PATCH', '/admin/accounts/not%20an%20id', { name: 'X' })).status).toBe(404);
  });

  it('logs each change with the account id and what changed, never the admin token', () => {
    const updates = server.logs.events('admin').filter((line) => line.action === 'account.update');
    expect(updates).toContainEqual(expect.objectContaining({ accountId: 'limited', detail: 'changes=limits.key,limits.account' }));
    expect(updates).toContainEqual(expect.objectContaining({ accountId: 'billed', detail: 'changes=billing.status' }));
    expect(server.logs.leaksOf([TEST_ADMIN_TOKEN])).toEqual([]);
  });
});

describe('prepaid credit', () => {
  beforeAll(async () => {
    await server.admin('POST', '/admin/accounts', { id: 'wallet', name: 'Wallet', billing: { creditBalance: 1000 } });
    await server.admin('POST', '/admin/accounts', { id: 'invoiced', name: 'Invoiced' });
  });

  it('adds credit and debits it with a negative amount, answering the new balance', async () => {
    const added = await server.admin('POST', '/admin/accounts/wallet/credit', { amount: 500 });
    expect(added.status).toBe(200);
    expect(added.body).toEqual({
      accountId: 'wallet',
      creditBalance: 1500,
      currency: { code: 'USD', exponent: 6 },
      creditBalanceFormatted: '$0.0015',
    });
    const debited = await server.admin('POST', '/admin/accounts/wallet/credit', { amount: -200 });
    expect(debited.body).toMatchObject({ accountId: 'wallet', creditBalance: 1300, creditBalanceFormatted: '$0.0013' });
    expect((await server.admin('GET', '/admin/accounts/wallet')).body.billing).toEqual({
      status: 'active',
      creditBalance: 1300,
      creditBalanceFormatted: '$0.0013',
      ...NO_USAGE,
    });
  });

  it('applies concurrent adjustments atomically: none is lost', async () => {
    const before = (await server.admin('GET', '/admin/accounts/wallet')).body.billing.creditBalance as number;
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, index) => server.admin('POST', '/admin/accounts/wallet/credit', { amount: index % 2 ? 7 : 3 })),
    );
    expect(answers.every((answer) => answer.status === 200)).toBe(true);
    const balances = answers.map((answer) => answer.body.creditBalance);
    expect(new Set(balances).size).toBe(20);
    expect((await server.admin('GET', '/admin/accounts/wallet')).body.billing.creditBalance).toBe(before + 10 * 7 + 10 * 3);
  });

  it('answers 409 not_prepaid for a post-paid account, saying to set billing.creditBalance first', async () => {
    const response = await server.admin('POST', '/admin/accounts/invoiced/credit', { amount: 100 });
    expect(response.status).toBe(409);
    expect(response.body.error.code).toBe('not_prepaid');
    expect(response.body.error.message).toContain('billing.creditBalance');
    expect((await server.admin('GET', '/admin/accounts/invoiced')).body.billing.creditBalance).toBeNull();
  });

  it('answers 404 account_not_found for an unknown account', async () => {
    const response = await server.admin('POST', '/admin/accounts/ghost-wallet/credit', { amount: 100 });
    expect(response.status).toBe(404);
    expect(response.body.error.code).toBe('account_not_found');
  });

  it.each([
    [{ amount: 0 }, 'amount'],
    [{ amount: 1.25 }, 'amount'],
    [{ amount: '100' }, 'amount'],
    [{ amount: 2 ** 60 }, 'amount'],
    [{}, 'amount'],
    [{ amount: 5, currency: 'usd' }, 'currency'],
  ])('answers 400 naming the field for %j', async (body, field) => {
    const before = (await server.admin('GET', '/admin/accounts/wallet')).body.billing.creditBalance;
    const response = await server.admin('POST', '/admin/accounts/wallet/credit', body);
    expect(response.status).toBe(400);
    expect(response.body.error).toMatchObject({ code: 'invalid_field', field });
    expect((await server.admin('GET', '/admin/accounts/wallet')).body.billing.creditBalance).toBe(before);
  });

  it('logs each adjustment with the account id and amount', () => {
    const credits = server.logs.events('admin').filter((line) => line.action === 'account.credit');
    expect(credits).toContainEqual(expect.objectContaining({ accountId: 'wallet', detail: 'amount=-200' }));
    expect(credits.every((line) => line.accountId === 'wallet')).toBe(true);
  });
});

describe('key view and key limits', () => {
  let key: string;
  let keyId: string;
  let prefix: string;
  beforeAll(async () => {
    await server.admin('POST', '/admin/accounts', { id: 'key-owner', name: 'Key Owner' });
    const created = await server.admin('POST', '/admin/accounts/key-owner/keys', { name: 'batch jobs' });
    ({ key, id: keyId, prefix } = created.body);
    createdKeys.push(key);
  });

  /** Neither the key nor its SHA-256 (what the store keeps) may appear in any answer but creation's. */
  const expectNoKeyMaterial = (body: unknown) => {
    const text = JSON.stringify(body);
    expect(text).not.toContain(key);
    expect(text).not.toContain(hashCustomerKey(key));
    expect(text).not.toContain(createHash('sha256').update(key).digest('base64'));
  };

  it('answers GET with the key view and no key material', async () => {
    const response = await server.admin('GET', `/admin/keys/${keyId}`);
    expect(response.status).toBe(200);
    expect(Object.keys(response.body).sort()).toEqual(ADMIN_KEY_VIEW_FIELDS);
    expect(response.body).toEqual({
      id: keyId,
      accountId: 'key-owner',
      prefix,
      name: 'batch jobs',
      environment: 'live',
      status: 'active',
      createdAt: expect.any(String),
      expiresAt: null,
      lastUsedAt: null,
      revokedAt: null,
      revokeAt: null,
      replaces: null,
      replacedBy: null,
      limits: null,
      createdBy: { kind: 'operator' },
      tokenBudgets: null,
      monthlySpendCap: null,
      monthlySpendCapFormatted: null,
      restrictions: null,
    });
    expectNoKeyMaterial(response.body);
  });

  it('sets, changes and clears the key limits; renames the key', async () => {
    const set = await server.admin('PATCH', `/admin/keys/${keyId}`, {
      limits: [
        { limit: 60, window: '1m' },
        { limit: 1000, window: '1d' },
      ],
    });
    expect(set.status).toBe(200);
    expect(set.body.limits).toEqual([
      { limit: 60, window: '1m' },
      { limit: 1000, window: '1d' },
    ]);
    expectNoKeyMaterial(set.body);
    expect((await server.admin('GET', `/admin/keys/${keyId}`)).body.limits).toEqual(set.body.limits);

    const renamed = await server.admin('PATCH', `/admin/keys/${keyId}`, { name: 'nightly batch' });
    expect(renamed.body).toMatchObject({ name: 'nightly batch', limits: set.body.limits });

    const cleared = await server.admin('PATCH', `/admin/keys/${keyId}`, { limits: null });
    expect(cleared.status).toBe(200);
    expect(cleared.body.limits).toBeNull();
    expect(Object.keys(cleared.body).sort()).toEqual(ADMIN_KEY_VIEW_FIELDS);
    expectNoKeyMaterial(cleared.body);
  });

  it.each([
    [{}, undefined],
    [{ limits: [{ limit: 5, window: '1x' }] }, 'limits.0.window'],
    [{ limits: [{ limit: -1, window: '1m' }] }, 'limits.0.limit'],
    [
      {
        limits: [
          { limit: 5, window: '1h' },
          { limit: 6, window: 3600 },
        ],
      },
      'limits.1.window',
    ],
    [{ limits: { key: [] } }, 'limits'],
    [{ environment: 'test' }, 'environment'],
    [{ status: 'revoked' }, 'status'],
  ])('answers 400 for %j, naming the field', async (body, field) => {
    const response = await server.admin('PATCH', `/admin/keys/${keyId}`, body);
    expect(response.status).toBe(400);
    expect(response.body.error.code).toBe('invalid_field');
    if (field) expect(response.body.error.field).toBe(field);
    else expect(response.body.error.message).toMatch(/at least one of: name, limits/);
  });

  it('answers 404 key_not_found for an unknown key id, on GET and PATCH', async () => {
    for (const [method, body] of [
      ['GET', undefined],
      ['PATCH', { name: 'x' }],
    ] as const) {
      const response = await server.admin(method, '/admin/keys/key_doesNotExist000', body);
      expect(response.status).toBe(404);
      expect(response.body.error.code).toBe('key_not_found');
    }
  });

  it('never looks a key up by the key itself, and never echoes one given in the path', async () => {
    const response = await server.admin('GET', `/admin/keys/${key}`);
    expect(response.status).toBe(404);
    expect(response.body.error.code).toBe('key_not_found');
    expectNoKeyMaterial(response.body);
  });

  it('logs key changes with the key id and display prefix only', () => {
    const updates = server.logs.events('admin').filter((line) => line.action === 'key.update');
    expect(updates).toContainEqual(expect.objectContaining({ accountId: 'key-owner', keyId, keyPrefix: prefix, detail: 'changes=limits' }));
    expect(server.logs.leaksOf([...createdKeys, TEST_ADMIN_TOKEN])).toEqual([]);
  });
});
