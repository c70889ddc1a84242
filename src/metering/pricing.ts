import { createHash } from 'node:crypto';
import type { Currency } from '../accounts/money';
import {
  chargedPrices,
  MAX_FEE_PER_CALL,
  MAX_PRICE_PER_MILLION_TOKENS,
  priceEntryFor,
  type PriceTable,
  type TokenPrices,
} from './price-table';
import { MAX_CALL_COUNT, MAX_TOKEN_COUNT, type TokenCounts } from './usage';
import type { UsageCharge } from './usage-record';

// Chosen in the domain, where Check's credit holds choose them too; metering's callers import them from here.
export { chargedPrices, tierFor, type ChargedPrices } from './price-table';

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

/** The prompt's size as long-context tiers see it: every input-side token (uncached input, cache reads, cache writes). */
export function promptTokensOf(tokens: TokenCounts): number {
  return tokens.inputTokens + tokens.cachedInputTokens + tokens.cacheCreationTokens;
}

export interface Cost {
  /** What the account is charged: the exact cost rounded up to a whole minor unit. */
  readonly minorUnits: number;
  /** The exact cost in millionths of a minor unit: Σ tokens × price per million tokens, + calls × fee × 10^6. */
  readonly exactMillionths: bigint;
}

const MILLION = 1_000_000n;

function checkedCount(count: number, max: number, what: string): number {
  if (!Number.isSafeInteger(count) || count < 0 || count > max) throw new RangeError(`${what} ${count} is outside 0..${max}`);
  return count;
}

function checkedPrice(price: number, max: number): bigint {
  if (!Number.isSafeInteger(price) || price < 0 || price > max) throw new RangeError(`price ${price} is outside 0..${max}`);
  return BigInt(price);
}

/** A count and the parts of it priced apart; what is left of it is priced at the count's own price. */
function split(total: number, parts: readonly [number | undefined, number][], price: number): [number, number][] {
  const pieces: [number, number][] = [];
  let rest = total;
  for (const [part = 0, partPrice] of parts) {
    checkedCount(part, MAX_TOKEN_COUNT, 'token count');
    rest -= part;
    pieces.push([part, partPrice]);
  }
  if (rest < 0) throw new RangeError(`the parts of a count of ${total} exceed it`);
  pieces.push([rest, price]);
  return pieces;
}

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
 * Each part (1-hour writes, reasoning, audio, image) is priced at its own
 * price and the rest of its count at the count's, so nothing is charged
 * twice. Bounds: each count at most MAX_TOKEN_COUNT, each price at most
 * MAX_PRICE_PER_MILLION_TOKENS, at most MAX_CALL_COUNT calls at
 * MAX_FEE_PER_CALL, so the result is at most MAX_RESPONSE_COST_MINOR_UNITS.
 */
export function costOf(tokens: TokenCounts, prices: TokenPrices): Cost {
  const pieces: [number, number][] = [
    ...split(
      tokens.inputTokens,
      [
        [tokens.inputAudioTokens, prices.inputAudio],
        [tokens.inputImageTokens, prices.inputImage],
      ],
      prices.input,
    ),
    ...split(
      tokens.outputTokens,
      [
        [tokens.reasoningTokens, prices.reasoning],
        [tokens.outputAudioTokens, prices.outputAudio],
        [tokens.outputImageTokens, prices.outputImage],
      ],
      prices.output,
    ),
    [tokens.cachedInputTokens, prices.cachedInput],
    ...split(tokens.cacheCreationTokens, [[tokens.cacheCreation1hTokens, prices.cacheCreation1h]], prices.cacheCreation),
  ];
  let exactMillionths = 0n;
  for (const [count, price] of pieces) {
    exactMillionths += BigInt(checkedCount(count, MAX_TOKEN_COUNT, 'token count')) * checkedPrice(price, MAX_PRICE_PER_MILLION_TOKENS);
  }
  const calls = checkedCount(tokens.webSearchCalls ?? 0, MAX_CALL_COUNT, 'web search calls');
  exactMillionths += BigInt(calls) * checkedPrice(prices.webSearchCall, MAX_FEE_PER_CALL) * MILLION;
  return { minorUnits: Number((exactMillionths + MILLION - 1n) / MILLION), exactMillionths };
}

/**
 * The price table's identity: the first 16 hex digits of the SHA-256 of its
 * canonical JSON (keys sorted, every fallback filled in) together with the
 * currency its integers count. Each usage record names it, so a record can be
 * re-priced against exactly the table that priced it; any change of a price
 * (or of what a fallback resolves to) changes it.
 */
export function priceTableHash(table: PriceTable, currency: Currency): string {
  const canonical = canonicalJson({ currency: { code: currency.code, exponent: currency.exponent }, pricing: table });
  return createHash('sha256').update(canonical).digest('hex').slice(0, PRICE_TABLE_HASH_HEX_DIGITS);
}

/** 64 bits: no two tables an operator ever runs collide by chance. */
export const PRICE_TABLE_HASH_HEX_DIGITS = 16;

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const entries = Object.entries(value)
      .filter(([, member]) => member !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, member]) => `${JSON.stringify(key)}:${canonicalJson(member)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** The price table as the usage ledger applies it: the table, the currency its integers count, and its identity. */
export interface Pricing {
  readonly table: PriceTable;
  readonly currency: Currency;
  readonly tableHash: string;
}

/** Hashed once, at start. */
export function pricingOf(table: PriceTable, currency: Currency): Pricing {
  return { table, currency, tableHash: priceTableHash(table, currency) };
}

/** What one answer is charged, and everything a billing system needs to re-price it from its record. */
export function chargeOf(
  pricing: Pricing,
  model: string | undefined,
  tokens: TokenCounts,
): { costMinorUnits: number; charge: UsageCharge } {
  const charged = chargedPrices(pricing.table, model, promptTokensOf(tokens));
  const cost = costOf(tokens, charged.prices);
  return {
    costMinorUnits: cost.minorUnits,
    charge: {
      priceTableHash: pricing.tableHash,
      ...(charged.pattern !== undefined ? { pricePattern: charged.pattern } : {}),
      ...(charged.tierAboveInputTokens !== undefined ? { tierAboveInputTokens: charged.tierAboveInputTokens } : {}),
      exactCostMillionths: cost.exactMillionths.toString(),
      currency: pricing.currency,
    },
  };
}
