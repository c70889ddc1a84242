import { createKey } from '../../src/keys/key-actions';
import { addMember } from '../../src/accounts/member-actions';
import { CUSTOMER_API_PREFIX } from '../../src/customer/customer-api';
import type { UsageView } from '../../src/customer/customer-views';
import { NO_TOKEN_BUDGETS } from '../../src/accounts/limits/token-budgets';
import type { UsageRecord } from '../../src/metering/usage-record';
import { OPERATOR, type CustomerIdentity, type MemberRole } from '../../src/accounts/customer-identity';
import { actionsOf, CUSTOMER_ACTIONS, mayPerform, type CustomerAction } from '../../src/customer/customer-permissions';
import { hashCustomerKey } from '../../src/keys/customer-key';
import { RedisStore } from '../../src/store/redis/redis-store';
import { startCustomerApiUnderTest, type CustomerApiUnderTest } from '../support/customer-api-app';
import { COMMON_KEY_VIEW_FIELDS } from '../support/key-view-fields';
import { LogCapture } from '../support/log-capture';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { systemClock } from '../../src/platform/clock';
import { dayStartOf, HOUR_MS, hourStartOf } from '../../src/keys/request-counts';

/**
 * The customer API over real HTTP, on a real Redis: every call is authorised
 * on the server by the caller's membership and role (the permission
 * matrix), a member of one account learns nothing about another, and the
 * changes carry who made them.
 */
let redis: TestRedis;
let store: RedisStore;
let api: CustomerApiUnderTest;
const actionLogs = new LogCapture();
const deps = () => ({ store, clock: systemClock, logger: actionLogs.logger });

beforeAll(async () => {
  redis = await startTestRedis();
  store = await RedisStore.connect({ url: redis.url, commandTimeoutMs: 1000 });
  api = await startCustomerApiUnderTest({ store });
});
afterAll(async () => {
  await api?.close();
  await store?.close();
  await redis?.stop();
});

const ISSUER = 'https://login.example.com';
let serial = 0;
const uniqueId = (base: string) => `${base}-${process.pid}-${(serial += 1)}`;
const person = (name: string, email?: string): CustomerIdentity => ({
  issuer: ISSUER,
  subject: uniqueId(name),
  ...(email !== undefined ? { verifiedEmail: email } : {}),
});
const path = (accountId: string, rest = '') => `${CUSTOMER_API_PREFIX}/accounts/${accountId}${rest}`;

/** An account with an owner, a developer and a viewer (added by the operator), and one key. */
async function team(extra: { maxActiveKeys?: number; creditBalance?: number } = {}) {
  const accountId = uniqueId('team');
  await store.createAccount({ id: accountId, name: `Team ${accountId}`, status: 'active', createdAt: new Date().toISOString(), ...extra });
  const people: Record<MemberRole, CustomerIdentity> = { owner: person('owner'), developer: person('dev'), viewer: person('viewer') };
  for (const role of ['owner', 'developer', 'viewer'] as const) {
    const { issuer, subject } = people[role];
    await addMember(deps(), OPERATOR, { accountId, role, principal: { kind: 'identity', issuer, subject } });
  }
  const key = await newKey(accountId);
  return { accountId, people, keyId: key.id };
}

async function newKey(accountId: string) {
  const created = await createKey(deps(), OPERATOR, { accountId, name: 'seeded', environment: 'live' });
  if (created.kind !== 'created') throw new Error(`could not seed a key: ${created.kind}`);
  return created.record;
}

async function newMember(accountId: string, role: MemberRole = 'viewer') {
  const added = await addMember(deps(), OPERATOR, {
    accountId,
    role,
    principal: { kind: 'identity', issuer: ISSUER, subject: uniqueId('m') },
  });
  if (added.kind !== 'added') throw new Error(`could not seed a member: ${added.kind}`);
  return added.member;
}

/** A public address (no name to resolve): the customer API's default target policy accepts it. */
const PUBLIC_HOOK_URL = 'https://93.184.216.34/hook';
/** A webhook endpoint made by the operator's store, for the calls that need one. */
async function newEndpoint(accountId: string): Promise<string> {
  const id = `whe_${uniqueId('e').replace(/[^A-Za-z0-9]/g, '')}`;
  const config = {
    id,
    accountId,
    url: PUBLIC_HOOK_URL,
    events: ['key.created'],
    secret: 'whsec_c2VjcmV0',
    createdAt: new Date().toISOString(),
  };
  expect(await store.webhooks.createEndpoint(config, 100)).toBe('created');
  return id;
}
const sharedEndpoints = new Map<string, Promise<string>>();
/** One endpoint per account for the calls that keep it (the account may hold only so many). */
const sharedEndpoint = (accountId: string): Promise<string> => {
  if (!sharedEndpoints.has(accountId)) sharedEndpoints.set(accountId, newEndpoint(accountId));
  return sharedEndpoints.get(accountId)!;
};

/** One customer API call per route: what it does (its row in the matrix), and a fresh target for each run. */
interface Call {
  action: CustomerAction;
  method: string;
  /** The path and body for one run on this account; targets (keys, members) are made fresh, so every run can succeed. */
  prepare(accountId: string): Promise<{ path: string; body?: object }>;
  /** The status an allowed caller gets. */
  ok: number;
}

