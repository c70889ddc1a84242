import {
  accountLimitsSchema,
  createAccountBody,
  creditBody,
  describeIssue,
  patchAccountBody,
  patchKeyBody,
  usageQuery,
} from '../../../src/admin/admin-schemas';
import { limitListSchema, tokenBudgetListSchema, windowSchema } from '../../../src/accounts/limits/limit-schema';
import { accountView, keyView } from '../../../src/admin/admin-views';
import type { Account, StoredKey } from '../../../src/keys/key-records';

function issueOf(schema: { safeParse(value: unknown): { success: boolean; error?: unknown } }, value: unknown) {
  const result = schema.safeParse(value);
  if (result.success) throw new Error(`expected ${JSON.stringify(value)} to be refused`);
  return describeIssue(result.error as Parameters<typeof describeIssue>[0]);
}

describe('windowSchema', () => {
  it.each([
    ['30s', 30],
    ['1m', 60],
    ['1h', 3600],
    ['1d', 86_400],
    [' 2m ', 120],
    [90, 90],
    ['31d', 31 * 86_400],
  ])('reads %j as %d seconds', (input, seconds) => {
    expect(windowSchema.parse(input)).toBe(seconds);
  });

  it.each(['1x', '', 'm', '0s', '32d', '60', '1.5m', 0, -60, 1.5, 31 * 86_400 + 1, true, null, {}])('refuses %j', (input) => {
    const { message } = issueOf(windowSchema, input);
    expect(message).toContain('"1m"');
  });
});

describe('limit lists', () => {
  it('turns windows into seconds', () => {
    expect(
      limitListSchema.parse([
        { limit: 100, window: '1m' },
        { limit: 10_000, window: 86_400 },
      ]),
    ).toEqual([
      { limit: 100, windowSeconds: 60 },
      { limit: 10_000, windowSeconds: 86_400 },
    ]);
  });

  it('accepts an empty list (no limit at all in that scope)', () => {
    expect(limitListSchema.parse([])).toEqual([]);
  });

  it.each([
    [[{ limit: 0, window: '1m' }], '0.limit'],
    [[{ limit: 1e9 + 1, window: '1m' }], '0.limit'],
    [[{ limit: 2.5, window: '1m' }], '0.limit'],
    [[{ window: '1m' }], '0.limit'],
    [
      [
        { limit: 1, window: '1m' },
        { limit: 2, window: '1x' },
      ],
      '1.window',
    ],
    [
      [
        { limit: 1, window: '1m' },
        { limit: 2, window: 60 },
      ],
      '1.window',
    ],
    [
      [
        { limit: 1, window: '1h' },
        { limit: 2, window: '1m' },
        { limit: 3, window: '60m' },
      ],
      '2.window',
    ],
    [[{ limit: 1, window: '1m', scope: 'key' }], '0.scope'],
    [Array.from({ length: 11 }, (_, i) => ({ limit: 1, window: i + 1 })), undefined],
  ])('refuses %j at %s', (input, field) => {
    expect(issueOf(limitListSchema, input).field).toBe(field);
  });

  it('says which earlier entry a duplicate window repeats', () => {
    expect(
      issueOf(limitListSchema, [
        { limit: 1, window: '1m' },
        { limit: 2, window: 60 },
      ]).message,
    ).toMatch(/repeats window 1m of entry 0/);
  });

  it('needs at least one scope in an account limits object; null clears a scope', () => {
    expect(issueOf(accountLimitsSchema, {}).message).toMatch(/at least one of: key, account/);
    expect(accountLimitsSchema.parse({ key: null })).toEqual({ key: null });
  });
});

