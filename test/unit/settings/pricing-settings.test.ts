import { MAX_PRICE_PER_MILLION_TOKENS } from '../../../src/metering/price-table';
import { MAX_PRICED_MODELS } from '../../../src/platform/config-file';
import { problemsIn, withConfigFile } from '../../support/settings-results';

const PATH = '/etc/gateway/config.json';
const withConfig = (config: unknown) => withConfigFile(config, {}, PATH);
const problemsOf = (config: unknown): string[] => problemsIn(withConfig(config));

const pricing = {
  models: [
    { model: 'gpt-4o-mini*', input: 150_000, output: 600_000, cachedInput: 75_000 },
    {
      model: 'claude-sonnet-4-5*',
      input: 3_000_000,
      output: 15_000_000,
      cachedInput: 300_000,
      cacheCreation: 3_750_000,
      cacheCreation1h: 6_000_000,
    },
    { model: 'claude-haiku-4-5*', input: 1_000_000, output: 5_000_000, cacheCreation: 1_250_000 },
  ],
  default: { input: 10_000_000, output: 30_000_000, webSearchCall: 10_000 },
  unpricedModels: 'refuse',
};

describe('config file: pricing', () => {
  it('builds the price table in order, cache prices defaulting to the input price and 1-hour writes to the cache-creation one', () => {
    const result = withConfig({ pricing });
    if (!result.ok) throw new Error(result.problems.join('; '));
    // Each unset price is its fallback's: reasoning and output audio/image the output price, input audio/image the input
    // price; a model's search fee the default's.
    const resolved = (input: number, output: number, cachedInput: number, cacheCreation: number, cacheCreation1h: number) => ({
      input,
      output,
      cachedInput,
      cacheCreation,
      cacheCreation1h,
      reasoning: output,
      inputAudio: input,
      inputImage: input,
      outputAudio: output,
      outputImage: output,
      webSearchCall: 10_000,
    });
    expect(result.settings.pipeline.pricing).toEqual({
      models: [
        { pattern: 'gpt-4o-mini*', prices: resolved(150_000, 600_000, 75_000, 150_000, 150_000) },
        { pattern: 'claude-sonnet-4-5*', prices: resolved(3_000_000, 15_000_000, 300_000, 3_750_000, 6_000_000) },
        { pattern: 'claude-haiku-4-5*', prices: resolved(1_000_000, 5_000_000, 1_000_000, 1_250_000, 1_250_000) },
      ],
      defaultPrices: resolved(10_000_000, 30_000_000, 10_000_000, 10_000_000, 10_000_000),
      unpricedModels: 'refuse',
    });
    expect(Object.isFrozen(result.settings.pipeline.pricing!.models[0]!.prices)).toBe(true);
  });

  it('a table with only a default charges every model the default', () => {
    const result = withConfig({ pricing: { default: { input: 1, output: 2, webSearchCall: 3 }, unpricedModels: 'charge-default' } });
    expect(result.ok && result.settings.pipeline.pricing).toMatchObject({ models: [], unpricedModels: 'charge-default' });
  });

  it('without pricing, settings have no price table', () => {
    const result = withConfig({});
    expect(result.ok && 'pricing' in result.settings).toBe(false);
  });

  it('the default and the choice for unpriced models are required: money is never left to a silent default', () => {
    expect(problemsOf({ pricing: { models: [] } })).toEqual([
      expect.stringMatching(/^CONFIG_FILE \/etc\/gateway\/config.json: pricing.default: /),
      expect.stringMatching(/^CONFIG_FILE \/etc\/gateway\/config.json: pricing.unpricedModels: /),
    ]);
    expect(problemsOf({ pricing: { ...pricing, unpricedModels: 'free' } })).toEqual([
      `CONFIG_FILE ${PATH}: pricing.unpricedModels: must be "refuse" or "charge-default"`,
    ]);
  });

  it.each<[unknown, string]>([
    [-1, 'negative'],
    [1.5, 'fractional'],
    [MAX_PRICE_PER_MILLION_TOKENS + 1, 'too high'],
    ['100', 'text'],
  ])('refuses a price of %j (%s), naming the field', (value) => {
    expect(problemsOf({ pricing: { ...pricing, models: [{ model: 'm', input: 1, output: value }] } })).toEqual([
      `CONFIG_FILE ${PATH}: pricing.models.0.output: must be a whole number of units (10^-exponent of the currency, micro-dollars by default) per million tokens, from 0 to ${MAX_PRICE_PER_MILLION_TOKENS}`,
    ]);
  });

  it('accepts prices from 0 to the maximum', () => {
    expect(
      withConfig({
        pricing: {
          ...pricing,
          models: [
            { model: 'free', input: 0, output: 0 },
            { model: 'dear', input: MAX_PRICE_PER_MILLION_TOKENS, output: MAX_PRICE_PER_MILLION_TOKENS },
          ],
        },
      }).ok,
    ).toBe(true);
  });

  it('lists every bad entry at once: a bad pattern, an unknown field, an entry an earlier one shadows', () => {
    expect(
      problemsOf({
        pricing: {
          ...pricing,
          models: [
            { model: 'gpt-4o*', input: 1, output: 1 },
            { model: 'gpt-4o-mini', input: 1, output: 1 },
            { model: 'a*b', input: 1, output: 1 },
            { model: 'o3', input: 1, output: 1, video: 5 },
          ],
        },
      }),
    ).toEqual([
      `CONFIG_FILE ${PATH}: pricing.models.2.model: may hold '*' only as its last character (a prefix such as "gpt-4o-mini*")`,
      `CONFIG_FILE ${PATH}: pricing.models.3: Unrecognized key: "video"`,
      `CONFIG_FILE ${PATH}: pricing.models.1.model: can never match: entry 0 ('gpt-4o*') comes first and takes every model it would (first match wins; put the longer pattern first)`,
    ]);
  });

  it(`holds at most ${MAX_PRICED_MODELS} entries`, () => {
    const models = Array.from({ length: MAX_PRICED_MODELS + 1 }, (_, index) => ({ model: `m${index}`, input: 1, output: 1 }));
    expect(problemsOf({ pricing: { ...pricing, models } })).toEqual([
      `CONFIG_FILE ${PATH}: pricing.models: must hold at most ${MAX_PRICED_MODELS} entries`,
    ]);
  });

  it('every dimension has a price: the prices an upstream charges apart are set, else they take their fallback', () => {
    const result = withConfig({
      pricing: {
        ...pricing,
        models: [
          {
            model: 'gpt-4o-audio*',
            input: 2_500_000,
            output: 10_000_000,
            reasoning: 12_000_000,
            inputAudio: 40_000_000,
            inputImage: 2_000_000,
            outputAudio: 80_000_000,
            outputImage: 30_000_000,
            webSearchCall: 25_000,
          },
        ],
      },
    });
    if (!result.ok) throw new Error(result.problems.join('; '));
    expect(result.settings.pipeline.pricing!.models[0]!.prices).toEqual({
      input: 2_500_000,
      output: 10_000_000,
      cachedInput: 2_500_000,
      cacheCreation: 2_500_000,
      cacheCreation1h: 2_500_000,
      reasoning: 12_000_000,
      inputAudio: 40_000_000,
      inputImage: 2_000_000,
      outputAudio: 80_000_000,
      outputImage: 30_000_000,
      webSearchCall: 25_000,
    });
  });

  it('the default search fee is required: a per-call fee has no token price to fall back to', () => {
    expect(problemsOf({ pricing: { ...pricing, default: { input: 1, output: 1 } } })).toEqual([
      expect.stringMatching(/^CONFIG_FILE \/etc\/gateway\/config.json: pricing.default.webSearchCall: is required: /),
    ]);
  });

  it("reads long-context tiers by rising threshold, each a whole set of prices with the same fallbacks and its entry's fee", () => {
    const result = withConfig({
      pricing: {
        ...pricing,
        models: [
          {
            model: 'gemini-2.5-pro*',
            input: 1_250_000,
            output: 10_000_000,
            cachedInput: 125_000,
            tiers: [{ aboveInputTokens: 200_000, input: 2_500_000, output: 15_000_000, cachedInput: 250_000 }],
          },
        ],
        default: { ...pricing.default, tiers: [{ aboveInputTokens: 100_000, input: 20_000_000, output: 60_000_000 }] },
      },
    });
    if (!result.ok) throw new Error(result.problems.join('; '));
    const [entry] = result.settings.pipeline.pricing!.models;
    expect(entry!.tiers).toEqual([
      {
        aboveInputTokens: 200_000,
        prices: {
          input: 2_500_000,
          output: 15_000_000,
          cachedInput: 250_000,
          cacheCreation: 2_500_000,
          cacheCreation1h: 2_500_000,
          reasoning: 15_000_000,
          inputAudio: 2_500_000,
          inputImage: 2_500_000,
          outputAudio: 15_000_000,
          outputImage: 15_000_000,
          webSearchCall: 10_000,
        },
      },
    ]);
    expect(result.settings.pipeline.pricing!.defaultTiers).toEqual([
      expect.objectContaining({
        aboveInputTokens: 100_000,
        prices: expect.objectContaining({ input: 20_000_000, cachedInput: 20_000_000 }),
      }),
    ]);
  });

  it('refuses tiers out of order, a threshold of 0, and a fee in a tier', () => {
    const tiers = [
      { aboveInputTokens: 200_000, input: 2, output: 2 },
      { aboveInputTokens: 200_000, input: 3, output: 3 },
      { aboveInputTokens: 0, input: 3, output: 3, webSearchCall: 1 },
    ];
    expect(problemsOf({ pricing: { ...pricing, models: [{ model: 'm', input: 1, output: 1, tiers }] } })).toEqual([
      expect.stringMatching(/pricing.models.0.tiers.2.aboveInputTokens: must be a whole number of prompt tokens from 1 to/),
      `CONFIG_FILE ${PATH}: pricing.models.0.tiers.2: Unrecognized key: "webSearchCall"`,
      `CONFIG_FILE ${PATH}: pricing.models.0.tiers.1.aboveInputTokens: must be above the tier before it (list tiers by rising threshold)`,
      `CONFIG_FILE ${PATH}: pricing.models.0.tiers.2.aboveInputTokens: must be above the tier before it (list tiers by rising threshold)`,
    ]);
  });
});
