import { MAX_CALL_COUNT } from './usage';

/**
 * Token prices are integer minor units (the credit balance's unit) per
 * million tokens; the per-call fee is integer minor units per call. Every
 * price is set: the operator's unset ones are filled in by their fallback
 * when the configuration is read (PRICE_FALLBACKS), so no dimension is ever
 * free because a price was forgotten.
 */
export interface TokenPrices {
  readonly input: number;
  readonly output: number;
  readonly cachedInput: number;
  /** 5-minute cache writes (and every write whose lifetime is not reported). */
  readonly cacheCreation: number;
  /** Cache writes that live an hour (Anthropic's 1-hour cache). */
  readonly cacheCreation1h: number;
  /** Reasoning/thinking tokens: every upstream bills them as output today, so this defaults to `output`. */
  readonly reasoning: number;
  readonly inputAudio: number;
  readonly inputImage: number;
  readonly outputAudio: number;
  readonly outputImage: number;
  /** Minor units per server-side web search (or grounding query), not per million. */
  readonly webSearchCall: number;
}

/** The token prices an operator may leave unset, and the price each then takes; listed so each fallback is resolved before it is used. */
export const PRICE_FALLBACKS = {
  cachedInput: 'input',
  cacheCreation: 'input',
  cacheCreation1h: 'cacheCreation',
  reasoning: 'output',
  inputAudio: 'input',
  inputImage: 'input',
  outputAudio: 'output',
  outputImage: 'output',
} as const satisfies Partial<Record<keyof TokenPrices, keyof TokenPrices>>;

export type OptionalTokenPrice = keyof typeof PRICE_FALLBACKS;

/** The prices as an operator writes them: `input` and `output` always, the rest optional. */
export type ConfiguredPrices = Pick<TokenPrices, 'input' | 'output'> & Partial<Omit<TokenPrices, 'input' | 'output'>>;

/**
 * Every unset price filled in from its fallback (a chain: `cacheCreation1h`
 * → `cacheCreation` → `input`). `webSearchCall` has no token price to fall
 * back to: a model entry's falls back to the default entry's, which the
 * configuration requires.
 */
export function withFallbacks(configured: ConfiguredPrices, webSearchCall: number): TokenPrices {
  return resolvedPrices(configured, webSearchCall, (_name, fallbackPrice) => fallbackPrice);
}

/**
 * A long-context tier's prices (PriceTier). A price the tier leaves unset is
 * its entry's price for that dimension, scaled as the tier scales the price it
 * falls back to, rounded up: Sonnet's cache reads cost 0.1 × input below its
 * threshold and above it (0.30 and 0.60 a million), so a tier that sets only
 * input and output still charges 0.60, not the tier's whole input price; and
 * no dimension the entry prices apart (1-hour writes, image output) drops
 * to a cheaper fallback across the threshold. Where the entry's fallback price
 * is 0 there is no scale, and the tier's own fallback applies.
 */
export function tierWithFallbacks(configured: ConfiguredPrices, entry: TokenPrices): TokenPrices {
  return resolvedPrices(configured, entry.webSearchCall, (name, fallbackPrice, fallback) => {
    const entryFallback = entry[fallback];
    if (entryFallback === 0) return fallbackPrice;
    const scaled = (BigInt(entry[name]) * BigInt(fallbackPrice) + BigInt(entryFallback) - 1n) / BigInt(entryFallback);
    return Number(scaled > BigInt(MAX_PRICE_PER_MILLION_TOKENS) ? BigInt(MAX_PRICE_PER_MILLION_TOKENS) : scaled);
  });
}

/** Every price: the configured one, else `unset` of it (given the price its fallback resolved to), in PRICE_FALLBACKS' order. */
function resolvedPrices(
  configured: ConfiguredPrices,
  webSearchCall: number,
  unset: (name: OptionalTokenPrice, fallbackPrice: number, fallback: keyof TokenPrices) => number,
): TokenPrices {
  const resolved: Record<string, number> = { input: configured.input, output: configured.output };
  for (const [name, fallback] of Object.entries(PRICE_FALLBACKS) as [OptionalTokenPrice, keyof TokenPrices][]) {
    resolved[name] = configured[name] ?? unset(name, resolved[fallback]!, fallback);
  }
  return {
    input: configured.input,
    output: configured.output,
    cachedInput: resolved.cachedInput!,
    cacheCreation: resolved.cacheCreation!,
    cacheCreation1h: resolved.cacheCreation1h!,
    reasoning: resolved.reasoning!,
    inputAudio: resolved.inputAudio!,
    inputImage: resolved.inputImage!,
    outputAudio: resolved.outputAudio!,
    outputImage: resolved.outputImage!,
    webSearchCall: configured.webSearchCall ?? webSearchCall,
  };
}

