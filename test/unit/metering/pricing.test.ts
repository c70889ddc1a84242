import fc from 'fast-check';
import { CREDIT_LIMIT_MINOR_UNITS, isCreditInBounds } from '../../../src/domain/credit';
import {
  isModelRefused,
  matchesModelPattern,
  MAX_PRICE_PER_MILLION_TOKENS,
  MAX_RESPONSE_COST_MINOR_UNITS,
  priceEntryFor,
  type PriceTable,
  type TokenPrices,
} from '../../../src/domain/pricing';
import { MAX_TOKEN_COUNT, type TokenCounts } from '../../../src/domain/usage';
import { chargedPrices, costOf, modelPatternProblem, shadowedEntries } from '../../../src/metering/pricing';
import { tokens } from '../../support/usage-fixtures';

const prices = (
  input: number,
  output: number,
  cachedInput = input,
  cacheCreation = input,
  cacheCreation1h = cacheCreation,
): TokenPrices => ({
  input,
  output,
  cachedInput,
  cacheCreation,
  cacheCreation1h,
});

const table = (unpricedModels: PriceTable['unpricedModels']): PriceTable => ({
  models: [
    { pattern: 'gpt-4o-mini*', prices: prices(150_000, 600_000, 75_000) },
    { pattern: 'gpt-4o*', prices: prices(2_500_000, 10_000_000, 1_250_000) },
    { pattern: 'claude-sonnet-4-5-20250929', prices: prices(3_000_000, 15_000_000, 300_000, 3_750_000) },
  ],
  defaultPrices: prices(10_000_000, 30_000_000),
  unpricedModels,
});

describe('model patterns', () => {
  it('an exact name matches only itself; a trailing * matches the prefix', () => {
    expect(matchesModelPattern('gpt-4o', 'gpt-4o')).toBe(true);
    expect(matchesModelPattern('gpt-4o', 'gpt-4o-2024-08-06')).toBe(false);
    expect(matchesModelPattern('gpt-4o*', 'gpt-4o-2024-08-06')).toBe(true);
    expect(matchesModelPattern('gpt-4o*', 'gpt-4o')).toBe(true);
    expect(matchesModelPattern('gpt-4o*', 'gpt-4')).toBe(false);
    expect(matchesModelPattern('*', 'anything')).toBe(true);
    // Dots and other characters are literal.
    expect(matchesModelPattern('gemini-2.5-flash', 'gemini-2x5-flash')).toBe(false);
  });

  it('the first matching entry wins', () => {
    expect(priceEntryFor(table('refuse'), 'gpt-4o-mini-2024-07-18')?.pattern).toBe('gpt-4o-mini*');
    expect(priceEntryFor(table('refuse'), 'gpt-4o-2024-08-06')?.pattern).toBe('gpt-4o*');
    expect(priceEntryFor(table('refuse'), 'claude-sonnet-4-5')).toBeUndefined();
  });

  it.each([
    ['', 'must be 1 to 256 characters'],
    ['x'.repeat(257), 'must be 1 to 256 characters'],
    ['gpt 4o', 'must not contain whitespace or control characters'],
    ['gpt-*-mini', "may hold '*' only as its last character"],
    ['**', "may hold '*' only as its last character"],
  ])('refuses the pattern %j', (pattern, problem) => {
    expect(modelPatternProblem(pattern)).toContain(problem);
  });

  it.each(['gpt-4o', 'gpt-4o*', '*', 'models/gemini-2.5-pro', 'x'.repeat(256)])('accepts the pattern %j', (pattern) => {
    expect(modelPatternProblem(pattern)).toBeUndefined();
  });

  it('finds entries an earlier one shadows: duplicates and anything under an earlier prefix', () => {
    expect(shadowedEntries(['gpt-4o*', 'gpt-4o-mini*', 'gpt-4o-mini', 'claude*', 'claude*', 'o3', 'o3', 'o3-mini'])).toEqual([
      { index: 1, by: 0 },
      { index: 2, by: 0 },
      { index: 4, by: 3 },
      { index: 6, by: 5 },
    ]);
    expect(shadowedEntries(['gpt-4o-mini*', 'gpt-4o*', 'gpt-4o'])).toEqual([{ index: 2, by: 1 }]);
    // An entry invalid for another reason (undefined) neither shadows nor is shadowed.
    expect(shadowedEntries(['a*', undefined, 'ab', undefined])).toEqual([{ index: 2, by: 0 }]);
  });
});

