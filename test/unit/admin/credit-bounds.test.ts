import { createAccountBody, creditBody, patchAccountBody } from '../../../src/admin/admin-schemas';
import { adjustCreditBalance, CREDIT_LIMIT_MINOR_UNITS, isCreditInBounds } from '../../../src/accounts/credit';

describe('the credit bound', () => {
  it('is exact as a JS number and as a Lua double, even summed with an amount', () => {
    expect(Number.isSafeInteger(2 * CREDIT_LIMIT_MINOR_UNITS)).toBe(true);
    expect(CREDIT_LIMIT_MINOR_UNITS).toBe(10 ** 15);
  });

  it.each([0, 1, -1, CREDIT_LIMIT_MINOR_UNITS, -CREDIT_LIMIT_MINOR_UNITS])('holds %d', (value) => {
    expect(isCreditInBounds(value)).toBe(true);
  });

  it.each([CREDIT_LIMIT_MINOR_UNITS + 1, -CREDIT_LIMIT_MINOR_UNITS - 1, Number.MAX_SAFE_INTEGER, 0.5, Number.NaN, Infinity])(
    'refuses %d',
    (value) => {
      expect(isCreditInBounds(value)).toBe(false);
    },
  );

  it('adjusts within the bounds and refuses one unit past either', () => {
    expect(adjustCreditBalance(CREDIT_LIMIT_MINOR_UNITS - 1, 1)).toEqual({ kind: 'ok', creditBalance: CREDIT_LIMIT_MINOR_UNITS });
    expect(adjustCreditBalance(CREDIT_LIMIT_MINOR_UNITS, 1).kind).toBe('balance_out_of_range');
    expect(adjustCreditBalance(-CREDIT_LIMIT_MINOR_UNITS, -1).kind).toBe('balance_out_of_range');
    expect(adjustCreditBalance(CREDIT_LIMIT_MINOR_UNITS, -2 * CREDIT_LIMIT_MINOR_UNITS)).toEqual({
      kind: 'ok',
      creditBalance: -CREDIT_LIMIT_MINOR_UNITS,
    });
  });
});

describe('admin bodies', () => {
  it('takes amounts and balances at the bound and refuses one past it, naming the bound', () => {
    expect(creditBody.safeParse({ amount: CREDIT_LIMIT_MINOR_UNITS }).success).toBe(true);
    expect(creditBody.safeParse({ amount: -CREDIT_LIMIT_MINOR_UNITS }).success).toBe(true);
    const tooMuch = creditBody.safeParse({ amount: CREDIT_LIMIT_MINOR_UNITS + 1 });
    expect(tooMuch.error?.issues[0]?.message).toContain('at most 1000000000000000');
    const tooLittle = creditBody.safeParse({ amount: -CREDIT_LIMIT_MINOR_UNITS - 1 });
    expect(tooLittle.error?.issues[0]?.message).toContain('at least -1000000000000000');
    const base = { id: 'a', name: 'A' };
    expect(createAccountBody.safeParse({ ...base, billing: { creditBalance: CREDIT_LIMIT_MINOR_UNITS } }).success).toBe(true);
    expect(createAccountBody.safeParse({ ...base, billing: { creditBalance: CREDIT_LIMIT_MINOR_UNITS + 1 } }).success).toBe(false);
    expect(patchAccountBody.safeParse({ billing: { creditBalance: -CREDIT_LIMIT_MINOR_UNITS - 1 } }).success).toBe(false);
    expect(patchAccountBody.safeParse({ billing: { creditBalance: null } }).success).toBe(true);
  });
});
