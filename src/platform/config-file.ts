import { z } from 'zod';
import {
  MAX_FEE_PER_CALL,
  MAX_PRICE_PER_MILLION_TOKENS,
  PRICE_FALLBACKS,
  tierWithFallbacks,
  withFallbacks,
  type ConfiguredPrices,
  type ModelPriceEntry,
  type OptionalTokenPrice,
  type PriceTable,
  type PriceTier,
  type TokenPrices,
} from '../metering/price-table';
import { MAX_TOKEN_COUNT } from '../metering/usage';
import { currencyProblem, MAX_CURRENCY_EXPONENT } from '../accounts/money';
import { limitListSchema, tokenBudgetListSchema } from '../accounts/limits/limit-schema';
import { modelPatternProblem, shadowedEntries } from '../metering/pricing';
import { GATED_ROUTE_FAMILIES } from '../check/routes/route';
import { KEYED_FAMILIES } from '../check/routes/route-table';

/**
 * The operator's config file (CONFIG_FILE, JSON): route table overrides,
 * public routes, accepted version header values, header spellings and the
 * query-key switch. Unknown fields are errors, so a typo never silently
 * falls back to a default.
 */
const pathMatchSpec = z
  .strictObject({
    exact: z.string().startsWith('/').optional(),
    prefix: z.string().startsWith('/').optional(),
    regex: z
      .string()
      .refine((source) => compiles(source), { message: 'is not a valid regular expression' })
      .optional(),
    methods: z
      .array(z.string().regex(/^[A-Za-z]+$/, 'must be an HTTP method name'))
      .nonempty()
      .optional(),
  })
  .refine((spec) => [spec.exact, spec.prefix, spec.regex].filter((v) => v !== undefined).length === 1, {
    message: 'needs exactly one of exact, prefix or regex',
  });

const familyRoutes = Object.fromEntries(KEYED_FAMILIES.map((family) => [family, z.array(pathMatchSpec).nonempty().optional()])) as Record<
  (typeof KEYED_FAMILIES)[number],
  z.ZodOptional<z.ZodArray<typeof pathMatchSpec>>
>;

const PRICE_HINT = `must be a whole number of units (10^-exponent of the currency, micro-dollars by default) per million tokens, from 0 to ${MAX_PRICE_PER_MILLION_TOKENS}`;
const price = z.number({ error: PRICE_HINT }).int(PRICE_HINT).min(0, PRICE_HINT).max(MAX_PRICE_PER_MILLION_TOKENS, PRICE_HINT);
const FEE_HINT = `must be a whole number of units (10^-exponent of the currency) per call, from 0 to ${MAX_FEE_PER_CALL}`;
const feePerCall = z.number({ error: FEE_HINT }).int(FEE_HINT).min(0, FEE_HINT).max(MAX_FEE_PER_CALL, FEE_HINT);

/** `input` and `output` are required; every other token price falls back (PRICE_FALLBACKS), so none is ever free by omission. */
const tokenPriceFields = {
  input: price,
  output: price,
  ...(Object.fromEntries(Object.keys(PRICE_FALLBACKS).map((name) => [name, price.optional()])) as Record<
    OptionalTokenPrice,
    z.ZodOptional<typeof price>
  >),
};

/** Upstreams publish one long-context step today; a few more leave room without making a table unreadable. */
export const MAX_TIERS_PER_ENTRY = 8;

const TIER_HINT = `must be a whole number of prompt tokens from 1 to ${MAX_TOKEN_COUNT}`;

/** A long-context tier: its own token prices above a prompt size; an unset one scales its entry's (tierWithFallbacks). */
const tierSchema = z.strictObject({
  aboveInputTokens: z.number({ error: TIER_HINT }).int(TIER_HINT).min(1, TIER_HINT).max(MAX_TOKEN_COUNT, TIER_HINT),
  ...tokenPriceFields,
});

const tierListSchema = z
  .array(tierSchema)
  .max(MAX_TIERS_PER_ENTRY, `must hold at most ${MAX_TIERS_PER_ENTRY} tiers`)
  .superRefine((tiers, ctx) => {
    tiers.forEach((tier, index) => {
      const before = tiers[index - 1];
      if (before && typeof before.aboveInputTokens === 'number' && tier.aboveInputTokens <= before.aboveInputTokens) {
        ctx.addIssue({
          code: 'custom',
          path: [index, 'aboveInputTokens'],
          message: 'must be above the tier before it (list tiers by rising threshold)',
        });
      }
    });
  })
  .optional();

type ConfiguredTier = z.infer<typeof tierSchema>;

function tiersOf(tiers: readonly ConfiguredTier[] | undefined, entry: TokenPrices): PriceTier[] | undefined {
  if (!tiers || tiers.length === 0) return undefined;
  return tiers.map((tier) => ({ aboveInputTokens: tier.aboveInputTokens, prices: tierWithFallbacks(tier, entry) }));
}

/** A tier's per-call fee is its entry's: tiers change token prices only. */
function priceEntryOf(
  configured: ConfiguredPrices & { tiers?: readonly ConfiguredTier[] | undefined },
  defaultFee: number,
): { prices: TokenPrices; tiers?: PriceTier[] } {
  const prices = withFallbacks(configured, defaultFee);
  const tiers = tiersOf(configured.tiers, prices);
  return tiers ? { prices, tiers } : { prices };
}

