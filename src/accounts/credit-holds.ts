import { CREDIT_LIMIT_MINOR_UNITS } from './credit';
import { chargedPrices, type PriceTable, type TokenPrices } from '../metering/price-table';
import { MAX_TOKEN_COUNT } from '../metering/usage';

/**
 * A credit hold: what an allowed Check reserves for its request until the
 * answer is metered, as a card network holds an amount at authorization.
 * Without it every Check of a burst sees the balance (or the month's spend,
 * or a token budget) as it was before any answer in flight is charged, and
 * all of them pass. The store keeps holds per account by Envoy's
 * x-request-id; metering releases the hold of its request id in the same
 * atomic step as the debit, and a hold whose answer never comes expires
 * after HOLD_LIFETIME_US.
 */
export interface CreditHold {
  /** Envoy's x-request-id: the usage record of the same id releases it. */
  readonly requestId: string;
  /** Held against a prepaid balance and the monthly spend caps. */
  readonly minorUnits: number;
  /** Held against the token budgets. */
  readonly tokens: number;
}

/**
 * How long a hold outlives its Check when no answer releases it: the shipped
 * envoy.yaml's request timeout (60 s for the whole request to arrive) and its
 * route timeout (600 s from then to the answer's end), so no answer is metered
 * later than that, plus a minute for the usage record to reach the store (its
 * recorder retries while Redis is away). test/deploy/envoy-config.test.ts
 * holds the two timeouts to it.
 */
export const HOLD_LIFETIME_US = (60 + 600 + 60) * 1_000_000;

/**
 * Output tokens held when the request's own limit is not visible at Check
 * (no body sent, a body cut before the field, or a request that sets none):
 * the common default output cap of the APIs' SDKs and of most models' served
 * limits; an answer longer than that is debited in full at metering all the
 * same.
 */
export const DEFAULT_HOLD_OUTPUT_TOKENS = 4096;

/** The request's own output limit and size, as far as Check can see them. */
export interface HoldInputs {
  /** The model the request names, when Check knows it (path or body). */
  readonly model: string | undefined;
  /** max_tokens, max_completion_tokens, max_output_tokens or generationConfig.maxOutputTokens, when the body shows one. */
  readonly maxOutputTokens: number | undefined;
  /** Input tokens estimated from the request's size, when known. */
  readonly inputTokens: number | undefined;
}

/** The two prices a hold is reckoned at. */
type HoldPrices = Pick<TokenPrices, 'input' | 'output'>;

const dearestPrices = new WeakMap<PriceTable, HoldPrices>();

/**
 * The highest input and output prices in the table (entries, default and their long-context tiers): for a request
 * whose model Check cannot see.
 */
function dearestOf(table: PriceTable): HoldPrices {
  let dearest = dearestPrices.get(table);
  if (dearest === undefined) {
    const all = [
      table.defaultPrices,
      ...(table.defaultTiers ?? []).map((tier) => tier.prices),
      ...table.models.flatMap((entry) => [entry.prices, ...(entry.tiers ?? []).map((tier) => tier.prices)]),
    ];
    dearest = { input: Math.max(...all.map((prices) => prices.input)), output: Math.max(...all.map((prices) => prices.output)) };
    dearestPrices.set(table, dearest);
  }
  return dearest;
}

/** ⌈(input × inputPrice + output × outputPrice) / 10^6⌉, exact: doubles when every term is a safe integer, else BigInt. */
function costOfHold(inputTokens: number, outputTokens: number, prices: HoldPrices): number {
  const exact = inputTokens * prices.input + outputTokens * prices.output;
  if (Number.isSafeInteger(exact)) return Math.ceil(exact / 1_000_000);
  const millionths = BigInt(inputTokens) * BigInt(prices.input) + BigInt(outputTokens) * BigInt(prices.output);
  return Number((millionths + 999_999n) / 1_000_000n);
}

/**
 * The hold of one request: its input estimated from its size as metering
 * estimates an answer's input (src/metering/usage-estimate.ts), its output
 * from its own limit else DEFAULT_HOLD_OUTPUT_TOKENS, priced at its model's
 * prices (its long-context tier included), or at the table's dearest when
 * Check does not know the model (or its default prices for a model the table
 * does not price). No price table:
 * nothing is charged, so only tokens are held.
 */
export function estimateHold(requestId: string, inputs: HoldInputs, pricing: PriceTable | undefined): CreditHold {
  const inputTokens = Math.min(inputs.inputTokens ?? 0, MAX_TOKEN_COUNT);
  const outputTokens = Math.min(inputs.maxOutputTokens ?? DEFAULT_HOLD_OUTPUT_TOKENS, MAX_TOKEN_COUNT);
  let minorUnits = 0;
  if (pricing) {
    // A known model's prices, in the long-context tier its estimated input is above, as metering will charge it.
    const prices = inputs.model === undefined ? dearestOf(pricing) : chargedPrices(pricing, inputs.model, inputTokens).prices;
    minorUnits = Math.min(costOfHold(inputTokens, outputTokens, prices), CREDIT_LIMIT_MINOR_UNITS);
  }
  return { requestId, minorUnits, tokens: inputTokens + outputTokens };
}

/**
 * After a first release, how long until an abandoned hold is released once more: the store may still run the script
 * that places it after the first release, queued behind whatever made the Check fail (a stall, a failover).
 */
export const ABANDONED_HOLD_RELEASED_AGAIN_MS = 5_000;

/**
 * Lets go of the hold of a Check answered store_unavailable (decide's onHoldAbandoned): released at once and again
 * after ABANDONED_HOLD_RELEASED_AGAIN_MS. A release of a hold that is not there changes nothing, so both are safe;
 * one that fails is reported, and the hold lapses after HOLD_LIFETIME_US.
 */
export function releaseAbandonedHold(
  holds: { releaseHold(accountId: string, requestId: string): Promise<void> },
  accountId: string,
  requestId: string,
  onFailed: (error: unknown) => void,
  againAfterMs = ABANDONED_HOLD_RELEASED_AGAIN_MS,
): void {
  const release = () => void holds.releaseHold(accountId, requestId).catch(onFailed);
  release();
  setTimeout(release, againAfterMs).unref();
}