describe('account bodies', () => {
  it('reads a full patch', () => {
    expect(
      patchAccountBody.parse({
        name: ' Acme ',
        billing: { status: 'suspended', creditBalance: -50 },
        limits: { key: [{ limit: 5, window: '1s' }], account: null },
      }),
    ).toEqual({
      name: 'Acme',
      billing: { status: 'suspended', creditBalance: -50 },
      limits: { key: [{ limit: 5, windowSeconds: 1 }], account: null },
    });
  });

  it.each([
    [{}, undefined, /at least one of: name, billing, limits/],
    [{ billing: {} }, 'billing', /at least one of: status, creditBalance/],
    [{ billing: { creditBalance: 1.5 } }, 'billing.creditBalance', /billing\.creditBalance/],
    [{ billing: { status: 'closed' } }, 'billing.status', /billing\.status/],
    [{ billing: { balance: 1 } }, 'billing.balance', /unknown field\(s\): billing\.balance/],
    [{ limits: { key: [{ limit: 1, window: '1x' }] } }, 'limits.key.0.window', /limits\.key\.0\.window/],
    [{ id: 'x' }, 'id', /unknown field\(s\): id/],
    [[], undefined, /^body: /],
    [null, undefined, /^body: /],
  ])('refuses %j naming %s', (body, field, message) => {
    const issue = issueOf(patchAccountBody, body);
    expect(issue.field).toBe(field);
    expect(issue.message).toMatch(message);
  });

  it('takes billing and limits on create too, each optional', () => {
    expect(createAccountBody.parse({ id: 'a', name: 'A' })).toEqual({ id: 'a', name: 'A' });
    expect(issueOf(createAccountBody, { id: 'a', name: 'A', billing: { status: 'x' } }).field).toBe('billing.status');
  });
});

describe('credit and key bodies', () => {
  it.each([0, 1.5, '5', 2 ** 53, null])('refuses the amount %j', (amount) => {
    expect(issueOf(creditBody, { amount }).field).toBe('amount');
  });

  it('takes negative amounts (debits)', () => {
    expect(creditBody.parse({ amount: -300 })).toEqual({ amount: -300 });
  });

  it('patches a key: limits null clears, unknown fields are named', () => {
    expect(patchKeyBody.parse({ limits: null })).toEqual({ limits: null });
    expect(issueOf(patchKeyBody, { limits: [{ limit: 1, window: '1m' }], status: 'revoked' }).field).toBe('status');
    expect(issueOf(patchKeyBody, {}).message).toMatch(/at least one of: name, limits/);
  });
});