const CALLS: Call[] = [
  { action: 'account.read', method: 'GET', ok: 200, prepare: async (a) => ({ path: path(a) }) },
  { action: 'keys.read', method: 'GET', ok: 200, prepare: async (a) => ({ path: path(a, '/keys') }) },
  { action: 'keys.read', method: 'GET', ok: 200, prepare: async (a) => ({ path: path(a, `/keys/${(await newKey(a)).id}`) }) },
  {
    action: 'keys.create',
    method: 'POST',
    ok: 201,
    prepare: async (a) => ({ path: path(a, '/keys'), body: { name: 'made by a member' } }),
  },
  {
    action: 'keys.update',
    method: 'PATCH',
    ok: 200,
    prepare: async (a) => ({ path: path(a, `/keys/${(await newKey(a)).id}`), body: { name: 'renamed' } }),
  },
  {
    action: 'keys.regenerate',
    method: 'POST',
    ok: 201,
    prepare: async (a) => ({ path: path(a, `/keys/${(await newKey(a)).id}/regenerate`), body: {} }),
  },
  { action: 'keys.revoke', method: 'POST', ok: 200, prepare: async (a) => ({ path: path(a, `/keys/${(await newKey(a)).id}/revoke`) }) },
  { action: 'members.read', method: 'GET', ok: 200, prepare: async (a) => ({ path: path(a, '/members') }) },
  {
    action: 'members.manage',
    method: 'POST',
    ok: 201,
    prepare: async (a) => ({ path: path(a, '/members'), body: { email: `${uniqueId('new')}@example.com`, role: 'viewer' } }),
  },
  {
    action: 'members.manage',
    method: 'PATCH',
    ok: 200,
    prepare: async (a) => ({ path: path(a, `/members/${(await newMember(a)).id}`), body: { role: 'developer' } }),
  },
  { action: 'members.manage', method: 'DELETE', ok: 200, prepare: async (a) => ({ path: path(a, `/members/${(await newMember(a)).id}`) }) },
  { action: 'audit.read', method: 'GET', ok: 200, prepare: async (a) => ({ path: path(a, '/audit') }) },
  { action: 'usage.read', method: 'GET', ok: 200, prepare: async (a) => ({ path: path(a, '/usage?window=30d') }) },
  { action: 'webhooks.manage', method: 'GET', ok: 200, prepare: async (a) => ({ path: path(a, '/webhooks') }) },
  { action: 'webhooks.manage', method: 'GET', ok: 200, prepare: async (a) => ({ path: path(a, '/webhooks/settings') }) },
  {
    action: 'webhooks.manage',
    method: 'PUT',
    ok: 200,
    prepare: async (a) => ({ path: path(a, '/webhooks/settings'), body: { creditLowThreshold: 500 } }),
  },
  {
    action: 'webhooks.manage',
    method: 'POST',
    ok: 201,
    prepare: async (a) => ({ path: path(a, '/webhooks'), body: { url: PUBLIC_HOOK_URL, events: ['key.created'] } }),
  },
  {
    action: 'webhooks.manage',
    method: 'PATCH',
    ok: 200,
    prepare: async (a) => ({ path: path(a, `/webhooks/${await sharedEndpoint(a)}`), body: { description: 'renamed' } }),
  },
  { action: 'webhooks.manage', method: 'DELETE', ok: 200, prepare: async (a) => ({ path: path(a, `/webhooks/${await newEndpoint(a)}`) }) },
  {
    action: 'webhooks.manage',
    method: 'POST',
    ok: 200,
    prepare: async (a) => ({ path: path(a, `/webhooks/${await sharedEndpoint(a)}/rotate-secret`) }),
  },
  {
    action: 'webhooks.manage',
    method: 'POST',
    ok: 202,
    prepare: async (a) => ({ path: path(a, `/webhooks/${await sharedEndpoint(a)}/test`) }),
  },
  {
    action: 'webhooks.manage',
    method: 'GET',
    ok: 200,
    prepare: async (a) => ({ path: path(a, `/webhooks/${await sharedEndpoint(a)}/deliveries`) }),
  },
];
const callName = (call: Call) => `${call.method} ${call.action}`;

/**
 * The issue's roles, written out here independently of src/customer/customer-permissions.ts:
 * owner manages keys and members (and reads the audit), developer manages keys, viewer sees keys and usage.
 */
const ALLOWED: Record<MemberRole, readonly CustomerAction[]> = {
  owner: CUSTOMER_ACTIONS,
  developer: ['account.read', 'usage.read', 'keys.read', 'keys.create', 'keys.update', 'keys.regenerate', 'keys.revoke'],
  viewer: ['account.read', 'usage.read', 'keys.read'],
};

