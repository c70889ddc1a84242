/**
 * Prices are integer minor units (the credit balance's unit) per million
 * tokens. Cache prices default to the input price when the operator gives
 * none, so a forgotten cache price never makes cached tokens free.
 */
export interface TokenPrices {
  readonly input: number;
  readonly output: number;
  readonly cachedInput: number;
  readonly cacheCreation: number;
  /** Cache writes that live an hour (Anthropic's 1-hour cache); the operator's default is `cacheCreation`. */
  readonly cacheCreation1h: number;
}

/**
 * A model pattern is an exact model name (`gpt-4o-mini-2024-07-18`) or a
 * prefix ending in one `*` (`claude-sonnet-4-5*`). Nothing else is special:
 * model names contain dots and dashes, and a full glob would only add ways to
 * write a pattern that matches more than meant.
 */
export interface ModelPriceEntry {
  readonly pattern: string;
  readonly prices: TokenPrices;
}

/**
 * Models that match no entry: `refuse` answers their requests at Check time
 * (404 `model_not_priced`) where the model is known then; `charge-default`
 * charges the default prices.
 */
export type UnpricedModelPolicy = 'refuse' | 'charge-default';

export interface PriceTable {
  /** Checked in order; the first matching pattern wins. */
  readonly models: readonly ModelPriceEntry[];
  /**
   * Charged for unpriced models under `charge-default`, and under `refuse` for
   * a response whose model was not known at Check time (a body-style request
   * when Envoy does not send the body to Check): refusing after the answer
   * was delivered is impossible, and charging nothing would be a free pass.
   */
  readonly defaultPrices: TokenPrices;
  readonly unpricedModels: UnpricedModelPolicy;
}

/**
 * The highest price accepted: 10^11 minor units per million tokens (10^5 per
 * token), room for micro-units of a currency at today's dearest models. With
 * at most MAX_TOKEN_COUNT (10^9) tokens in each of the four counts, one
 * response costs at most 4 × 10^9 × 10^11 / 10^6 = 4 × 10^14 minor units,
 * inside the credit bound of ±10^15 (src/domain/credit.ts).
 */
export const MAX_PRICE_PER_MILLION_TOKENS = 100_000_000_000;

/** The most one response can cost, from the two bounds above. */
export const MAX_RESPONSE_COST_MINOR_UNITS = 400_000_000_000_000;

/** `claude-sonnet-4-5*` matches every name that starts with `claude-sonnet-4-5`; any other pattern only itself. */
export function matchesModelPattern(pattern: string, model: string): boolean {
  return pattern.endsWith('*') ? model.startsWith(pattern.slice(0, -1)) : model === pattern;
}

export function priceEntryFor(table: PriceTable, model: string): ModelPriceEntry | undefined {
  return table.models.find((entry) => matchesModelPattern(entry.pattern, model));
}

/** At Check time, for a request whose model is known then: refused when no pattern prices it and the operator chose `refuse`. */
export function isModelRefused(table: PriceTable, model: string): boolean {
  return table.unpricedModels === 'refuse' && priceEntryFor(table, model) === undefined;
}
