import { parseCustomerKey, hashCustomerKey } from '../../src/keys/customer-key';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { startAppUnderTest, TEST_ADMIN_TOKEN, type AppUnderTest } from '../support/running-app';

/** The minimal admin API over real HTTP, backed by a real Redis. */
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

  it('refuses a wrong token, including one that shares a prefix with the right one', async () => {
    for (const token of ['nope', TEST_ADMIN_TOKEN.slice(0, -1), `${TEST_ADMIN_TOKEN}x`]) {
      expect((await server.admin('GET', '/admin/accounts/a', undefined, token)).status).toBe(401);
    }
  });

  it('refuses every call when ADMIN_TOKEN is not configured, saying why', async () => {
    const tokenless = await startAppUnderTest({ env: { ADMIN_TOKEN: '' } });
    try {
      const response = await tokenless.admin('POST', '/admin/accounts', { id: 'a', name: 'A' }, 'anything-at-all-123');
      expect(response.status).toBe(503);
      expect(response.body.error).toMatchObject({ code: 'admin_disabled' });
      expect(response.body.error.message).toContain('ADMIN_TOKEN');
      expect(tokenless.logs.lines.some((line) => line.includes('ADMIN_TOKEN is not set'))).toBe(true);
    } finally {
      await tokenless.close();
    }
  });
});

describe('accounts', () => {
  it('creates an account (201) and reads it back', async () => {
    const created = await server.admin('POST', '/admin/accounts', { id: 'acme', name: 'Acme Corp' });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ id: 'acme', name: 'Acme Corp', status: 'active' });
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