export const MAX_PRICED_MODELS = 1_000;

const modelPriceSchema = z.strictObject({
  model: z.string({ error: 'must be a model name or a prefix ending in *' }).superRefine((pattern, ctx) => {
    const problem = modelPatternProblem(pattern);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  }),
  ...tokenPriceFields,
  /** Falls back to the default entry's fee. */
  webSearchCall: feePerCall.optional(),
  tiers: tierListSchema,
});

/**
 * The price table: per model pattern (first match wins), a default, and what to do with models it does not price.
 * The default's `webSearchCall` is required: a per-call fee has no token price to fall back to, and an answer that
 * reports a search must never get it free.
 */
const pricingSchema = z
  .strictObject({
    models: z
      .array(modelPriceSchema)
      .max(MAX_PRICED_MODELS, `must hold at most ${MAX_PRICED_MODELS} entries`)
      .superRefine((entries, ctx) => {
        // zod runs this check even when some entries failed theirs; those are reported on their own.
        const patterns = entries.map((entry) => (typeof entry?.model === 'string' ? entry.model : undefined));
        for (const { index, by } of shadowedEntries(patterns)) {
          ctx.addIssue({
            code: 'custom',
            path: [index, 'model'],
            message: `can never match: entry ${by} ('${patterns[by]}') comes first and takes every model it would (first match wins; put the longer pattern first)`,
          });
        }
      })
      .optional(),
    default: z.strictObject({
      ...tokenPriceFields,
      webSearchCall: z.number({ error: `is required: ${FEE_HINT} (a per-call fee has no token price to fall back to)` }).pipe(feePerCall),
      tiers: tierListSchema,
    }),
    unpricedModels: z.enum(['refuse', 'charge-default'], { error: 'must be "refuse" or "charge-default"' }),
  })
  .transform((pricing): PriceTable => {
    const defaults = priceEntryOf(pricing.default, pricing.default.webSearchCall);
    return {
      models: (pricing.models ?? []).map((entry): ModelPriceEntry => ({
        pattern: entry.model,
        ...priceEntryOf(entry, defaults.prices.webSearchCall),
      })),
      defaultPrices: defaults.prices,
      ...(defaults.tiers ? { defaultTiers: defaults.tiers } : {}),
      unpricedModels: pricing.unpricedModels,
    };
  });

const EXPONENT_HINT = `must be a whole number from 0 to ${MAX_CURRENCY_EXPONENT}: amounts count 10^-exponent of the currency`;

/** What every amount (price, balance, cap, cost) counts: 10^-exponent of an ISO 4217 currency. */
const currencySchema = z
  .strictObject({
    code: z.string({ error: 'must be an ISO 4217 currency code such as "USD"' }),
    exponent: z.number({ error: EXPONENT_HINT }).int(EXPONENT_HINT).min(0, EXPONENT_HINT).max(MAX_CURRENCY_EXPONENT, EXPONENT_HINT),
  })
  .superRefine((currency, ctx) => {
    const problem = currencyProblem(currency);
    if (problem?.startsWith('code:')) ctx.addIssue({ code: 'custom', path: ['code'], message: problem.slice('code: '.length) });
  });

export const configFileSchema = z.strictObject({
  routes: z.strictObject(familyRoutes).optional(),
  publicRoutes: z.array(pathMatchSpec).optional(),
  /** Gated route families to let through although their usage is not metered (src/check/routes/route-table.ts, docs/concepts/billable-routes.md). */
  enabledRoutes: z.array(z.enum(GATED_ROUTE_FAMILIES)).optional(),
  messagesVersions: z
    .array(
      z
        .string()
        .regex(/^\d{4}-\d{2}-\d{2}$/, 'must be a date-form version such as 2023-06-01')
        .refine(isRealDateOrMalformed, 'is not a real date'),
    )
    .nonempty()
    .optional(),
  /** false: accept only the spec's `vendora-version` / `x-vendorg-api-key`, not the vendor spellings. */
  acceptVendorHeaderSpellings: z.boolean().optional(),
  /** true: generative-content routes also accept the key in `?key=` (it is stripped before upstream). */
  acceptQueryKey: z.boolean().optional(),
  /** Request limits and token budgets for every key and account that has no override. */
  defaultPlan: z
    .strictObject({
      key: limitListSchema.optional(),
      account: limitListSchema.optional(),
      tokenBudgets: z.strictObject({ key: tokenBudgetListSchema.optional(), account: tokenBudgetListSchema.optional() }).optional(),
    })
    .optional(),
  /** The unit of every amount; absent: micro-dollars (DEFAULT_CURRENCY). */
  currency: currencySchema.optional(),
  /** Token prices for metering; absent: usage is counted in tokens and nothing is charged for it. */
  pricing: pricingSchema.optional(),
});

export type ConfigFile = z.infer<typeof configFileSchema>;

function compiles(source: string): boolean {
  try {
    new RegExp(source);
    return true;
  } catch {
    return false;
  }
}

/** Rejects 2023-13-45; leaves malformed text to the regex check (zod runs both). */
function isRealDateOrMalformed(value: string): boolean {
  const time = Date.parse(`${value}T00:00:00Z`);
  if (!/^\d{4}-\d{2}-\d{2}$/.test(value)) return true;
  return !Number.isNaN(time) && new Date(time).toISOString().startsWith(value);
}
