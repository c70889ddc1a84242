import { MAX_PRICE_PER_MILLION_TOKENS, priceEntryFor, type PriceTable, type TokenPrices } from '../domain/pricing';
import { MAX_TOKEN_COUNT, type TokenCounts } from '../domain/usage';

export const MAX_MODEL_PATTERN_LENGTH = 256;

/** What is wrong with a model pattern, or undefined when it is fine. */
export function modelPatternProblem(pattern: string): string | undefined {
  if (pattern.length === 0 || pattern.length > MAX_MODEL_PATTERN_LENGTH) return `must be 1 to ${MAX_MODEL_PATTERN_LENGTH} characters`;
  // eslint-disable-next-line no-control-regex
  if (/[\s\u0000-\u001f\u007f]/.test(pattern)) return 'must not contain whitespace or control characters';
  const star = pattern.indexOf('*');
  if (star !== -1 && star !== pattern.length - 1) return 'may hold \'*\' only as its last character (a prefix such as "gpt-4o-mini*")';
  return undefined;
}

/**
 * Entries that can never match because an earlier one takes every model they
 * would (first match wins): a duplicate, or anything under an earlier
 * prefix, e.g. `gpt-4o-mini*` after `gpt-4o*`. Such a table is refused, so
 * the operator's intended price is never silently replaced. Undefined
 * stands for an entry that is invalid for another reason, reported apart.
 */
export function shadowedEntries(patterns: readonly (string | undefined)[]): { index: number; by: number }[] {
  const shadowed: { index: number; by: number }[] = [];
  patterns.forEach((pattern, index) => {
    if (pattern === undefined) return;
    const by = patterns
      .slice(0, index)
      .findIndex(
        (earlier) => earlier !== undefined && (earlier.endsWith('*') ? pattern.startsWith(earlier.slice(0, -1)) : earlier === pattern),
      );
    if (by !== -1) shadowed.push({ index, by });
  });
  return shadowed;
}

/**
 * The `model` label of the usage metrics: the price table's pattern that
 * prices the model (`gpt-4o-mini*` for every dated snapshot), else `other`.
 * Bounded by the table's 1,000 entries, whatever names answers carry.
 */
export function modelMetricLabel(table: PriceTable | undefined, model: string | undefined): string {
  const entry = table && model !== undefined ? priceEntryFor(table, model) : undefined;
  return entry?.pattern ?? 'other';
}

/**
 * The prices a response is charged at: its model's entry, else the default
 * prices (see PriceTable.defaultPrices for why even under `refuse`).
 * `pattern` is undefined when the default applied.
 */
export function chargedPrices(table: PriceTable, model: string | undefined): { prices: TokenPrices; pattern: string | undefined } {
  const entry = model === undefined ? undefined : priceEntryFor(table, model);
  return entry ? { prices: entry.prices, pattern: entry.pattern } : { prices: table.defaultPrices, pattern: undefined };
}

export interface Cost {
  /** What the account is charged: the exact cost rounded up to a whole minor unit. */
  readonly minorUnits: number;
  /** The exact cost in millionths of a minor unit (tokens × price per million tokens). */
  readonly exactMillionths: bigint;
}

const MILLION = 1_000_000n;

/**
 * The cost of one response. Computed exactly (BigInt: a count × a price
 * reaches 10^20, past 2^53), then rounded up once, per response, to a whole
 * minor unit: a response is never free because its exact cost is a fraction,
 * and every recorded cost is an integer, so any sum of them (a balance, an
 * invoice, a usage report) is exact and equals the sum of the debits. The
 * rounding adds less than one minor unit per response; choose the minor unit
 * accordingly (with cents, a "hi" to a cheap model costs 1 cent; with
 * micro-units of a currency the rounding is below 10^-6 of it).
 *
 * Bounds: each count at most MAX_TOKEN_COUNT (10^9), each price at most
 * MAX_PRICE_PER_MILLION_TOKENS (10^11), so the result is at most
 * MAX_RESPONSE_COST_MINOR_UNITS (4 × 10^14), inside the credit bound.
 */
export function costOf(tokens: TokenCounts, prices: TokenPrices): Cost {
  const oneHourWrites = tokens.cacheCreation1hTokens ?? 0;
  if (!Number.isSafeInteger(oneHourWrites) || oneHourWrites < 0 || oneHourWrites > tokens.cacheCreationTokens)
    throw new RangeError(`1-hour cache writes ${oneHourWrites} are outside 0..${tokens.cacheCreationTokens} (the cache writes)`);
  const pairs: [number, number][] = [
    [tokens.inputTokens, prices.input],
    [tokens.outputTokens, prices.output],
    [tokens.cachedInputTokens, prices.cachedInput],
    [tokens.cacheCreationTokens - oneHourWrites, prices.cacheCreation],
    [oneHourWrites, prices.cacheCreation1h],
  ];
  let exactMillionths = 0n;
  for (const [count, price] of pairs) {
    if (!Number.isSafeInteger(count) || count < 0 || count > MAX_TOKEN_COUNT)
      throw new RangeError(`token count ${count} is outside 0..${MAX_TOKEN_COUNT}`);
    if (!Number.isSafeInteger(price) || price < 0 || price > MAX_PRICE_PER_MILLION_TOKENS) {
      throw new RangeError(`price ${price} is outside 0..${MAX_PRICE_PER_MILLION_TOKENS}`);
    }
    exactMillionths += BigInt(count) * BigInt(price);
  }
  return { minorUnits: Number((exactMillionths + MILLION - 1n) / MILLION), exactMillionths };
}
