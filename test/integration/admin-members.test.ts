import type { ApiMember, ApiMemberList } from '../../src/cli/api-types';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { startAppUnderTest, type AppUnderTest } from '../support/running-app';

/**
 * The operator's side of issue 15 over real HTTP and a real Redis: account
 * members (`/admin/accounts/:id/members`), the active-key cap, and who made
 * each change in the audit trail.
 */
let redis: TestRedis;
let server: AppUnderTest;
const ISSUER = 'https://login.example.com';

beforeAll(async () => {
  redis = await startTestRedis();
  server = await startAppUnderTest({ redisUrl: redis.url, env: { DEFAULT_MAX_ACTIVE_KEYS: '3' } });
});
afterAll(async () => {
  await server?.close();
  await redis?.stop();
});

type MemberAnswer = ApiMember & ApiMemberList & { error: { code: string; message: string; field?: string } };
const members = async (method: string, path: string, body?: object) => {
  const response = await server.admin(method, path, body);
  return { status: response.status, body: response.body as unknown as MemberAnswer };
};
let serial = 0;
const newAccount = async (extra: object = {}) => {
  const id = `acct-${(serial += 1)}`;
  expect((await server.admin('POST', '/admin/accounts', { id, name: `Account ${id}`, ...extra })).status).toBe(201);
  return id;
};

describe('members', () => {
  it('adds an identity and an invitation, lists them, changes a role and removes one', async () => {
    const id = await newAccount();
    expect(await members('GET', `/admin/accounts/${id}/members`)).toEqual({ status: 200, body: { members: [] } });
    const owner = await members('POST', `/admin/accounts/${id}/members`, { role: 'owner', issuer: ISSUER, subject: 'user-1' });
    expect(owner.status).toBe(201);
    expect(owner.body).toEqual({
      id: expect.stringMatching(/^mem_[A-Za-z0-9]{16}$/),
      accountId: id,
      role: 'owner',
      status: 'active',
      issuer: ISSUER,
      subject: 'user-1',
      email: null,
      addedAt: expect.any(String),
      addedBy: { kind: 'operator' },
      joinedAt: null,
    });
    const invited = await members('POST', `/admin/accounts/${id}/members`, { role: 'viewer', email: '  Dev@Example.COM ' });
    expect(invited.body).toMatchObject({ status: 'invited', email: 'dev@example.com', issuer: null, subject: null, role: 'viewer' });
    expect((await members('GET', `/admin/accounts/${id}/members`)).body.members.map((m) => m.id)).toEqual([owner.body.id, invited.body.id]);

    const promoted = await members('PATCH', `/admin/accounts/${id}/members/${invited.body.id}`, { role: 'developer' });
    expect(promoted).toMatchObject({ status: 200, body: { id: invited.body.id, role: 'developer' } });
    const removed = await members('DELETE', `/admin/accounts/${id}/members/${invited.body.id}`);
    expect(removed).toMatchObject({ status: 200, body: { id: invited.body.id } });
    expect((await members('GET', `/admin/accounts/${id}/members`)).body.members).toHaveLength(1);
  });

  it('answers 409 member_exists for the same person twice (an email in any case), naming the member', async () => {
    const id = await newAccount();
    const first = await members('POST', `/admin/accounts/${id}/members`, { role: 'viewer', email: 'ann@example.com' });
    const again = await members('POST', `/admin/accounts/${id}/members`, { role: 'owner', email: 'ANN@example.com' });
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('member_exists');
    expect(again.body.error.message).toContain(first.body.id);
  });

  it('keeps the last owner: 409 last_owner for demoting or removing them, until another owner exists', async () => {
    const id = await newAccount();
    const owner = await members('POST', `/admin/accounts/${id}/members`, { role: 'owner', issuer: ISSUER, subject: 'only-owner' });
    for (const [method, body] of [
      ['PATCH', { role: 'developer' }],
      ['DELETE', undefined],
    ] as const) {
      const refused = await members(method, `/admin/accounts/${id}/members/${owner.body.id}`, body);
      expect(refused.status).toBe(409);
      expect(refused.body.error.code).toBe('last_owner');
    }
    await members('POST', `/admin/accounts/${id}/members`, { role: 'owner', issuer: ISSUER, subject: 'second-owner' });
    expect((await members('DELETE', `/admin/accounts/${id}/members/${owner.body.id}`)).status).toBe(200);
  });

  it.each([
    [{ role: 'owner' }, undefined, 'either email'],
    [{ role: 'boss', email: 'a@example.com' }, 'role', 'owner, developer, viewer'],
    [{ role: 'owner', email: 'not-an-email' }, 'email', 'email address'],
    [{ role: 'owner', issuer: 'http://login.example.com', subject: 's' }, 'issuer', 'https'],
    [{ role: 'owner', issuer: ISSUER, subject: '' }, 'subject', '1-255'],
    [{ role: 'owner', issuer: ISSUER }, 'subject', ''],
    [{ role: 'owner', email: 'a@example.com', issuer: ISSUER, subject: 's' }, 'issuer', 'unknown field'],
  ])('answers 400 naming the field for %j', async (body, field, words) => {
    const id = await newAccount();
    const response = await members('POST', `/admin/accounts/${id}/members`, body);
    expect(response.status).toBe(400);
    expect(response.body.error.code).toBe('invalid_field');
    expect(response.body.error.field).toBe(field);
    expect(response.body.error.message).toContain(words);
  });

  it('answers 404 for an unknown account, an unknown member, and a member id of another account', async () => {
    const [id, other] = [await newAccount(), await newAccount()];
    expect((await members('GET', '/admin/accounts/nobody/members')).body.error.code).toBe('account_not_found');
    expect((await members('POST', '/admin/accounts/nobody/members', { role: 'owner', email: 'x@example.com' })).body.error.code).toBe(
      'account_not_found',
    );
    const elsewhere = await members('POST', `/admin/accounts/${other}/members`, { role: 'viewer', email: 'y@example.com' });
    for (const memberId of ['mem_doesNotExist', 'not-a-member-id', elsewhere.body.id]) {
      const response = await members('PATCH', `/admin/accounts/${id}/members/${memberId}`, { role: 'owner' });
      expect(response.status).toBe(404);
      expect(response.body.error.code).toBe('member_not_found');
      expect((await members('DELETE', `/admin/accounts/${id}/members/${memberId}`)).body.error.code).toBe('member_not_found');
    }
  });
});

