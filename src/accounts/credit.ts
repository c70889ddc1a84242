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

/**
 * The header a billing system sends so that a credit adjustment it repeats
 * (after a timeout or a dropped connection) is applied at most once, as
 * Stripe's `Idempotency-Key`. Lower case, as Node hands header names over.
 */
export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key';
/** Set to `true` on an answer that repeats a first one instead of applying the adjustment again. */
export const IDEMPOTENT_REPLAYED_HEADER = 'idempotent-replayed';
export const IDEMPOTENCY_KEY_MAX_LENGTH = 255;

/**
 * Why a value cannot be an idempotency key, or undefined when it can: 1 to
 * 255 printable ASCII characters (space to `~`). Stripe's length, and
 * nothing a header, a log line or a Redis key name would mangle.
 */
export function idempotencyKeyProblem(key: string): string | undefined {
  if (key.length === 0) return 'is empty';
  if (key.length > IDEMPOTENCY_KEY_MAX_LENGTH) {
    return `is ${key.length} characters long; at most ${IDEMPOTENCY_KEY_MAX_LENGTH} are allowed`;
  }
  const bad = /[^\x20-\x7e]/.exec(key);
  if (bad) {
    const code = (key.codePointAt(bad.index) ?? 0).toString(16).toUpperCase().padStart(4, '0');
    return `holds U+${code} at position ${bad.index + 1}; only printable ASCII (space to ~) is allowed`;
  }
  // HTTP drops spaces around a header value, so the key that arrived would not be the key that was sent.
  if (key.startsWith(' ') || key.endsWith(' ')) return 'starts or ends with a space';
  return undefined;
}