describe('the role matrix: each role against each call', () => {
  let fixture: Awaited<ReturnType<typeof team>>;
  beforeAll(async () => {
    fixture = await team();
  });

  it('covers every customer API route, and every action of the matrix', () => {
    const exercised = new Set(CALLS.map((call) => `${call.method} ${call.action}`));
    // keys.read has two routes (list and one key); webhooks.manage nine routes of five methods.
    expect(exercised.size).toBe(CALLS.length - 1 - 4);
    expect(new Set(CALLS.map((call) => call.action))).toEqual(new Set(CUSTOMER_ACTIONS));
    // Every route the plugin registers, but /me (tested for 401 below, and for what it lists), is in CALLS.
    expect(api.routes.filter((route) => !route.startsWith('HEAD ')).sort()).toEqual(
      [
        'DELETE /api/accounts/:accountId/members/:memberId',
        'GET /api/accounts/:accountId',
        'GET /api/accounts/:accountId/audit',
        'GET /api/accounts/:accountId/keys',
        'GET /api/accounts/:accountId/keys/:keyId',
        'GET /api/accounts/:accountId/members',
        'GET /api/accounts/:accountId/usage',
        'GET /api/me',
        'PATCH /api/accounts/:accountId/keys/:keyId',
        'PATCH /api/accounts/:accountId/members/:memberId',
        'POST /api/accounts/:accountId/keys',
        'POST /api/accounts/:accountId/keys/:keyId/regenerate',
        'POST /api/accounts/:accountId/keys/:keyId/revoke',
        'POST /api/accounts/:accountId/members',
        'GET /api/accounts/:accountId/webhooks',
        'GET /api/accounts/:accountId/webhooks/settings',
        'PUT /api/accounts/:accountId/webhooks/settings',
        'POST /api/accounts/:accountId/webhooks',
        'PATCH /api/accounts/:accountId/webhooks/:endpointId',
        'DELETE /api/accounts/:accountId/webhooks/:endpointId',
        'POST /api/accounts/:accountId/webhooks/:endpointId/rotate-secret',
        'POST /api/accounts/:accountId/webhooks/:endpointId/test',
        'GET /api/accounts/:accountId/webhooks/:endpointId/deliveries',
      ].sort(),
    );
    expect(CALLS).toHaveLength(22);
  });

  describe.each(['owner', 'developer', 'viewer'] as const)('%s', (role) => {
    it.each(CALLS.map((call) => [callName(call), call] as const))(`%s: allowed only where the matrix says`, async (_name, call) => {
      const { path: target, body } = await call.prepare(fixture.accountId);
      const response = await api.call(fixture.people[role], call.method, target, body);
      if (ALLOWED[role].includes(call.action)) {
        expect({ status: response.status, error: response.body?.error }).toEqual({ status: call.ok, error: undefined });
      } else {
        expect(response.status).toBe(403);
        expect(response.body.error.code).toBe('forbidden');
        expect(response.body.error.message).toContain(`is ${role}`);
      }
    });
  });

  it.each(CALLS.map((call) => [callName(call), call] as const))(
    'someone signed in but not a member gets 404 account_not_found: %s',
    async (_name, call) => {
      const { path: target, body } = await call.prepare(fixture.accountId);
      const response = await api.call(person('outsider'), call.method, target, body);
      expect(response.status).toBe(404);
      expect(response.body.error.code).toBe('account_not_found');
    },
  );

  it.each([...CALLS.map((call) => [callName(call), call] as const), ['GET /me', undefined] as const])(
    'a request without a signed-in person gets 401: %s',
    async (_name, call) => {
      const { path: target, body } = call ? await call.prepare(fixture.accountId) : { path: `${CUSTOMER_API_PREFIX}/me`, body: undefined };
      const response = await api.call(undefined, call?.method ?? 'GET', target, body);
      expect(response.status).toBe(401);
      expect(response.body.error.code).toBe('unauthenticated');
    },
  );

  it('the matrix is exactly the roles of the issue', () => {
    for (const role of ['owner', 'developer', 'viewer'] as const) {
      for (const action of CUSTOMER_ACTIONS)
        expect({ role, action, allowed: mayPerform(role, action) }).toEqual({ role, action, allowed: ALLOWED[role].includes(action) });
    }
  });

  it("tells the dashboard what the caller's role may do, as the matrix says", async () => {
    for (const role of ['owner', 'developer', 'viewer'] as const) {
      const summary = await api.call(fixture.people[role], 'GET', path(fixture.accountId));
      expect(summary.body).toMatchObject({ role, permissions: actionsOf(role) });
    }
  });

  it('takes a role change into account on the very next call', async () => {
    const member = await newMember(fixture.accountId, 'developer');
    const as: CustomerIdentity = { issuer: ISSUER, subject: (member.principal as { subject: string }).subject };
    expect((await api.call(as, 'POST', path(fixture.accountId, '/keys'), {})).status).toBe(201);
    await store.changeMemberRole(fixture.accountId, member.id, 'viewer');
    expect((await api.call(as, 'POST', path(fixture.accountId, '/keys'), {})).status).toBe(403);
    await store.removeMember(fixture.accountId, member.id);
    expect((await api.call(as, 'GET', path(fixture.accountId, '/keys'))).status).toBe(404);
  });
});

