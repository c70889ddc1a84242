import { CREDIT_LIMIT_MINOR_UNITS } from '../../src/accounts/credit';
import { redisKeys } from '../../src/store/redis/redis-keys';
import { appOnTestRedis } from '../support/app-on-test-redis';

/**
 * A billing system that lost the answer to `POST /admin/accounts/{id}/credit`
 * (a timeout, a reset connection) sends it again: with the same
 * Idempotency-Key it is applied once, and the repeat gets the first answer,
 * marked `Idempotent-Replayed: true`. Over real HTTP, on a real Redis.
 */
const world = appOnTestRedis();

async function account(id: string, creditBalance?: number): Promise<void> {
  const billing = creditBalance === undefined ? {} : { billing: { creditBalance } };
  expect((await world.app.admin('POST', '/admin/accounts', { id, name: id, ...billing })).status).toBe(201);
}

const credit = (id: string, amount: number, key?: string) =>
  world.app.adminWithHeaders('POST', `/admin/accounts/${id}/credit`, { amount }, key === undefined ? {} : { 'Idempotency-Key': key });

const balanceOf = async (id: string) => (await world.app.admin('GET', `/admin/accounts/${id}`)).body.billing.creditBalance;

async function creditEntriesOf(id: string): Promise<{ action: string; detail?: string }[]> {
  const audit = await world.app.admin('GET', `/admin/accounts/${id}/audit?limit=100`);
  expect(audit.status).toBe(200);
  return audit.body.entries.filter((entry) => entry.action === 'account.credit');
}

it('applies a repeated key once: the repeat answers the same status and body with Idempotent-Replayed: true', async () => {
  await account('billing-acme', 1_000);
  const first = await credit('billing-acme', 250, 'invoice-2026-11-0042');
  expect(first.status).toBe(200);
  expect(first.body).toEqual({
    accountId: 'billing-acme',
    creditBalance: 1_250,
    currency: { code: 'USD', exponent: 6 },
    creditBalanceFormatted: '$0.00125',
  });
  expect(first.headers.get('idempotent-replayed')).toBeNull();

  for (let attempt = 0; attempt < 2; attempt += 1) {
    const repeat = await credit('billing-acme', 250, 'invoice-2026-11-0042');
    expect(repeat.status).toBe(200);
    expect(repeat.body).toEqual(first.body);
    expect(repeat.headers.get('idempotent-replayed')).toBe('true');
  }
  expect(await balanceOf('billing-acme')).toBe(1_250);
  expect(await world.operator.exists(redisKeys.creditIdempotency('billing-acme', 'invoice-2026-11-0042'))).toBe(1);
  // One audit entry per applied adjustment; none for the replays.
  expect(await creditEntriesOf('billing-acme')).toEqual([expect.objectContaining({ detail: 'amount=250' })]);

  // Without a key every call is an adjustment of its own, as before.
  expect((await credit('billing-acme', 1)).body.creditBalance).toBe(1_251);
  expect((await credit('billing-acme', 1)).body.creditBalance).toBe(1_252);
});

it('applies the same key sent many times at once exactly once', async () => {
  await account('billing-burst', 0);
  const answers = await Promise.all(Array.from({ length: 20 }, () => credit('billing-burst', 40, 'burst-1')));
  expect(answers.map((answer) => answer.status)).toEqual(Array.from({ length: 20 }, () => 200));
  expect(answers.map((answer) => answer.body)).toEqual(
    Array.from({ length: 20 }, () => ({
      accountId: 'billing-burst',
      creditBalance: 40,
      currency: { code: 'USD', exponent: 6 },
      creditBalanceFormatted: '$0.00004',
    })),
  );
  expect(answers.filter((answer) => answer.headers.get('idempotent-replayed') === 'true')).toHaveLength(19);
  expect(await balanceOf('billing-burst')).toBe(40);
  expect(await creditEntriesOf('billing-burst')).toHaveLength(1);
});

it('answers 409 idempotency_key_reused for the same key with another amount, changing nothing', async () => {
  await account('billing-reuse', 500);
  expect((await credit('billing-reuse', -100, 'refund-7')).status).toBe(200);
  const reused = await credit('billing-reuse', 100, 'refund-7');
  expect(reused.status).toBe(409);
  expect(reused.headers.get('idempotent-replayed')).toBeNull();
  expect(reused.body).toEqual({
    error: {
      code: 'idempotency_key_reused',
      message: expect.stringMatching(/already used on account 'billing-reuse'.*an amount of -100, not 100.*Send a new key/),
    },
  });
  expect(await balanceOf('billing-reuse')).toBe(400);
  expect(await creditEntriesOf('billing-reuse')).toHaveLength(1);
});

it('replays a 409 refusal as it was first answered, even after its cause is gone', async () => {
  await account('billing-postpaid');
  const refused = await credit('billing-postpaid', 100, 'first-top-up');
  expect(refused.status).toBe(409);
  expect(refused.body.error.code).toBe('not_prepaid');
  expect((await world.app.admin('PATCH', '/admin/accounts/billing-postpaid', { billing: { creditBalance: 0 } })).status).toBe(200);
  const replayed = await credit('billing-postpaid', 100, 'first-top-up');
  expect(replayed.status).toBe(409);
  expect(replayed.body).toEqual(refused.body);
  expect(replayed.headers.get('idempotent-replayed')).toBe('true');
  expect(await balanceOf('billing-postpaid')).toBe(0);

  await account('billing-full', CREDIT_LIMIT_MINOR_UNITS);
  const outOfRange = await credit('billing-full', 1, 'over-the-top');
  expect(outOfRange.status).toBe(409);
  expect(outOfRange.body.error).toMatchObject({ code: 'credit_balance_out_of_range', field: 'amount' });
  const again = await credit('billing-full', 1, 'over-the-top');
  expect({ status: again.status, body: again.body }).toEqual({ status: 409, body: outOfRange.body });
  expect(again.headers.get('idempotent-replayed')).toBe('true');
  expect(await creditEntriesOf('billing-full')).toEqual([]);
});

it.each([
  ['too long', 'k'.repeat(256), /is 256 characters long; at most 255/],
  ['a tab', 'a\tb', /holds U\+0009 at position 2/],
  ['a non-ASCII byte', 'caf\u00e9', /holds U\+00E9 at position 4/],
])('answers 400 invalid_idempotency_key for a key with %s, changing nothing', async (what, key, reason) => {
  const id = `billing-bad-${what.replace(/\W/g, '-')}`;
  await account(id, 10);
  const refused = await credit(id, 5, key);
  expect(refused.status).toBe(400);
  expect(refused.body.error.code).toBe('invalid_idempotency_key');
  expect(refused.body.error.message).toMatch(reason);
  expect(refused.body.error.message).toContain('Idempotency-Key');
  expect(await balanceOf(id)).toBe(10);
});

it('takes a key of 255 printable ASCII characters, braces included, and answers an unknown account 404 without keeping it', async () => {
  const key = `{x} ${'~'.repeat(251)}`;
  expect((await credit('billing-later', 5, key)).status).toBe(404);
  expect((await world.operator.keys('*billing-later*')).length).toBe(0);
  await account('billing-later', 0);
  expect((await credit('billing-later', 5, key)).body.creditBalance).toBe(5);
  expect((await credit('billing-later', 5, key)).headers.get('idempotent-replayed')).toBe('true');
});