describe('token budgets, spend caps and the usage query (issue 16)', () => {
  it('reads token budgets as {tokens, window}, refusing what the bucket arithmetic cannot take exactly', () => {
    expect(
      tokenBudgetListSchema.parse([
        { tokens: 100_000, window: '1m' },
        { tokens: 5_000_000, window: '1d' },
      ]),
    ).toEqual([
      { tokens: 100_000, windowSeconds: 60 },
      { tokens: 5_000_000, windowSeconds: 86_400 },
    ]);
    expect(issueOf(tokenBudgetListSchema, [{ tokens: 0, window: '1m' }])).toEqual({
      field: '0.tokens',
      message: expect.stringContaining('from 1 to 1000000000'),
    });
    expect(issueOf(tokenBudgetListSchema, [{ tokens: 1_000_000_001, window: '1d' }]).field).toBe('0.tokens');
    expect(issueOf(tokenBudgetListSchema, [{ tokens: 2_000_000, window: '1s' }])).toEqual({
      field: '0.tokens',
      message: '0.tokens: must be at most 1000000 tokens per second of window (1000000 for 1s)',
    });
    expect(
      issueOf(tokenBudgetListSchema, [
        { tokens: 1, window: '1m' },
        { tokens: 2, window: 60 },
      ]).field,
    ).toBe('1.window');
    expect(issueOf(tokenBudgetListSchema, [{ tokens: 1, window: '1m', limit: 3 }]).message).toContain('unknown field(s): 0.limit');
  });

  it('takes spend caps and budget overrides on accounts and keys, null removing them', () => {
    expect(
      patchAccountBody.parse({ billing: { monthlySpendCap: 5_000 }, tokenBudgets: { key: null, account: [{ tokens: 10, window: '1h' }] } }),
    ).toEqual({
      billing: { monthlySpendCap: 5_000 },
      tokenBudgets: { key: null, account: [{ tokens: 10, windowSeconds: 3600 }] },
    });
    expect(patchAccountBody.parse({ billing: { monthlySpendCap: null } })).toEqual({ billing: { monthlySpendCap: null } });
    expect(issueOf(patchAccountBody, { billing: { monthlySpendCap: 0 } })).toEqual({
      field: 'billing.monthlySpendCap',
      message: 'billing.monthlySpendCap: must be at least 1 (or null for no cap)',
    });
    expect(issueOf(patchAccountBody, { billing: { monthlySpendCap: 1.5 } }).field).toBe('billing.monthlySpendCap');
    expect(issueOf(patchAccountBody, { billing: { monthlySpendCap: 1e15 + 1 } }).field).toBe('billing.monthlySpendCap');
    expect(issueOf(patchAccountBody, { tokenBudgets: {} }).message).toMatch(/at least one of: key, account/);
    expect(createAccountBody.parse({ id: 'a', name: 'A', billing: { monthlySpendCap: 1 } }).billing).toEqual({ monthlySpendCap: 1 });
    expect(patchKeyBody.parse({ monthlySpendCap: null, tokenBudgets: [] })).toEqual({ monthlySpendCap: null, tokenBudgets: [] });
    expect(issueOf(patchKeyBody, { monthlySpendCap: -3 }).field).toBe('monthlySpendCap');
  });

  it('reads the usage query with defaults, and names the bad parameter', () => {
    expect(usageQuery.parse({})).toEqual({ granularity: 'day' });
    expect(
      usageQuery.parse({ from: '2026-11-22T00:00:00Z', to: '2026-11-23T00:00:00+01:00', granularity: 'hour', groupBy: 'model' }),
    ).toEqual({
      granularity: 'hour',
      groupBy: 'model',
      fromMs: Date.parse('2026-11-22T00:00:00Z'),
      toMs: Date.parse('2026-11-22T23:00:00Z'),
    });
    expect(issueOf(usageQuery, { granularity: 'week' })).toEqual({ field: 'granularity', message: 'granularity: must be "hour" or "day"' });
    expect(issueOf(usageQuery, { groupBy: 'account' }).field).toBe('groupBy');
    expect(issueOf(usageQuery, { from: 'yesterday' })).toEqual({ field: 'from', message: expect.stringContaining('ISO-8601') });
    expect(issueOf(usageQuery, { from: '2026-11-22' }).field).toBe('from');
    expect(issueOf(usageQuery, { limit: '3' }).message).toContain('unknown field(s): limit');
  });
});