describe("a member of account A trying every call on account B's ids", () => {
  let a: Awaited<ReturnType<typeof team>>;
  let b: Awaited<ReturnType<typeof team>>;
  beforeAll(async () => {
    [a, b] = [await team(), await team()];
  });

  /** B's records, read straight from the store, to show nothing changed. */
  const stateOfB = async () => ({
    account: await store.getAccount(b.accountId),
    keys: await store.listKeys(b.accountId),
    members: await store.listMembers(b.accountId),
  });

  it.each(CALLS.map((call) => [callName(call), call] as const))(
    "B's account id: 404 account_not_found, the same answer as for an account that does not exist: %s",
    async (_name, call) => {
      const before = await stateOfB();
      const { path: target, body } = await call.prepare(b.accountId);
      const onB = await api.call(a.people.owner, call.method, target, body);
      const onNothing = await api.call(a.people.owner, call.method, target.replace(b.accountId, 'no-such-account'), body);
      expect(onB.status).toBe(404);
      expect(onB.body.error.code).toBe('account_not_found');
      expect(onNothing.body.error.code).toBe('account_not_found');
      expect(onB.body.error.message).toBe(onNothing.body.error.message.replace('no-such-account', b.accountId));
      // The fresh target the call was prepared with is still there and unchanged; nothing else of B changed either.
      const after = await stateOfB();
      expect(after.account).toEqual(before.account);
      expect(after.keys?.filter((key) => before.keys?.some((old) => old.id === key.id))).toEqual(before.keys);
      expect(after.members?.filter((m) => before.members?.some((old) => old.id === m.id))).toEqual(before.members);
      expect(after.keys?.every((key) => key.status === 'active' && key.name === 'seeded')).toBe(true);
    },
  );

  it.each([
    ['GET', ''],
    ['PATCH', ''],
    ['POST', '/regenerate'],
    ['POST', '/revoke'],
  ])("B's key id under A's own account: 404 key_not_found for %s key%s, and B's key is untouched", async (method, suffix) => {
    const body = method === 'PATCH' ? { name: 'hijacked' } : method === 'POST' ? {} : undefined;
    const response = await api.call(a.people.owner, method, path(a.accountId, `/keys/${b.keyId}${suffix}`), body);
    const missing = await api.call(a.people.owner, method, path(a.accountId, `/keys/key_doesNotExist00${suffix}`), body);
    expect(response.status).toBe(404);
    expect(response.body.error.code).toBe('key_not_found');
    expect(missing.body.error.message).toBe(response.body.error.message.replace(b.keyId, 'key_doesNotExist00'));
    expect(await store.getKey(b.keyId)).toMatchObject({ status: 'active', name: 'seeded' });
    expect((await store.getKey(b.keyId))?.replacedBy).toBeUndefined();
  });

  it.each([
    ['PATCH', { role: 'owner' }],
    ['DELETE', undefined],
  ])("B's member id under A's own account: 404 member_not_found for %s, and B's member is untouched", async (method, body) => {
    const victim = (await store.listMembers(b.accountId))![0]!;
    const response = await api.call(a.people.owner, method, path(a.accountId, `/members/${victim.id}`), body);
    expect(response.status).toBe(404);
    expect(response.body.error.code).toBe('member_not_found');
    expect(await store.getMember(b.accountId, victim.id)).toEqual(victim);
  });

  it("never lists B for A's members, nor B's keys, members or audit among A's", async () => {
    const me = await api.call(a.people.owner, 'GET', `${CUSTOMER_API_PREFIX}/me`);
    expect(me.body.accounts.map((account) => account.id)).toEqual([a.accountId]);
    const everything = JSON.stringify([
      (await api.call(a.people.owner, 'GET', path(a.accountId))).body,
      (await api.call(a.people.owner, 'GET', path(a.accountId, '/keys'))).body,
      (await api.call(a.people.owner, 'GET', path(a.accountId, '/members'))).body,
      (await api.call(a.people.owner, 'GET', path(a.accountId, '/audit?limit=1000'))).body,
    ]);
    expect(everything).not.toContain(b.accountId);
    expect(everything).not.toContain(b.keyId);
    expect(everything).not.toContain(b.people.owner.subject);
  });
});

