/**
 * Money as a person reads it. Every amount (price, cost, balance, spend, cap) is an integer count of the operator's
 * unit: 10^-exponent of the currency (USD with exponent 6 counts micro-dollars). This module turns such an integer
 * into "$0.0042": the exact amount, never rounded, with as many fraction digits as it needs and at least the
 * currency's usual ones. Everything that shows money to a person goes through `formatMoney`.
 */

export interface Currency {
  /** ISO 4217 code, e.g. USD. */
  readonly code: string;
  /** Amounts are counted in 10^-exponent of the currency: 2 counts cents, 6 micro-units. */
  readonly exponent: number;
}

/**
 * Micro-units: a short answer costs a few hundred of them, so rounding each answer up to a whole unit adds at most
 * a millionth of the currency, where cents would make every tiny call cost a cent.
 */
export const DEFAULT_CURRENCY: Currency = Object.freeze({ code: 'USD', exponent: 6 });

/** 0 counts whole currency units; 9 (nano-units) already leaves ±10^15 units at ±1,000,000 of the currency. */
export const MAX_CURRENCY_EXPONENT = 9;

/** One fixed locale: every other word the dashboards, the CLI and the API print is en-US English too. */
const MONEY_LOCALE = 'en-US';

/** The ISO 4217 codes the runtime can format; anything else would be printed as a bare code or throw. */
export function isKnownCurrencyCode(code: string): boolean {
  return /^[A-Z]{3}$/.test(code) && Intl.supportedValuesOf('currency').includes(code);
}

/** A currency setting's problem, or undefined when it is usable. */
export function currencyProblem(currency: Currency): string | undefined {
  if (!isKnownCurrencyCode(currency.code)) return `code: '${currency.code}' is not an ISO 4217 currency code (such as USD or EUR)`;
  if (!Number.isInteger(currency.exponent) || currency.exponent < 0 || currency.exponent > MAX_CURRENCY_EXPONENT) {
    return `exponent: must be a whole number from 0 to ${MAX_CURRENCY_EXPONENT} (got ${currency.exponent})`;
  }
  return undefined;
}

const formatters = new Map<string, Intl.NumberFormat>();

/** `fractionDigits` ≥ `usualDigits`: the currency's usual digits are always shown, more only when the amount has them. */
function formatterFor(code: string, fractionDigits: number, usualDigits: number): Intl.NumberFormat {
  const cacheKey = `${code}:${fractionDigits}`;
  let formatter = formatters.get(cacheKey);
  if (!formatter) {
    formatter = new Intl.NumberFormat(MONEY_LOCALE, {
      style: 'currency',
      currency: code,
      minimumFractionDigits: usualDigits,
      maximumFractionDigits: fractionDigits,
    });
    formatters.set(cacheKey, formatter);
  }
  return formatter;
}

const usualDigitsByCode = new Map<string, number>();

/** The fraction digits the currency is usually written with (USD 2, JPY 0). */
function usualFractionDigits(code: string): number {
  let digits = usualDigitsByCode.get(code);
  if (digits === undefined) {
    digits = new Intl.NumberFormat(MONEY_LOCALE, { style: 'currency', currency: code }).resolvedOptions().maximumFractionDigits ?? 2;
    usualDigitsByCode.set(code, digits);
  }
  return digits;
}

/**
 * The exact decimal text of `amount` units, e.g. 4200 at exponent 6 → "0.0042", built from the integer's digits:
 * a division in floating point could print a neighbouring amount.
 */
export function decimalText(amount: number | bigint, exponent: number): string {
  if (typeof amount === 'number' && !Number.isSafeInteger(amount)) throw new RangeError(`not a whole number of units: ${amount}`);
  const value = BigInt(amount);
  const digits = (value < 0n ? -value : value).toString().padStart(exponent + 1, '0');
  const whole = digits.slice(0, digits.length - exponent);
  const fraction = digits.slice(digits.length - exponent).replace(/0+$/, '');
  return `${value < 0n ? '-' : ''}${whole}${fraction ? `.${fraction}` : ''}`;
}

/** "$0.0042" for 4200 units of USD at exponent 6; every digit of the amount is shown, trailing zeros are not. */
export function formatMoney(amount: number | bigint, currency: Currency): string {
  const text = decimalText(amount, currency.exponent);
  const shownDigits = text.includes('.') ? text.length - text.indexOf('.') - 1 : 0;
  const usual = usualFractionDigits(currency.code);
  // Intl formats a decimal string exactly (ECMA-402 reads it as a mathematical value); the lib typing lags behind.
  return formatterFor(currency.code, Math.max(shownDigits, usual), usual).format(text as unknown as number);
}

/** What the API answers beside its integer amounts, so a client knows what they count. */
export function currencyView(currency: Currency): { code: string; exponent: number } {
  return { code: currency.code, exponent: currency.exponent };
}
