/**
 * Prepaid credit is counted in integer minor units (cents, or the smallest
 * unit of the operator's currency). Balances and single adjustments stay
 * within ±CREDIT_LIMIT_MINOR_UNITS, so every balance, every amount and every
 * sum of the two is an exact integer both as a JS number and as a Lua double
 * (2 × 10^15 < 2^53): nothing is ever rounded.
 */
export const CREDIT_LIMIT_MINOR_UNITS = 1_000_000_000_000_000;

export function isCreditInBounds(minorUnits: number): boolean {
  return Number.isSafeInteger(minorUnits) && Math.abs(minorUnits) <= CREDIT_LIMIT_MINOR_UNITS;
}

export type CreditAdjustment = { kind: 'ok'; creditBalance: number } | { kind: 'balance_out_of_range'; creditBalance: number };

/** The balance after adding `amount`, or why it is refused; the caller writes nothing when refused. */
export function adjustCreditBalance(balance: number, amount: number): CreditAdjustment {
  const creditBalance = balance + amount;
  return isCreditInBounds(creditBalance) ? { kind: 'ok', creditBalance } : { kind: 'balance_out_of_range', creditBalance };
}