describe('usage', () => {
  it('shows requests per key by hour (24 hours) and by day (30 days), to every role, and nothing of another account', async () => {
    const { accountId, people, keyId } = await team();
    const other = await team();
    const second = await newKey(accountId);
    const now = Date.now();
    const hour = hourStartOf(now);
    const used = (id: string, requests: number) => ({ accountId, keyId: id, atMs: now, requests });
    await store.recordLastUsed([used(keyId, 5), used(second.id, 2)], { id: uniqueId('batch'), hourStartMs: hour });
    await store.recordLastUsed([used(keyId, 1)], { id: uniqueId('batch'), hourStartMs: hour - HOUR_MS });
    await store.recordLastUsed([{ accountId: other.accountId, keyId: other.keyId, atMs: now, requests: 9 }], {
      id: uniqueId('batch'),
      hourStartMs: hour,
    });

    const usage = async (who: CustomerIdentity, query: string) => {
      const response = await api.call(who, 'GET', path(accountId, `/usage${query}`));
      expect(response.status).toBe(200);
      return response.body as unknown as UsageView;
    };
    const day = await usage(people.viewer, '');
    expect(day).toMatchObject({ window: '24h', granularity: 'hour', countsDelayMs: 30_000 });
    expect(day.bucketStarts).toHaveLength(24);
    expect(day.bucketStarts.at(-1)).toBe(new Date(hour).toISOString());
    const seriesOf = (view: UsageView, id: string) => view.keys.find((key) => key.id === id)?.series.requests;
    expect(seriesOf(day, keyId)!.slice(-2)).toEqual([1, 5]);
    expect(seriesOf(day, second.id)!.slice(-2)).toEqual([0, 2]);
    expect(day.totals.requests.slice(-2)).toEqual([1, 7]);
    expect(day.totals.requests.slice(0, -2).every((n) => n === 0)).toBe(true);

    const month = await usage(people.developer, '?window=30d');
    expect(month).toMatchObject({ window: '30d', granularity: 'day' });
    expect(month.bucketStarts).toHaveLength(30);
    // The hour before may fall on yesterday: the two days together hold every request.
    expect(month.totals.requests.slice(-2).reduce((sum, n) => sum + n, 0)).toBe(8);
    expect(month.totals.requests.at(-1)).toBe(dayStartOf(now) === hour ? 7 : 8);
    expect(JSON.stringify([day, month])).not.toContain(other.keyId);

    const bad = await api.call(people.owner, 'GET', path(accountId, '/usage?window=7d'));
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toContain('window');
  });
});

describe('usage: tokens and spend from the usage ledger', () => {
  const record = (
    ids: { accountId: string; keyId: string },
    atMs: number,
    tokens: [input: number, output: number, cached: number, cacheCreation: number],
    costMinorUnits: number,
  ): UsageRecord => ({
    requestId: uniqueId('req'),
    accountId: ids.accountId,
    keyId: ids.keyId,
    keyPrefix: 'gk_live_AbC4',
    family: 'chat-completions',
    style: 'chat',
    model: 'gpt-4o-mini',
    tokens: { inputTokens: tokens[0], outputTokens: tokens[1], cachedInputTokens: tokens[2], cacheCreationTokens: tokens[3] },
    costMinorUnits,
    estimated: false,
    atMs,
  });

  it("shows each key's tokens by kind and spend in units and as money, per hour (24 hours) and per day (30 days), to a viewer too", async () => {
    const { accountId, people, keyId } = await team();
    const other = await team();
    const second = await newKey(accountId);
    const now = Date.now();
    const hour = hourStartOf(now);
    for (const applied of [
      record({ accountId, keyId }, now, [1000, 200, 300, 40], 125),
      record({ accountId, keyId }, now, [10, 5, 0, 0], 3),
      record({ accountId, keyId: second.id }, hour - HOUR_MS, [7, 3, 2, 1], 2),
      record({ accountId: other.accountId, keyId: other.keyId }, now, [99_999, 1, 0, 0], 500),
    ]) {
      expect((await store.applyUsage(applied, NO_TOKEN_BUDGETS)).kind).toBe('applied');
    }

    const usage = async (who: CustomerIdentity, query: string) => {
      const response = await api.call(who, 'GET', path(accountId, `/usage${query}`));
      expect(response.status).toBe(200);
      return response.body as unknown as UsageView;
    };
    const series = (view: UsageView, id: string) => view.keys.find((key) => key.id === id)!.series;
    const lastTwo = (values: number[]) => values.slice(-2);

    const day = await usage(people.viewer, '?window=24h');
    expect(day.metrics).toEqual([
      'requests',
      'tokens',
      'inputTokens',
      'outputTokens',
      'cachedInputTokens',
      'cacheCreationTokens',
      'costMinorUnits',
    ]);
    expect(day.bucketStarts.at(-1)).toBe(new Date(hour).toISOString());
    const first = series(day, keyId);
    expect([first.inputTokens, first.outputTokens, first.cachedInputTokens, first.cacheCreationTokens].map(lastTwo)).toEqual([
      [0, 1010],
      [0, 205],
      [0, 300],
      [0, 40],
    ]);
    expect(lastTwo(first.tokens)).toEqual([0, 1555]);
    expect(lastTwo(first.costMinorUnits)).toEqual([0, 128]);
    expect(lastTwo(series(day, second.id).tokens)).toEqual([13, 0]);
    expect(lastTwo(series(day, second.id).costMinorUnits)).toEqual([2, 0]);
    expect(lastTwo(day.totals.tokens)).toEqual([13, 1555]);
    expect(lastTwo(day.totals.costMinorUnits)).toEqual([2, 128]);
    expect(lastTwo(day.totals.inputTokens)).toEqual([7, 1010]);
    // Issue 35: what the integers count, and the spend as money (default micro-dollars), per bucket and in total.
    expect(day.currency).toEqual({ code: 'USD', exponent: 6 });
    expect(day.spendFormatted.total).toBe('$0.00013');
    expect(day.spendFormatted.buckets.slice(-2)).toEqual(['$0.000002', '$0.000128']);
    expect(day.spendFormatted.buckets[0]).toBe('$0.00');
    expect(day.keys.find((key) => key.id === keyId)?.spendFormatted.total).toBe('$0.000128');
    for (const metric of day.metrics) {
      expect(day.totals[metric]).toHaveLength(24);
      expect(day.totals[metric].slice(0, -2).every((n) => n === 0)).toBe(true);
    }
    // Request counts come from the Check path, not the ledger: none were counted here.
    expect(day.totals.requests.every((n) => n === 0)).toBe(true);

    const month = await usage(people.viewer, '?window=30d');
    expect(month.totals.tokens).toHaveLength(30);
    // The hour before may fall on yesterday: the two days together hold every record.
    expect(lastTwo(month.totals.tokens).reduce((sum, n) => sum + n, 0)).toBe(1568);
    expect(lastTwo(month.totals.costMinorUnits).reduce((sum, n) => sum + n, 0)).toBe(130);
    expect(month.totals.costMinorUnits.at(-1)).toBe(dayStartOf(now) === hour ? 128 : 130);
    expect(series(month, keyId).costMinorUnits.at(-1)).toBe(128);
    expect(series(month, keyId).outputTokens.at(-1)).toBe(205);
    expect(JSON.stringify([day, month])).not.toContain(other.keyId);
  });
});

