import { decimalText, DEFAULT_CURRENCY, formatMoney } from '../../../src/accounts/money';

const USD_MICRO = { code: 'USD', exponent: 6 };

describe('formatMoney: an integer count of 10^-exponent units as money a person reads', () => {
  it('shows every digit of the amount, at least the usual ones, and no trailing zeros beyond them', () => {
    expect(formatMoney(4_200, USD_MICRO)).toBe('$0.0042');
    expect(formatMoney(1_500_000, USD_MICRO)).toBe('$1.50');
    expect(formatMoney(1_234_567, USD_MICRO)).toBe('$1.234567');
    expect(formatMoney(120, { code: 'USD', exponent: 2 })).toBe('$1.20');
  });

  it('at its bounds: 0, one unit, 10^15 units and their negatives, exactly', () => {
    expect(formatMoney(0, USD_MICRO)).toBe('$0.00');
    expect(formatMoney(1, USD_MICRO)).toBe('$0.000001');
    expect(formatMoney(-1, USD_MICRO)).toBe('-$0.000001');
    expect(formatMoney(1_000_000_000_000_000, USD_MICRO)).toBe('$1,000,000,000.00');
    expect(formatMoney(-1_000_000_000_000_000, USD_MICRO)).toBe('-$1,000,000,000.00');
    expect(formatMoney(999_999_999_999_999, USD_MICRO)).toBe('$999,999,999.999999');
    // The largest safe integer: ÷ 10^6 in floating point prints 9007199254.740992, a unit too much.
    expect(formatMoney(Number.MAX_SAFE_INTEGER, USD_MICRO)).toBe('$9,007,199,254.740991');
    expect(formatMoney(1_000_000_000_000_001n, { code: 'USD', exponent: 9 })).toBe('$1,000,000.000000001');
  });

  it('counts in the currency the operator names, with its usual digits', () => {
    expect(formatMoney(4_200, { code: 'EUR', exponent: 6 })).toBe('€0.0042');
    expect(formatMoney(1_500, { code: 'JPY', exponent: 0 })).toBe('¥1,500');
    expect(formatMoney(15, { code: 'JPY', exponent: 1 })).toBe('¥1.5');
    expect(formatMoney(7, { code: 'USD', exponent: 0 })).toBe('$7.00');
  });

  it('never takes a number that is not a whole count of units', () => {
    expect(() => formatMoney(0.5, USD_MICRO)).toThrow(RangeError);
    expect(() => formatMoney(2 ** 53, USD_MICRO)).toThrow(RangeError);
  });

  it('builds the decimal from the digits, never by floating division', () => {
    expect(decimalText(0, 6)).toBe('0');
    expect(decimalText(1, 9)).toBe('0.000000001');
    expect(decimalText(-4_200, 6)).toBe('-0.0042');
    expect(decimalText(123, 0)).toBe('123');
    expect(decimalText(Number.MAX_SAFE_INTEGER, 9)).toBe('9007199.254740991');
  });

  it('defaults to micro-dollars', () => {
    expect(DEFAULT_CURRENCY).toEqual({ code: 'USD', exponent: 6 });
  });
});
