import { CREDIT_LIMIT_MINOR_UNITS } from '../../src/accounts/credit';
import { redisKeys } from '../../src/store/redis/redis-keys';
import { appOnTestRedis } from '../support/app-on-test-redis';

/**
 * Issue 13, defect 2, over the admin API on a real Redis: balances and
 * amounts are bounded (±10^15 minor units) and refused before anything is
 * written, balances are answered exactly, and one unreadable account never
 * takes down the listing of all the others.
 */
const world = appOnTestRedis();

async function prepaid(id: string, creditBalance: number): Promise<void> {
  expect((await world.app.admin('POST', '/admin/accounts', { id, name: id, billing: { creditBalance } })).status).toBe(201);
}

const balanceOf = async (id: string) =>
  ((await world.app.admin('GET', `/admin/accounts/${id}`)).body as { billing: { creditBalance: number } }).billing.creditBalance;

it('refuses an amount of MAX_SAFE_INTEGER with 400 naming the field and the bound; twice leaves every read working', async () => {
  await prepaid('huge', 0);
  for (let attempt = 0; attempt < 2; attempt += 1) {
    const refused = await world.app.admin('POST', '/admin/accounts/huge/credit', { amount: Number.MAX_SAFE_INTEGER });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({ code: 'invalid_field', field: 'amount' });
    expect(refused.body.error.message).toContain(String(CREDIT_LIMIT_MINOR_UNITS));
  }
  expect(await balanceOf('huge')).toBe(0);
  const listed = await world.app.admin('GET', '/admin/accounts');
  expect(listed.status).toBe(200);
  expect(listed.body.unreadable).toEqual([]);
});

it('answers 409 credit_balance_out_of_range when the result would leave the bounds, writing nothing', async () => {
  await prepaid('nearly-full', CREDIT_LIMIT_MINOR_UNITS - 5);
  const refused = await world.app.admin('POST', '/admin/accounts/nearly-full/credit', { amount: 6 });
  expect(refused.status).toBe(409);
  expect(refused.body.error).toMatchObject({ code: 'credit_balance_out_of_range', field: 'amount' });
  expect(refused.body.error.message).toContain(`${CREDIT_LIMIT_MINOR_UNITS - 5}`);
  expect(await balanceOf('nearly-full')).toBe(CREDIT_LIMIT_MINOR_UNITS - 5);
  expect((await world.app.admin('POST', '/admin/accounts/nearly-full/credit', { amount: 5 })).body.creditBalance).toBe(
    CREDIT_LIMIT_MINOR_UNITS,
  );

  await prepaid('deep-debt', -CREDIT_LIMIT_MINOR_UNITS);
  expect((await world.app.admin('POST', '/admin/accounts/deep-debt/credit', { amount: -1 })).body.error.code).toBe(
    'credit_balance_out_of_range',
  );
  expect(await balanceOf('deep-debt')).toBe(-CREDIT_LIMIT_MINOR_UNITS);
});

it('answers the exact new balance (123456789012345 + 1 is 123456789012346)', async () => {
  await prepaid('exact', 123_456_789_012_345);
  const credited = await world.app.admin('POST', '/admin/accounts/exact/credit', { amount: 1 });
  expect(credited.status).toBe(200);
  // As money too, to the last unit.
  expect(credited.body).toEqual({
    accountId: 'exact',
    creditBalance: 123_456_789_012_346,
    currency: { code: 'USD', exponent: 6 },
    creditBalanceFormatted: '$123,456,789.012346',
  });
  expect(await world.operator.hget(redisKeys.account('exact'), 'creditBalance')).toBe('123456789012346');
});

it('refuses an out-of-range creditBalance on create and on PATCH with 400 naming billing.creditBalance', async () => {
  const create = await world.app.admin('POST', '/admin/accounts', {
    id: 'too-rich',
    name: 'x',
    billing: { creditBalance: CREDIT_LIMIT_MINOR_UNITS + 1 },
  });
  expect(create.status).toBe(400);
  expect(create.body.error).toMatchObject({ code: 'invalid_field', field: 'billing.creditBalance' });
  expect((await world.app.admin('GET', '/admin/accounts/too-rich')).status).toBe(404);

  await prepaid('patched', 10);
  const patch = await world.app.admin('PATCH', '/admin/accounts/patched', { billing: { creditBalance: -CREDIT_LIMIT_MINOR_UNITS - 1 } });
  expect(patch.status).toBe(400);
  expect(patch.body.error).toMatchObject({ code: 'invalid_field', field: 'billing.creditBalance' });
  expect(await balanceOf('patched')).toBe(10);
  const atBound = await world.app.admin('PATCH', '/admin/accounts/patched', { billing: { creditBalance: -CREDIT_LIMIT_MINOR_UNITS } });
  expect(atBound.body.billing.creditBalance).toBe(-CREDIT_LIMIT_MINOR_UNITS);
});

it('lists every readable account when one record is corrupt, naming the bad one; only that account answers 503', async () => {
  await prepaid('healthy', 100);
  await prepaid('damaged', 100);
  // What two MAX_SAFE_INTEGER credits used to leave behind.
  await world.operator.hset(redisKeys.account('damaged'), 'creditBalance', '18014398509481982');

  const listed = await world.app.admin('GET', '/admin/accounts');
  expect(listed.status).toBe(200);
  const ids = (listed.body.accounts as { id: string }[]).map((account) => account.id);
  expect(ids).toContain('healthy');
  expect(ids).not.toContain('damaged');
  expect(listed.body.unreadable).toEqual([{ id: 'damaged', problem: expect.stringContaining('creditBalance') }]);
  expect(world.app.logs.lines.some((line) => line.includes('"accountId":"damaged"') && line.includes('unreadable'))).toBe(true);

  const one = await world.app.admin('GET', '/admin/accounts/damaged');
  expect(one.status).toBe(503);
  expect(one.body.error.code).toBe('account_unreadable');
  expect(one.body.error.message).toMatch(/'damaged'.*creditBalance/);
  expect((await world.app.admin('GET', '/admin/accounts/healthy')).status).toBe(200);

  const credit = await world.app.admin('POST', '/admin/accounts/damaged/credit', { amount: 1 });
  expect(credit.status).toBe(503);
  expect(credit.body.error.code).toBe('account_unreadable');
  expect(credit.body.error.message).toContain('Nothing was changed');
  expect(await world.operator.hget(redisKeys.account('damaged'), 'creditBalance')).toBe('18014398509481982');

  // The repair the message names: set a new balance.
  const repaired = await world.app.admin('PATCH', '/admin/accounts/damaged', { billing: { creditBalance: 100 } });
  expect(repaired.status).toBe(200);
  expect((await world.app.admin('GET', '/admin/accounts')).body.unreadable).toEqual([]);
});