describe('models without a price', () => {
  it('refuse: refused at Check time when the model is known; a response of one is still charged the default', () => {
    const refusing = table('refuse');
    expect(isModelRefused(refusing, 'mistral-large')).toBe(true);
    expect(isModelRefused(refusing, 'gpt-4o-mini')).toBe(false);
    expect(chargedPrices(refusing, 'mistral-large')).toEqual({ prices: refusing.defaultPrices, pattern: undefined });
  });

  it('charge-default: never refused, charged the default', () => {
    const charging = table('charge-default');
    expect(isModelRefused(charging, 'mistral-large')).toBe(false);
    expect(chargedPrices(charging, 'mistral-large').prices).toEqual(charging.defaultPrices);
    expect(chargedPrices(charging, undefined).prices).toEqual(charging.defaultPrices);
    expect(chargedPrices(charging, 'gpt-4o-mini')).toEqual({ prices: prices(150_000, 600_000, 75_000), pattern: 'gpt-4o-mini*' });
  });
});

describe('cost: exact, rounded up once per response to a whole minor unit', () => {
  it('sums count × price per million over the four counts', () => {
    // Per token: 2.5, 10 and 1.25 minor units. 1,000 × 2.5 + 200 × 10 + 3,000 × 1.25 = 8,250.
    const cost = costOf(tokens(1_000, 200, 3_000), prices(2_500_000, 10_000_000, 1_250_000));
    expect(cost).toEqual({ minorUnits: 8_250, exactMillionths: 8_250_000_000n });
  });

  it('charges the cache-creation price for cache writes', () => {
    expect(costOf(tokens(0, 0, 0, 1_000_000), prices(3, 15, 1, 4)).minorUnits).toBe(4);
  });

  it('charges the 1-hour cache writes their own price, and the rest of the cache writes the 5-minute one', () => {
    // 1M writes, 600k of them to the 1-hour cache: 400k × 375 + 600k × 600 = 510 minor units (Anthropic's 1.25 × and 2 × of 300).
    const writes = { ...tokens(0, 0, 0, 1_000_000), cacheCreation1hTokens: 600_000 };
    expect(costOf(writes, prices(300, 1500, 30, 375, 600))).toEqual({ minorUnits: 510, exactMillionths: 510_000_000n });
    // Without a price of its own (the config's default is the cache-creation price) nothing changes.
    expect(costOf(writes, prices(300, 1500, 30, 375)).minorUnits).toBe(375);
    // All of them 1-hour writes, at the bounds: still the 4-count bound.
    const most = costOf(
      { ...tokens(MAX_TOKEN_COUNT, MAX_TOKEN_COUNT, MAX_TOKEN_COUNT, MAX_TOKEN_COUNT), cacheCreation1hTokens: MAX_TOKEN_COUNT },
      prices(MAX_PRICE_PER_MILLION_TOKENS, MAX_PRICE_PER_MILLION_TOKENS, MAX_PRICE_PER_MILLION_TOKENS, 0, MAX_PRICE_PER_MILLION_TOKENS),
    );
    expect(most.minorUnits).toBe(MAX_RESPONSE_COST_MINOR_UNITS);
  });

  it('0 tokens cost 0; the smallest non-zero cost is 1 minor unit, never free', () => {
    expect(costOf(tokens(0, 0), prices(MAX_PRICE_PER_MILLION_TOKENS, MAX_PRICE_PER_MILLION_TOKENS))).toEqual({
      minorUnits: 0,
      exactMillionths: 0n,
    });
    expect(costOf(tokens(1, 0), prices(1, 0))).toEqual({ minorUnits: 1, exactMillionths: 1n });
    expect(costOf(tokens(1_000_000, 0), prices(1, 0))).toEqual({ minorUnits: 1, exactMillionths: 1_000_000n });
    expect(costOf(tokens(1_000_001, 0), prices(1, 0))).toEqual({ minorUnits: 2, exactMillionths: 1_000_001n });
    expect(costOf(tokens(5, 5), prices(0, 0)).minorUnits).toBe(0);
  });

  it('at the bounds: the largest counts at the highest prices stay exact and inside the credit bound', () => {
    const most = costOf(
      tokens(MAX_TOKEN_COUNT, MAX_TOKEN_COUNT, MAX_TOKEN_COUNT, MAX_TOKEN_COUNT),
      prices(MAX_PRICE_PER_MILLION_TOKENS, MAX_PRICE_PER_MILLION_TOKENS),
    );
    expect(most.minorUnits).toBe(MAX_RESPONSE_COST_MINOR_UNITS);
    expect(most.exactMillionths).toBe(4n * BigInt(MAX_TOKEN_COUNT) * BigInt(MAX_PRICE_PER_MILLION_TOKENS));
    expect(most.minorUnits).toBeLessThanOrEqual(CREDIT_LIMIT_MINOR_UNITS);
    expect(isCreditInBounds(most.minorUnits)).toBe(true);
    expect(isCreditInBounds(-most.minorUnits)).toBe(true);
    // One token less at an odd price: JS numbers alone would have rounded this (the product passes 2^53).
    const odd = costOf(tokens(MAX_TOKEN_COUNT - 1, 0), prices(MAX_PRICE_PER_MILLION_TOKENS - 1, 0));
    expect(odd.exactMillionths).toBe(BigInt(MAX_TOKEN_COUNT - 1) * BigInt(MAX_PRICE_PER_MILLION_TOKENS - 1));
    expect(odd.minorUnits).toBe(Number((odd.exactMillionths + 999_999n) / 1_000_000n));
  });

  it.each([
    [tokens(-1, 0), prices(1, 1)],
    [tokens(MAX_TOKEN_COUNT + 1, 0), prices(1, 1)],
    [tokens(0.5, 0), prices(1, 1)],
    [tokens(1, 0), prices(-1, 1)],
    [tokens(1, 0), prices(MAX_PRICE_PER_MILLION_TOKENS + 1, 1)],
    [tokens(1, 0), prices(1.5, 1)],
    [{ ...tokens(0, 0, 0, 10), cacheCreation1hTokens: 11 }, prices(1, 1)],
    [{ ...tokens(0, 0, 0, 10), cacheCreation1hTokens: -1 }, prices(1, 1)],
    [{ ...tokens(0, 0, 0, 10), cacheCreation1hTokens: 1.5 }, prices(1, 1)],
    [{ ...tokens(0, 0, 0, 10), cacheCreation1hTokens: 5 }, prices(1, 1, 1, 1, -1)],
  ])('refuses counts or prices outside the bounds (%j, %j)', (counts, at) => {
    expect(() => costOf(counts, at)).toThrow(RangeError);
  });

  const count = fc.integer({ min: 0, max: MAX_TOKEN_COUNT });
  const price = fc.integer({ min: 0, max: MAX_PRICE_PER_MILLION_TOKENS });
  // The 1-hour writes are a part of the cache writes: the smaller of two counts.
  const counts = fc
    .record({ inputTokens: count, outputTokens: count, cachedInputTokens: count, writes: fc.tuple(count, count) })
    .map(({ writes: [a, b], ...rest }) => ({ ...rest, cacheCreationTokens: Math.max(a, b), cacheCreation1hTokens: Math.min(a, b) }));
  const priceSet = fc.record({ input: price, output: price, cachedInput: price, cacheCreation: price, cacheCreation1h: price });

  it('is the exact cost rounded up: never below it, less than one minor unit above it, always in bounds (property)', () => {
    fc.assert(
      fc.property(counts, priceSet, (usage: TokenCounts, at: TokenPrices) => {
        const { minorUnits, exactMillionths } = costOf(usage, at);
        const exact =
          BigInt(usage.inputTokens) * BigInt(at.input) +
          BigInt(usage.outputTokens) * BigInt(at.output) +
          BigInt(usage.cachedInputTokens) * BigInt(at.cachedInput) +
          BigInt(usage.cacheCreationTokens - (usage.cacheCreation1hTokens ?? 0)) * BigInt(at.cacheCreation) +
          BigInt(usage.cacheCreation1hTokens ?? 0) * BigInt(at.cacheCreation1h);
        expect(exactMillionths).toBe(exact);
        expect(BigInt(minorUnits) * 1_000_000n).toBeGreaterThanOrEqual(exact);
        expect(BigInt(minorUnits) * 1_000_000n - exact).toBeLessThan(1_000_000n);
        expect(Number.isSafeInteger(minorUnits)).toBe(true);
        expect(minorUnits).toBeLessThanOrEqual(MAX_RESPONSE_COST_MINOR_UNITS);
      }),
      { numRuns: 2000 },
    );
  });

  it('summed over many responses, the charges exceed the exact total by less than one minor unit per response', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(counts, priceSet), { minLength: 1, maxLength: 50 }), (responses) => {
        let charged = 0n;
        let exact = 0n;
        for (const [usage, at] of responses) {
          const cost = costOf(usage, at);
          charged += BigInt(cost.minorUnits);
          exact += cost.exactMillionths;
        }
        expect(charged * 1_000_000n - exact).toBeGreaterThanOrEqual(0n);
        expect(charged * 1_000_000n - exact).toBeLessThan(BigInt(responses.length) * 1_000_000n);
      }),
      { numRuns: 300 },
    );
  });
});
