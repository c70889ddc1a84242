import type { ApiCreatedOperatorToken, ApiErrorBody } from '../../src/cli/api-types';
import type { AuditTrailEntry } from '../../src/ports/store';
import { ManualClock } from '../../src/platform/clock';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { startAppUnderTest, TEST_ADMIN_TOKEN, type AppUnderTest } from '../support/running-app';

/** GET /admin/audit across accounts, filtered by account, action, actor and time, on a real Redis. */
let redis: TestRedis;
let app: AppUnderTest;
const clock = new ManualClock(Date.parse('2026-06-01T10:00:00Z'));
type Answer = { status: number; body: ApiErrorBody & ApiCreatedOperatorToken & { entries: AuditTrailEntry[]; next: string | null } };
const call = async (method: string, path: string, body?: object, token = TEST_ADMIN_TOKEN) =>
  (await app.admin(method, path, body, token)) as unknown as Answer;
let tokenId: string;

beforeAll(async () => {
  redis = await startTestRedis();
  app = await startAppUnderTest({ redisUrl: redis.url, clock });
  const created = await call('POST', '/admin/operator-tokens', { name: 'onboarding', scopes: ['accounts:write', 'billing:write'] });
  tokenId = created.body.id;
  const token = created.body.token;
  // 10:00 break-glass creates north; 11:00 the token creates south; 12:00 the token credits south; 13:00 break-glass renames north.
  expect((await call('POST', '/admin/accounts', { id: 'north', name: 'North' })).status).toBe(201);
  clock.advance(3_600_000);
  expect((await call('POST', '/admin/accounts', { id: 'south', name: 'South', billing: { creditBalance: 0 } }, token)).status).toBe(201);
  clock.advance(3_600_000);
  expect((await call('POST', '/admin/accounts/south/credit', { amount: 500 }, token)).status).toBe(200);
  clock.advance(3_600_000);
  expect((await call('PATCH', '/admin/accounts/north', { name: 'North Ltd' })).status).toBe(200);
});
afterAll(async () => {
  await app?.close();
  await redis?.stop();
});

// An operator-level entry (no account) by the token it names.
const summary = (answer: Answer) => answer.body.entries.map((entry) => `${entry.accountId ?? entry.operatorTokenName} ${entry.action}`);

describe('GET /admin/audit filters', () => {
  it('without filters: every account, newest first', async () => {
    expect(summary(await call('GET', '/admin/audit'))).toEqual([
      'north account.update',
      'south account.credit',
      'south account.create',
      'north account.create',
      'onboarding operator_token.create',
    ]);
  });

  it('by account (leaving out the operator-level entries, of no account)', async () => {
    expect(summary(await call('GET', '/admin/audit?accountId=south'))).toEqual(['south account.credit', 'south account.create']);
  });

  it('by action', async () => {
    expect(summary(await call('GET', '/admin/audit?action=account.create'))).toEqual(['south account.create', 'north account.create']);
  });

  it('by actor: a token by its id, the break-glass token by name', async () => {
    expect(summary(await call('GET', `/admin/audit?actor=${tokenId}`))).toEqual(['south account.credit', 'south account.create']);
    expect(summary(await call('GET', '/admin/audit?actor=break-glass'))).toEqual([
      'north account.update',
      'north account.create',
      'onboarding operator_token.create',
    ]);
  });

  it('by time: from inclusive, to exclusive', async () => {
    const answer = await call('GET', '/admin/audit?from=2026-06-01T11:00:00Z&to=2026-06-01T13:00:00Z');
    expect(summary(answer)).toEqual(['south account.credit', 'south account.create']);
  });

  it('pages a filtered listing with next', async () => {
    const first = await call('GET', '/admin/audit?action=account.create&limit=1');
    expect(summary(first)).toEqual(['south account.create']);
    const second = await call('GET', `/admin/audit?action=account.create&limit=1&before=${first.body.next}`);
    expect(summary(second)).toEqual(['north account.create']);
  });

  it('refuses an unknown action, naming the field', async () => {
    const answer = await call('GET', '/admin/audit?action=account.delete');
    expect(answer.status).toBe(400);
    expect(answer.body.error.field).toBe('action');
  });
});
