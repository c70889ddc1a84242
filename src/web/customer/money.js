// @ts-check
/**
 * Money on the customer page, by the rules of src/accounts/money.ts (the server's; test/unit/customer/page-money.test.ts
 * holds the two to the same answers): an amount is an integer count of the currency's units, 10^-exponent of it,
 * shown exactly ("$0.0042"), with at least the currency's usual fraction digits, in en-US as every other word of the
 * pages.
 */

/** @typedef {{ code: string, exponent: number }} Currency */

/**
 * The exact decimal text of `units`, e.g. 4200 at exponent 6 → "0.0042", from the integer's digits (a division in
 * floating point could print a neighbouring amount).
 * @param {number} units
 * @param {number} exponent
 */
export function decimalText(units, exponent) {
  const value = BigInt(units);
  const digits = (value < 0n ? -value : value).toString().padStart(exponent + 1, '0');
  const whole = digits.slice(0, digits.length - exponent);
  const fraction = digits.slice(digits.length - exponent).replace(/0+$/, '');
  return `${value < 0n ? '-' : ''}${whole}${fraction ? `.${fraction}` : ''}`;
}

/**
 * "$0.0042" for 4200 units of USD at exponent 6: every digit of the amount, trailing zeros not.
 * @param {number} units
 * @param {Currency} currency
 */
export function formatMoney(units, currency) {
  const text = decimalText(units, currency.exponent);
  const shownDigits = text.includes('.') ? text.length - text.indexOf('.') - 1 : 0;
  const usual = new Intl.NumberFormat('en-US', { style: 'currency', currency: currency.code }).resolvedOptions().maximumFractionDigits ?? 2;
  const format = new Intl.NumberFormat('en-US', {
    style: 'currency',
    currency: currency.code,
    minimumFractionDigits: usual,
    maximumFractionDigits: Math.max(shownDigits, usual),
  });
  // Intl formats a decimal string exactly (ECMA-402 reads it as a mathematical value); the DOM typing lags behind.
  return format.format(/** @type {any} */ (text));
}

/**
 * The units of an amount a person typed in the currency ("25", "0.5", "1,000.25"), or why it is not one: a
 * non-negative decimal with at most `exponent` fraction digits, small enough to count exactly.
 * @param {string} typed
 * @param {Currency} currency
 * @returns {{ units: number } | { problem: string }}
 */
export function parseMoney(typed, currency) {
  const text = typed.trim().replaceAll(',', '');
  const match = /^(\d+)(?:\.(\d+))?$/.exec(text);
  if (!match) return { problem: `Enter an amount in ${currency.code}, such as 25 or 0.50.` };
  const fraction = match[2] ?? '';
  if (fraction.length > currency.exponent) {
    const most = currency.exponent === 0 ? 'are whole numbers' : `have at most ${currency.exponent} digits after the point`;
    return { problem: `${currency.code} amounts here ${most}.` };
  }
  const units = BigInt(match[1] ?? '0') * 10n ** BigInt(currency.exponent) + BigInt(fraction.padEnd(currency.exponent, '0') || '0');
  if (units > BigInt(Number.MAX_SAFE_INTEGER)) return { problem: 'That amount is too large.' };
  return { units: Number(units) };
}