describe('keys, as a member manages them', () => {
  it('creates a key shown in full once, lists it with who created it, and never shows it again', async () => {
    const { accountId, people } = await team();
    const created = await api.call(people.developer, 'POST', path(accountId, '/keys'), { name: 'ci', environment: 'test' });
    expect(created.status).toBe(201);
    const full = created.body.key;
    expect(full.startsWith('gk_test_')).toBe(true);
    expect(created.body).toMatchObject({
      name: 'ci',
      environment: 'test',
      status: 'active',
      prefix: full.slice(0, 12),
      createdBy: { kind: 'member', issuer: ISSUER, subject: people.developer.subject },
    });
    const listed = await api.call(people.viewer, 'GET', path(accountId, '/keys'));
    const view = listed.body.keys.find((key) => key.id === created.body.id)!;
    expect(Object.keys(view).sort()).toEqual(COMMON_KEY_VIEW_FIELDS);
    expect(JSON.stringify(listed.body)).not.toContain(full);
    expect(JSON.stringify(listed.body)).not.toContain(hashCustomerKey(full));
    expect(api.logs.leaksOf([full])).toEqual([]);
    expect(actionLogs.leaksOf([full])).toEqual([]);
  });

  it('sets and clears an expiry, refusing one in the past; regenerates at once and with a grace period; revokes', async () => {
    const { accountId, people } = await team();
    const key = await newKey(accountId);
    const at = new Date(Date.now() + 86_400_000).toISOString();
    const expiring = await api.call(people.developer, 'PATCH', path(accountId, `/keys/${key.id}`), { expiresAt: at });
    expect(expiring.body.expiresAt).toBe(at);
    const past = await api.call(people.developer, 'PATCH', path(accountId, `/keys/${key.id}`), { expiresAt: '2020-01-01T00:00:00Z' });
    expect(past.status).toBe(400);
    expect(past.body.error).toMatchObject({ code: 'invalid_field', field: 'expiresAt' });
    expect((await api.call(people.developer, 'PATCH', path(accountId, `/keys/${key.id}`), { expiresAt: null })).body.expiresAt).toBeNull();

    const now = await api.call(people.developer, 'POST', path(accountId, `/keys/${key.id}/regenerate`), {});
    expect(now.status).toBe(201);
    expect(now.body).toMatchObject({ replaces: key.id, oldKey: { id: key.id, status: 'revoked' } });
    const graceful = await api.call(people.owner, 'POST', path(accountId, `/keys/${now.body.id}/regenerate`), { graceSeconds: 3600 });
    expect(graceful.status).toBe(201);
    expect(graceful.body.oldKey).toMatchObject({ status: 'active', revokeAt: expect.any(String) });
    const again = await api.call(people.owner, 'POST', path(accountId, `/keys/${now.body.id}/regenerate`), {});
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('key_already_rotated');
    const revoked = await api.call(people.owner, 'POST', path(accountId, `/keys/${graceful.body.id}/revoke`));
    expect(revoked.body.status).toBe('revoked');
  });

  it('never lets a customer set limits, billing or credit: such fields are refused as unknown', async () => {
    const { accountId, people, keyId } = await team();
    for (const [method, target, body, field] of [
      ['POST', '/keys', { limits: [{ limit: 1, window: '1m' }] }, 'limits'],
      ['PATCH', `/keys/${keyId}`, { limits: null }, 'limits'],
      ['PATCH', `/keys/${keyId}`, { name: 'x', status: 'active' }, 'status'],
    ] as const) {
      const response = await api.call(people.owner, method, path(accountId, target), body);
      expect(response.status).toBe(400);
      expect(response.body.error).toMatchObject({ code: 'invalid_field', field });
    }
    for (const method of ['PATCH', 'POST', 'PUT']) {
      expect((await api.call(people.owner, method, path(accountId), { billing: { creditBalance: 1e9 } })).status).toBe(404);
      expect((await api.call(people.owner, method, path(accountId, '/credit'), { amount: 1e9 })).status).toBe(404);
    }
    expect(await store.getAccount(accountId)).not.toHaveProperty('creditBalance');
  });

  it("sets restrictions on a key within the account's defaults, refusing what lies outside them; a viewer may not", async () => {
    const { accountId, people, keyId } = await team();
    await store.updateAccount(accountId, { keyRestrictions: { models: ['gpt-4o*'], sourceAddresses: ['10.0.0.0/8'] } });
    const narrowed = { models: ['gpt-4o-mini'], sourceAddresses: ['10.1.0.0/16'], readOnly: true };
    const set = await api.call(people.developer, 'PATCH', path(accountId, `/keys/${keyId}`), { restrictions: narrowed });
    expect(set.status).toBe(200);
    expect(set.body.restrictions).toEqual(narrowed);
    const created = await api.call(people.owner, 'POST', path(accountId, '/keys'), { restrictions: { endpoints: ['/v1/embeddings'] } });
    expect(created.status).toBe(201);
    expect(created.body.restrictions).toEqual({ endpoints: ['/v1/embeddings'] });

    const wider = await api.call(people.owner, 'PATCH', path(accountId, `/keys/${keyId}`), { restrictions: { models: ['o3'] } });
    expect(wider.status).toBe(400);
    expect(wider.body.error).toMatchObject({ code: 'invalid_field', field: 'restrictions' });
    expect(wider.body.error.message).toContain("models 'o3' is outside the account's defaults");
    const badCidr = await api.call(people.owner, 'POST', path(accountId, '/keys'), { restrictions: { sourceAddresses: ['10.0.0.0/40'] } });
    expect(badCidr.status).toBe(400);
    expect(JSON.stringify(badCidr.body)).toContain('the prefix length must be 0 to 32');
    // The part at fault named once, as the field and at the head of the message.
    expect(badCidr.body.error).toMatchObject({ code: 'invalid_field', field: 'restrictions.sourceAddresses' });
    expect(badCidr.body.error.message).toMatch(/^restrictions\.sourceAddresses: '10\.0\.0\.0\/40' is not a CIDR range/);
    expect((await api.call(people.viewer, 'PATCH', path(accountId, `/keys/${keyId}`), { restrictions: null })).status).toBe(403);
    expect(
      (await api.call(people.developer, 'PATCH', path(accountId, `/keys/${keyId}`), { restrictions: null })).body.restrictions,
    ).toBeNull();
  });

  it('refuses a key id that is really a key, without echoing it', async () => {
    const { accountId, people } = await team();
    const created = await api.call(people.owner, 'POST', path(accountId, '/keys'), {});
    const response = await api.call(people.owner, 'GET', path(accountId, `/keys/${created.body.key}`));
    expect(response.status).toBe(404);
    expect(JSON.stringify(response.body)).not.toContain(created.body.key);
  });
});