describe('the active-key cap', () => {
  it("applies the service default (DEFAULT_MAX_ACTIVE_KEYS) and the account's own cap, with a clear 409", async () => {
    const id = await newAccount();
    for (let i = 0; i < 3; i += 1) expect((await server.admin('POST', `/admin/accounts/${id}/keys`, {})).status).toBe(201);
    const refused = await server.admin('POST', `/admin/accounts/${id}/keys`, {});
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('active_key_cap_reached');
    expect(refused.body.error.message).toContain('cap is 3');
    expect(refused.body.error.message).toContain('maxActiveKeys');
    const raised = await server.admin('PATCH', `/admin/accounts/${id}`, { maxActiveKeys: 4 });
    expect(raised.body.maxActiveKeys).toBe(4);
    expect((await server.admin('POST', `/admin/accounts/${id}/keys`, {})).status).toBe(201);
    expect((await server.admin('PATCH', `/admin/accounts/${id}`, { maxActiveKeys: null })).body.maxActiveKeys).toBeNull();
    expect((await server.admin('POST', `/admin/accounts/${id}/keys`, {})).status).toBe(409);
  });

  it('rotates at once at the cap, with a grace period once at the cap, and refuses a second grace rotation above it', async () => {
    const id = await newAccount({ maxActiveKeys: 1 });
    const only = await server.admin('POST', `/admin/accounts/${id}/keys`, {});
    const now = await server.admin('POST', `/admin/keys/${only.body.id}/rotate`, {});
    expect(now.status).toBe(201);
    const graceful = await server.admin('POST', `/admin/keys/${now.body.id}/rotate`, { graceSeconds: 3600 });
    expect(graceful.status).toBe(201);
    const refused = await server.admin('POST', `/admin/keys/${graceful.body.id}/rotate`, { graceSeconds: 3600 });
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('active_key_cap_reached');
    expect(refused.body.error.message).toContain('graceSeconds 0');
    expect((await server.admin('POST', `/admin/keys/${graceful.body.id}/rotate`, {})).status).toBe(201);
  });

  it.each([[-1], [10_001], [1.5], ['5']])('answers 400 naming maxActiveKeys for %j', async (value) => {
    const id = await newAccount();
    const response = await server.admin('PATCH', `/admin/accounts/${id}`, { maxActiveKeys: value });
    expect(response.status).toBe(400);
    expect(response.body.error.field).toBe('maxActiveKeys');
  });
});

describe('audit actors', () => {
  it("records the operator as the actor of every admin change, and reads one account's trail alone", async () => {
    const [id, other] = [await newAccount(), await newAccount()];
    const key = await server.admin('POST', `/admin/accounts/${id}/keys`, {});
    await members('POST', `/admin/accounts/${id}/members`, { role: 'owner', email: 'o@example.com' });
    await server.admin('POST', `/admin/accounts/${other}/keys`, {});
    const trail = (await server.admin('GET', `/admin/accounts/${id}/audit`)).body.entries;
    expect(trail.map((entry) => entry.action)).toEqual(['member.add', 'key.create', 'account.create']);
    expect(trail.every((entry) => entry.accountId === id && entry.actor.kind === 'operator')).toBe(true);
    expect(trail[1]).toMatchObject({ keyId: key.body.id, keyPrefix: key.body.prefix });
    expect(trail[0]).toMatchObject({ memberId: expect.stringMatching(/^mem_/), detail: 'role=owner email=o@example.com' });
    const global = (await server.admin('GET', '/admin/audit?limit=1000')).body.entries;
    expect(global.filter((entry) => entry.accountId === other).map((entry) => entry.action)).toEqual(['key.create', 'account.create']);
    expect((await server.admin('GET', '/admin/accounts/nobody/audit')).body.error.code).toBe('account_not_found');
  });
});