describe('views', () => {
  const account: Account = {
    id: 'acme',
    name: 'Acme',
    status: 'active',
    creditBalance: 0,
    limits: { account: [{ limit: 10, windowSeconds: 90 }] },
    createdAt: '2025-01-01T00:00:00.000Z',
  };

  it('shows an account with windows as text and absent overrides as null; a 0 balance stays 0', () => {
    expect(accountView(account, Date.parse('2025-02-01T00:00:00Z'))).toEqual({
      id: 'acme',
      name: 'Acme',
      billing: {
        status: 'active',
        creditBalance: 0,
        monthlySpendCap: null,
        spentThisMonth: 0,
        creditShortfall: 0,
        currency: { code: 'USD', exponent: 6 },
        creditBalanceFormatted: '$0.00',
        monthlySpendCapFormatted: null,
        spentThisMonthFormatted: '$0.00',
        creditShortfallFormatted: '$0.00',
      },
      limits: { key: null, account: [{ limit: 10, window: '90s' }] },
      keyRestrictions: null,
      exposedKeyAction: 'revoke',
      maxActiveKeys: null,
      tokenBudgets: { key: null, account: null },
      createdAt: '2025-01-01T00:00:00.000Z',
    });
    expect(accountView({ ...account, maxActiveKeys: 0 }, 0).maxActiveKeys).toBe(0);
    expect(accountView({ id: 'b', name: 'B', status: 'suspended', createdAt: 'x' }, 0).billing).toEqual({
      status: 'suspended',
      creditBalance: null,
      monthlySpendCap: null,
      spentThisMonth: 0,
      creditShortfall: 0,
      currency: { code: 'USD', exponent: 6 },
      creditBalanceFormatted: null,
      monthlySpendCapFormatted: null,
      spentThisMonthFormatted: '$0.00',
      creditShortfallFormatted: '$0.00',
    });
  });

  it("shows the spend cap, this month's spend (UTC), the shortfall and token budgets with windows as text", () => {
    const spending: Account = {
      ...account,
      monthlySpendCap: 5_000,
      monthlySpend: { '2025-01': 1_200, '2025-02': 30 },
      creditShortfall: 7,
      tokenBudgets: { key: [{ tokens: 100_000, windowSeconds: 60 }], account: [] },
    };
    expect(accountView(spending, Date.parse('2025-01-31T23:59:59.999Z'))).toMatchObject({
      billing: { monthlySpendCap: 5_000, spentThisMonth: 1_200, creditShortfall: 7 },
      tokenBudgets: { key: [{ tokens: 100_000, window: '1m' }], account: [] },
    });
    expect(accountView(spending, Date.parse('2025-02-01T00:00:00Z')).billing.spentThisMonth).toBe(30);
    // Issue 35: each amount also as money, in the operator's currency.
    expect(accountView(spending, Date.parse('2025-01-31T23:59:59.999Z'), { code: 'EUR', exponent: 2 }).billing).toMatchObject({
      currency: { code: 'EUR', exponent: 2 },
      creditBalanceFormatted: '€0.00',
      monthlySpendCapFormatted: '€50.00',
      spentThisMonthFormatted: '€12.00',
      creditShortfallFormatted: '€0.07',
    });
    expect(accountView(spending, Date.parse('2025-03-01T00:00:00Z')).billing.spentThisMonth).toBe(0);
  });

  it('copies only the listed key fields, so nothing else on a record can leak', () => {
    const record = {
      id: 'key_1',
      accountId: 'acme',
      prefix: 'gk_live_AbC4',
      name: 'n',
      environment: 'live',
      status: 'revoked',
      createdAt: 'c',
      expiresAt: 'e',
      limits: [{ limit: 1, windowSeconds: 3600 }],
      hash: 'f'.repeat(64),
    } as StoredKey;
    expect(keyView(record, 0)).toEqual({
      id: 'key_1',
      accountId: 'acme',
      prefix: 'gk_live_AbC4',
      name: 'n',
      environment: 'live',
      status: 'revoked',
      createdAt: 'c',
      expiresAt: 'e',
      lastUsedAt: null,
      revokedAt: null,
      revokeAt: null,
      replaces: null,
      restrictions: null,
      replacedBy: null,
      limits: [{ limit: 1, window: '1h' }],
      createdBy: null,
      tokenBudgets: null,
      monthlySpendCap: null,
      monthlySpendCapFormatted: null,
    });
    expect(keyView({ ...record, createdBy: { kind: 'member', issuer: 'https://i', subject: 's' } }, 0).createdBy).toEqual({
      kind: 'member',
      issuer: 'https://i',
      subject: 's',
    });
  });

  it('shows the status a request would get now: revoked after a grace period, expired after expiry', () => {
    const base = { id: 'k', accountId: 'a', prefix: 'p', name: 'n', environment: 'live', status: 'active', createdAt: 'c' } as StoredKey;
    const t = Date.parse('2027-01-01T00:00:00Z');
    expect(keyView({ ...base, revokeAt: '2027-01-01T00:00:00.000Z' }, t - 1).status).toBe('active');
    expect(keyView({ ...base, revokeAt: '2027-01-01T00:00:00.000Z' }, t).status).toBe('revoked');
    expect(keyView({ ...base, expiresAt: '2027-01-01T00:00:00.000Z' }, t).status).toBe('expired');
  });
});