describe('the account summary', () => {
  it('shows name, current limits and, for a prepaid account, only whether credit remains, never the balance', async () => {
    const { accountId, people } = await team({ creditBalance: 987_654 });
    const summary = await api.call(people.viewer, 'GET', path(accountId));
    expect(summary.status).toBe(200);
    expect(summary.body).toEqual({
      id: accountId,
      name: `Team ${accountId}`,
      role: 'viewer',
      permissions: actionsOf('viewer'),
      billing: { status: 'active', prepaid: true, creditRemains: true },
      limits: {
        key: [
          { limit: 600, window: '1m' },
          { limit: 100000, window: '1d' },
        ],
        account: [
          { limit: 3000, window: '1m' },
          { limit: 1000000, window: '1d' },
        ],
      },
      keys: { active: 1, maxActiveKeys: 50 },
    });
    expect(JSON.stringify(summary.body)).not.toContain('987654');
    await store.adjustCredit(accountId, -987_654);
    expect((await api.call(people.viewer, 'GET', path(accountId))).body.billing).toEqual({
      status: 'active',
      prepaid: true,
      creditRemains: false,
    });
  });
});

describe('members, as owners manage them', () => {
  it('invites by email; the invitation binds on first sign-in with that verified email, and the person then sees the account', async () => {
    const { accountId, people } = await team();
    const invited = await api.call(people.owner, 'POST', path(accountId, '/members'), { email: 'New.Hire@Example.com', role: 'developer' });
    expect(invited.status).toBe(201);
    expect(invited.body).toMatchObject({
      status: 'invited',
      email: 'new.hire@example.com',
      role: 'developer',
      addedBy: { kind: 'member', issuer: ISSUER, subject: people.owner.subject },
    });
    const unverified = person('newhire');
    expect((await api.call(unverified, 'GET', `${CUSTOMER_API_PREFIX}/me`)).body.accounts).toEqual([]);
    const newHire = { ...unverified, verifiedEmail: 'new.hire@example.com' };
    const me = await api.call(newHire, 'GET', `${CUSTOMER_API_PREFIX}/me`);
    expect(me.body).toEqual({
      identity: { issuer: ISSUER, subject: newHire.subject, email: 'new.hire@example.com', name: null },
      accounts: [{ id: accountId, name: `Team ${accountId}`, role: 'developer' }],
    });
    expect((await api.call(newHire, 'POST', path(accountId, '/keys'), {})).status).toBe(201);
    const members = await api.call(people.owner, 'GET', path(accountId, '/members'));
    expect(members.body.members.find((m) => m.id === invited.body.id)).toMatchObject({
      status: 'active',
      subject: newHire.subject,
      email: 'new.hire@example.com',
      joinedAt: expect.any(String),
    });
    const audit = await api.call(people.owner, 'GET', path(accountId, '/audit'));
    expect(audit.body.entries.find((entry) => entry.action === 'member.bind')).toMatchObject({
      memberId: invited.body.id,
      actor: { kind: 'member', issuer: ISSUER, subject: newHire.subject },
    });
  });

  it('adds by issuer and subject, changes a role, removes; refuses a duplicate', async () => {
    const { accountId, people } = await team();
    const newcomer = person('newcomer');
    const added = await api.call(people.owner, 'POST', path(accountId, '/members'), { ...newcomer, role: 'viewer' });
    expect(added.status).toBe(201);
    const duplicate = await api.call(people.owner, 'POST', path(accountId, '/members'), { ...newcomer, role: 'owner' });
    expect(duplicate.status).toBe(409);
    expect(duplicate.body.error.code).toBe('member_exists');
    expect((await api.call(people.owner, 'PATCH', path(accountId, `/members/${added.body.id}`), { role: 'owner' })).body.role).toBe(
      'owner',
    );
    expect((await api.call(newcomer, 'GET', path(accountId, '/members'))).status).toBe(200);
    expect((await api.call(people.owner, 'DELETE', path(accountId, `/members/${added.body.id}`))).status).toBe(200);
    expect((await api.call(newcomer, 'GET', path(accountId))).status).toBe(404);
  });

  it('keeps at least one owner: the last owner can neither step down nor be removed', async () => {
    const { accountId, people } = await team();
    const owner = (await store.listMembers(accountId))!.find((m) => m.role === 'owner')!;
    for (const [method, body] of [
      ['PATCH', { role: 'viewer' }],
      ['DELETE', undefined],
    ] as const) {
      const response = await api.call(people.owner, method, path(accountId, `/members/${owner.id}`), body);
      expect(response.status).toBe(409);
      expect(response.body.error.code).toBe('last_owner');
    }
    expect((await store.getMember(accountId, owner.id))?.role).toBe('owner');
  });
});

