import fc from 'fast-check';
import { CREDIT_LIMIT_MINOR_UNITS, isCreditInBounds } from '../../../src/accounts/credit';
import {
  isModelRefused,
  matchesModelPattern,
  MAX_FEE_PER_CALL,
  MAX_PRICE_PER_MILLION_TOKENS,
  MAX_RESPONSE_COST_MINOR_UNITS,
  MAX_TOKEN_COST_MINOR_UNITS,
  priceEntryFor,
  tierWithFallbacks,
  withFallbacks,
  type PriceTable,
  type TokenPrices,
} from '../../../src/metering/price-table';
import { MAX_CALL_COUNT, MAX_TOKEN_COUNT, type TokenCounts } from '../../../src/metering/usage';
import { DEFAULT_CURRENCY } from '../../../src/accounts/money';
import { configFileSchema } from '../../../src/platform/config-file';
import {
  chargedPrices,
  costOf,
  modelPatternProblem,
  priceTableHash,
  promptTokensOf,
  shadowedEntries,
  tierFor,
} from '../../../src/metering/pricing';
import { tokens } from '../../support/usage-fixtures';

// Every other price at its fallback (reasoning and output audio/image at `output`, input audio/image at `input`), no search fee.
const prices = (input: number, output: number, cachedInput = input, cacheCreation = input, cacheCreation1h = cacheCreation): TokenPrices =>
  withFallbacks({ input, output, cachedInput, cacheCreation, cacheCreation1h }, 0);

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
    expect(most.minorUnits).toBe(MAX_TOKEN_COST_MINOR_UNITS);
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
    expect(most.minorUnits).toBe(MAX_TOKEN_COST_MINOR_UNITS);
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
  /** A count and parts of it that together stay inside it. */
  const withParts = (parts: number) =>
    fc.tuple(count, fc.array(fc.integer({ min: 0, max: 1_000_000 }), { minLength: parts, maxLength: parts })).map(([total, weights]) => {
      const sum = weights.reduce((a, b) => a + b, 0) || 1;
      return { total, parts: weights.map((weight) => Math.floor((total * weight) / (sum * (parts + 1)))) };
    });
  const counts = fc
    .record({
      input: withParts(2),
      output: withParts(3),
      cachedInputTokens: count,
      writes: withParts(1),
      calls: fc.integer({ min: 0, max: MAX_CALL_COUNT }),
    })
    .map(({ input, output, cachedInputTokens, writes, calls }): TokenCounts => ({
      inputTokens: input.total,
      outputTokens: output.total,
      cachedInputTokens,
      cacheCreationTokens: writes.total,
      cacheCreation1hTokens: writes.parts[0]!,
      inputAudioTokens: input.parts[0]!,
      inputImageTokens: input.parts[1]!,
      reasoningTokens: output.parts[0]!,
      outputAudioTokens: output.parts[1]!,
      outputImageTokens: output.parts[2]!,
      webSearchCalls: calls,
    }));
  const priceSet: fc.Arbitrary<TokenPrices> = fc.record({
    input: price,
    output: price,
    cachedInput: price,
    cacheCreation: price,
    cacheCreation1h: price,
    reasoning: price,
    inputAudio: price,
    inputImage: price,
    outputAudio: price,
    outputImage: price,
    webSearchCall: fc.integer({ min: 0, max: MAX_FEE_PER_CALL }),
  });

  it('is the exact cost rounded up: never below it, less than one minor unit above it, always in bounds (property)', () => {
    fc.assert(
      fc.property(counts, priceSet, (usage: TokenCounts, at: TokenPrices) => {
        const { minorUnits, exactMillionths } = costOf(usage, at);
        const n = (value: number | undefined) => BigInt(value ?? 0);
        const plainInput = usage.inputTokens - usage.inputAudioTokens! - usage.inputImageTokens!;
        const plainOutput = usage.outputTokens - usage.reasoningTokens! - usage.outputAudioTokens! - usage.outputImageTokens!;
        const exact =
          n(plainInput) * n(at.input) +
          n(usage.inputAudioTokens) * n(at.inputAudio) +
          n(usage.inputImageTokens) * n(at.inputImage) +
          n(plainOutput) * n(at.output) +
          n(usage.reasoningTokens) * n(at.reasoning) +
          n(usage.outputAudioTokens) * n(at.outputAudio) +
          n(usage.outputImageTokens) * n(at.outputImage) +
          n(usage.cachedInputTokens) * n(at.cachedInput) +
          n(usage.cacheCreationTokens - usage.cacheCreation1hTokens!) * n(at.cacheCreation) +
          n(usage.cacheCreation1hTokens) * n(at.cacheCreation1h) +
          n(usage.webSearchCalls) * n(at.webSearchCall) * 1_000_000n;
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

describe('the dimensions priced apart', () => {
  // input 3, output 15, and each part its own price per token, so every piece of the sum can be read off.
  const apart: TokenPrices = {
    input: 3_000_000,
    output: 15_000_000,
    cachedInput: 300_000,
    cacheCreation: 3_750_000,
    cacheCreation1h: 6_000_000,
    reasoning: 20_000_000,
    inputAudio: 40_000_000,
    inputImage: 5_000_000,
    outputAudio: 80_000_000,
    outputImage: 30_000_000,
    webSearchCall: 10_000,
  };

  it("each part is charged its own price and the rest of its count the count's price; searches per call", () => {
    const usage: TokenCounts = {
      inputTokens: 100,
      outputTokens: 50,
      cachedInputTokens: 10,
      cacheCreationTokens: 20,
      cacheCreation1hTokens: 8,
      inputAudioTokens: 30,
      inputImageTokens: 20,
      reasoningTokens: 10,
      outputAudioTokens: 5,
      outputImageTokens: 4,
      webSearchCalls: 2,
    };
    // input: 50 × 3 + 30 × 40 + 20 × 5 = 1,450; output: 31 × 15 + 10 × 20 + 5 × 80 + 4 × 30 = 1,185;
    // cache: 10 × 0.3 + 12 × 3.75 + 8 × 6 = 96; searches: 2 × 10,000 = 20,000. Total 22,731.
    expect(costOf(usage, apart)).toEqual({ minorUnits: 22_731, exactMillionths: 22_731_000_000n });
  });

  it('no dimension is free by default: an unset price takes its fallback, never 0', () => {
    const resolved = withFallbacks({ input: 7, output: 11 }, 13);
    expect(resolved).toEqual({
      input: 7,
      output: 11,
      cachedInput: 7,
      cacheCreation: 7,
      cacheCreation1h: 7,
      reasoning: 11,
      inputAudio: 7,
      inputImage: 7,
      outputAudio: 11,
      outputImage: 11,
      webSearchCall: 13,
    });
    // The 1-hour writes follow the 5-minute price when only that is set (a chain, not straight to input).
    expect(withFallbacks({ input: 7, output: 11, cacheCreation: 9 }, 13).cacheCreation1h).toBe(9);
    // A fee set on the entry wins over the one it would fall back to.
    expect(withFallbacks({ input: 7, output: 11, webSearchCall: 5 }, 13).webSearchCall).toBe(5);
    // Every dimension of an answer costs something at fallback prices.
    const one = (name: keyof TokenCounts, whole: keyof TokenCounts): TokenCounts => ({ ...tokens(0, 0), [whole]: 1, [name]: 1 });
    for (const [name, whole] of [
      ['inputAudioTokens', 'inputTokens'],
      ['inputImageTokens', 'inputTokens'],
      ['reasoningTokens', 'outputTokens'],
      ['outputAudioTokens', 'outputTokens'],
      ['outputImageTokens', 'outputTokens'],
      ['cacheCreation1hTokens', 'cacheCreationTokens'],
    ] as const) {
      expect(costOf(one(name, whole), withFallbacks({ input: 1_000_000, output: 1_000_000 }, 1)).minorUnits).toBe(1);
    }
    expect(costOf({ ...tokens(0, 0), webSearchCalls: 1 }, resolved).minorUnits).toBe(13);
  });

  it.each([
    [{ ...tokens(10, 0), inputAudioTokens: 6, inputImageTokens: 5 }],
    [{ ...tokens(0, 10), reasoningTokens: 6, outputAudioTokens: 5 }],
    [{ ...tokens(0, 10), outputImageTokens: 11 }],
    [{ ...tokens(0, 0), webSearchCalls: MAX_CALL_COUNT + 1 }],
    [{ ...tokens(0, 0), webSearchCalls: -1 }],
  ])('refuses parts that exceed their count, and call counts out of bounds (%j)', (usage) => {
    expect(() => costOf(usage, apart)).toThrow(RangeError);
  });

  it('refuses a fee out of bounds', () => {
    expect(() => costOf({ ...tokens(0, 0), webSearchCalls: 1 }, { ...apart, webSearchCall: MAX_FEE_PER_CALL + 1 })).toThrow(RangeError);
  });
});

describe('long-context tiers: the whole answer at other prices above a prompt size', () => {
  const base = withFallbacks({ input: 3_000_000, output: 15_000_000, cachedInput: 300_000 }, 10_000);
  const long = withFallbacks({ input: 6_000_000, output: 22_500_000, cachedInput: 600_000 }, 10_000);
  const longer = withFallbacks({ input: 9_000_000, output: 30_000_000 }, 10_000);
  const tiered: PriceTable = {
    models: [
      {
        pattern: 'claude-sonnet-4-5*',
        prices: base,
        tiers: [
          { aboveInputTokens: 200_000, prices: long },
          { aboveInputTokens: 500_000, prices: longer },
        ],
      },
    ],
    defaultPrices: base,
    defaultTiers: [{ aboveInputTokens: 100_000, prices: long }],
    unpricedModels: 'charge-default',
  };

  it('at the threshold exactly the base prices apply; one token above, the tier (for every count)', () => {
    expect(chargedPrices(tiered, 'claude-sonnet-4-5', 200_000)).toEqual({ prices: base, pattern: 'claude-sonnet-4-5*' });
    expect(chargedPrices(tiered, 'claude-sonnet-4-5', 200_001)).toEqual({
      prices: long,
      pattern: 'claude-sonnet-4-5*',
      tierAboveInputTokens: 200_000,
    });
    expect(chargedPrices(tiered, 'claude-sonnet-4-5', 500_000).tierAboveInputTokens).toBe(200_000);
    expect(chargedPrices(tiered, 'claude-sonnet-4-5', 500_001).tierAboveInputTokens).toBe(500_000);
    // The default prices have tiers of their own.
    expect(chargedPrices(tiered, 'unknown', 100_001)).toEqual({ prices: long, pattern: undefined, tierAboveInputTokens: 100_000 });
    expect(tierFor(undefined, 1_000_000)).toBeUndefined();
  });

  it('the prompt is every input-side token: uncached input, cache reads and cache writes; output does not count', () => {
    const table: PriceTable = { ...tiered, defaultTiers: [] };
    // 100,000 + 50,000 + 50,000 = 200,000: at the threshold, base. One more cache read: above it.
    const at = { ...tokens(100_000, 999_999, 50_000, 50_000) };
    const above = { ...tokens(100_000, 1, 50_001, 50_000) };
    const record = (usage: TokenCounts) => chargedPrices(table, 'claude-sonnet-4-5', promptTokensOf(usage));
    expect(record(at).tierAboveInputTokens).toBeUndefined();
    expect(record(above).tierAboveInputTokens).toBe(200_000);
    // Above the threshold the output is charged the tier's output price too: 22.5 a token.
    expect(costOf(above, record(above).prices).minorUnits).toBe(
      Number((100_000n * 6_000_000n + 22_500_000n + 50_001n * 600_000n + 50_000n * 6_000_000n + 999_999n) / 1_000_000n),
    );
  });
});

describe("a tier's unset prices scale its entry's", () => {
  // Claude Sonnet: cache reads 0.1 × input, 5-minute writes 1.25 ×, 1-hour writes 2 ×, on both sides of 200k.
  const sonnet = withFallbacks(
    { input: 3_000_000, output: 15_000_000, cachedInput: 300_000, cacheCreation: 3_750_000, cacheCreation1h: 6_000_000 },
    10_000,
  );

  it('a tier that sets input and output charges the cache at the same multiples of its input', () => {
    const long = tierWithFallbacks({ input: 6_000_000, output: 22_500_000 }, sonnet);
    expect(long).toMatchObject({ cachedInput: 600_000, cacheCreation: 7_500_000, cacheCreation1h: 12_000_000, webSearchCall: 10_000 });
    // Output-side parts scale with output: reasoning and audio at the tier's 1.5 ×.
    expect(long).toMatchObject({ reasoning: 22_500_000, outputAudio: 22_500_000, inputAudio: 6_000_000 });
  });

  it("an entry's image output price is kept across the threshold, scaled, not replaced by the tier's output", () => {
    const pro = withFallbacks({ input: 1_250_000, output: 10_000_000, outputImage: 30_000_000 }, 0);
    expect(tierWithFallbacks({ input: 2_500_000, output: 15_000_000 }, pro).outputImage).toBe(45_000_000);
  });

  it('a price the tier sets wins; a fallback the tier sets is what the next one scales from', () => {
    const long = tierWithFallbacks({ input: 6_000_000, output: 22_500_000, cacheCreation: 9_000_000 }, sonnet);
    expect(long.cacheCreation).toBe(9_000_000);
    expect(long.cacheCreation1h).toBe(Math.ceil((6_000_000 * 9_000_000) / 3_750_000));
  });

  it('rounds up, and bounds the scale', () => {
    const odd = withFallbacks({ input: 3, output: 3, cachedInput: 1 }, 0);
    expect(tierWithFallbacks({ input: 4, output: 4 }, odd).cachedInput).toBe(2); // 4/3 rounded up
    const cheapInput = withFallbacks({ input: 1, output: 1, cachedInput: MAX_PRICE_PER_MILLION_TOKENS }, 0);
    expect(tierWithFallbacks({ input: 2, output: 2 }, cheapInput).cachedInput).toBe(MAX_PRICE_PER_MILLION_TOKENS);
  });

  it("an entry's free fallback gives no scale: the tier's own fallback", () => {
    const freeInput = withFallbacks({ input: 0, output: 5, cachedInput: 0 }, 0);
    expect(tierWithFallbacks({ input: 7, output: 9 }, freeInput).cachedInput).toBe(7);
  });

  it('the configuration file builds its tiers this way', () => {
    const pricing = configFileSchema.parse({
      pricing: {
        models: [
          {
            model: 'claude-sonnet-4-5*',
            input: 3_000_000,
            output: 15_000_000,
            cachedInput: 300_000,
            cacheCreation1h: 6_000_000,
            tiers: [{ aboveInputTokens: 200_000, input: 6_000_000, output: 22_500_000 }],
          },
        ],
        default: { input: 1, output: 1, webSearchCall: 1 },
        unpricedModels: 'charge-default',
      },
    }).pricing!;
    expect(pricing.models[0]!.tiers![0]!.prices).toMatchObject({ cachedInput: 600_000, cacheCreation1h: 12_000_000 });
  });
});

describe('the price table hash', () => {
  const a: PriceTable = {
    models: [{ pattern: 'm*', prices: withFallbacks({ input: 1, output: 2 }, 3) }],
    defaultPrices: withFallbacks({ input: 4, output: 5 }, 6),
    unpricedModels: 'refuse',
  };

  it('is stable (key order does not matter) and changes with any price, the tiers or the currency', () => {
    const reordered = JSON.parse(
      JSON.stringify({ unpricedModels: a.unpricedModels, defaultPrices: a.defaultPrices, models: a.models }),
    ) as PriceTable;
    expect(priceTableHash(a, DEFAULT_CURRENCY)).toMatch(/^[0-9a-f]{16}$/);
    expect(priceTableHash(reordered, DEFAULT_CURRENCY)).toBe(priceTableHash(a, DEFAULT_CURRENCY));
    const changed = { ...a, defaultPrices: { ...a.defaultPrices, outputImage: 6 } };
    expect(priceTableHash(changed, DEFAULT_CURRENCY)).not.toBe(priceTableHash(a, DEFAULT_CURRENCY));
    const withTier = { ...a, defaultTiers: [{ aboveInputTokens: 10, prices: a.defaultPrices }] };
    expect(priceTableHash(withTier, DEFAULT_CURRENCY)).not.toBe(priceTableHash(a, DEFAULT_CURRENCY));
    expect(priceTableHash(a, { code: 'USD', exponent: 2 })).not.toBe(priceTableHash(a, DEFAULT_CURRENCY));
  });
});