/**
 * Long-context pricing: above a prompt size the upstream charges the whole
 * answer (input, output, cache) at other prices, e.g. Gemini 2.5 Pro and
 * Claude Sonnet with the 1M context window above 200,000 prompt tokens. The
 * prompt is every input-side token of the answer: uncached input, cache reads
 * and cache writes (Anthropic compares its 200K threshold with exactly that).
 */
export interface PriceTier {
  /** The tier applies when the prompt has more tokens than this (200,000 exactly is still below a 200,000 tier). */
  readonly aboveInputTokens: number;
  /** A whole set of prices; the per-call fee is the entry's own (tiers change token prices only). */
  readonly prices: TokenPrices;
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
  /** By ascending threshold; the highest one the prompt is above wins. Absent: none. */
  readonly tiers?: readonly PriceTier[];
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
  /** The default prices' long-context tiers (see ModelPriceEntry.tiers). */
  readonly defaultTiers?: readonly PriceTier[];
  readonly unpricedModels: UnpricedModelPolicy;
}

/**
 * The highest price accepted: 10^11 minor units per million tokens (10^5 per
 * token), room for micro-units of a currency at today's dearest models. With
 * at most MAX_TOKEN_COUNT (10^9) tokens in each of the four counts (the
 * parts priced apart lie inside them), the tokens of one response cost at
 * most 4 × 10^9 × 10^11 / 10^6 = 4 × 10^14 minor units.
 */
export const MAX_PRICE_PER_MILLION_TOKENS = 100_000_000_000;

/** The most the tokens of one response can cost, from the bounds above. */
export const MAX_TOKEN_COST_MINOR_UNITS = 400_000_000_000_000;

/**
 * The highest per-call fee: 10^9 minor units (1,000 of a currency counted in
 * micro-units), far above any search fee. At most MAX_CALL_COUNT (10^4) calls
 * an answer, the calls of one response cost at most 10^13 minor units.
 */
export const MAX_FEE_PER_CALL = 1_000_000_000;

/** The most one response can cost: 4.1 × 10^14 minor units, inside the credit bound of ±10^15 (src/accounts/credit.ts). */
export const MAX_RESPONSE_COST_MINOR_UNITS = MAX_TOKEN_COST_MINOR_UNITS + MAX_FEE_PER_CALL * MAX_CALL_COUNT;

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

/** The tier whose threshold the prompt is above, the highest such (tiers are ascending); undefined: the base prices. */
export function tierFor(tiers: readonly PriceTier[] | undefined, promptTokens: number): PriceTier | undefined {
  let chosen: PriceTier | undefined;
  for (const tier of tiers ?? []) if (promptTokens > tier.aboveInputTokens) chosen = tier;
  return chosen;
}

export interface ChargedPrices {
  readonly prices: TokenPrices;
  /** The entry's pattern; undefined when the default prices applied. */
  readonly pattern: string | undefined;
  /** Set when a long-context tier applied: its threshold. */
  readonly tierAboveInputTokens?: number;
}

/**
 * The prices a response is charged at: its model's entry, else the default
 * prices (see PriceTable.defaultPrices for why even under `refuse`); within
 * them the long-context tier its prompt is above, if any.
 */
export function chargedPrices(table: PriceTable, model: string | undefined, promptTokens = 0): ChargedPrices {
  const entry = model === undefined ? undefined : priceEntryFor(table, model);
  const base = entry ? entry.prices : table.defaultPrices;
  const tier = tierFor(entry ? entry.tiers : table.defaultTiers, promptTokens);
  return tier
    ? { prices: tier.prices, pattern: entry?.pattern, tierAboveInputTokens: tier.aboveInputTokens }
    : { prices: base, pattern: entry?.pattern };
}