describe('the active-key cap', () => {
  it('refuses a key past the cap with 409 active_key_cap_reached, and a revoked key frees a place', async () => {
    const { accountId, people, keyId } = await team({ maxActiveKeys: 2 });
    expect((await api.call(people.developer, 'POST', path(accountId, '/keys'), {})).status).toBe(201);
    const refused = await api.call(people.developer, 'POST', path(accountId, '/keys'), {});
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('active_key_cap_reached');
    expect(refused.body.error.message).toContain('at most 2');
    expect((await api.call(people.viewer, 'GET', path(accountId))).body.keys).toEqual({ active: 2, maxActiveKeys: 2 });
    // Regenerating at once replaces a key: never refused by the cap.
    expect((await api.call(people.developer, 'POST', path(accountId, `/keys/${keyId}/regenerate`), {})).status).toBe(201);
    expect((await store.listKeys(accountId))!.filter((key) => key.status === 'active')).toHaveLength(2);
    await api.call(people.developer, 'POST', path(accountId, `/keys/${(await store.listKeys(accountId))![0]!.id}/revoke`));
    expect((await api.call(people.developer, 'POST', path(accountId, '/keys'), {})).status).toBe(201);
  });
});

describe('audit', () => {
  it("records who made each change (operator or member), and shows an owner their account's trail without billing figures", async () => {
    const { accountId, people } = await team({ creditBalance: 5000 });
    const created = await api.call(people.developer, 'POST', path(accountId, '/keys'), { name: 'audited' });
    await store.appendAudit({ action: 'account.credit', actor: OPERATOR, accountId, detail: 'amount=424242' }, Date.now());
    const audit = await api.call(people.owner, 'GET', path(accountId, '/audit'));
    expect(audit.status).toBe(200);
    const entries = audit.body.entries;
    expect(entries.find((entry) => entry.action === 'key.create' && entry.keyId === created.body.id)).toMatchObject({
      actor: { kind: 'member', issuer: ISSUER, subject: people.developer.subject },
      keyPrefix: created.body.prefix,
    });
    expect(entries.filter((entry) => entry.action === 'member.add').every((entry) => entry.actor.kind === 'operator')).toBe(true);
    expect(entries.find((entry) => entry.action === 'account.credit')).toMatchObject({ actor: { kind: 'operator' }, detail: null });
    expect(JSON.stringify(audit.body)).not.toContain('424242');
    expect(entries.every((entry) => !('accountId' in entry))).toBe(true);
  });
});
