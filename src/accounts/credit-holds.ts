import { CREDIT_LIMIT_MINOR_UNITS } from './credit';
import { chargedPrices, type PriceTable, type TokenPrices } from '../metering/price-table';
import { MAX_TOKEN_COUNT } from '../metering/usage';

/**
 * A credit hold: what an allowed Check reserves for its request until the
 * answer is metered, as a card network holds an amount at authorization.
 * Without it every Check of a burst sees the balance (or the month's spend,
 * or a token budget) as it was before any answer in flight is charged, and
 * all of them pass.
 *
 * The store keeps no record per hold, only sums per time slot (HOLD_SLOT_US)
 * for the account and for each key: an allowed Check adds its hold to the
 * current slot, and the holds in flight are the last HOLD_SLOTS slots'. So a
 * hold whose answer never comes lapses with its slot, and placing one costs
 * the Check's store step no more than a wider field it reads and writes
 * anyway (docs/concepts/credit-holds.md, Cost). The Check tells metering what
 * it placed (PlacedHold, in HOLD_HEADER), and the usage record of the
 * request's x-request-id, applied once, takes exactly that off its slot in
 * the same atomic step as the debit.
 */
export interface CreditHold {
  /** Envoy's x-request-id: the usage record of the same id releases it. */
  readonly requestId: string;
  /** Held against a prepaid balance and the monthly spend caps. */
  readonly minorUnits: number;
  /** Held against the token budgets. */
  readonly tokens: number;
}

/** What an allowed Check held: its slot, and money and tokens where something counts them (else 0). */
export interface PlacedHold {
  readonly slot: number;
  readonly minorUnits: number;
  readonly tokens: number;
}

/**
 * The shortest time a hold outlives its Check when no answer releases it: the
 * shipped envoy.yaml's request timeout (60 s for the whole request to arrive)
 * and its route timeout (600 s from then to the answer's end), so no answer is
 * metered later than that, plus a minute for the usage record to reach the
 * store (its recorder retries while Redis is away).
 * test/deploy/envoy-config.test.ts holds the two timeouts to it.
 */
export const HOLD_LIFETIME_US = (60 + 600 + 60) * 1_000_000;

/** The slots holds are summed in: one holds for the rest of its own slot and the one after it. */
export const HOLD_SLOTS = 2;
export const HOLD_SLOT_US = HOLD_LIFETIME_US / (HOLD_SLOTS - 1);

/** The longest a hold whose answer never comes is counted: placed at the start of its slot. */
export const HOLD_LONGEST_LIFETIME_US = HOLD_SLOTS * HOLD_SLOT_US;

/** The slot of a Check at `nowUs` on the decision clock. */
export function holdSlotAt(nowUs: number): number {
  return Math.floor(nowUs / HOLD_SLOT_US);
}

/**
 * The request header an allowed Check sets to what it held (`<slot> <minorUnits> <tokens>`), for the usage processor
 * to release: set on every allow that holds, removed from every other, so a client can never send its own.
 */
export const HOLD_HEADER = 'x-gateway-hold';

export function formatPlacedHold(hold: PlacedHold): string {
  return `${hold.slot} ${hold.minorUnits} ${hold.tokens}`;
}

/** A hold as HOLD_HEADER carries it, or undefined for any other text. */
export function parsePlacedHold(text: string): PlacedHold | undefined {
  const match = /^([0-9]{1,16}) ([0-9]{1,16}) ([0-9]{1,16})$/.exec(text);
  if (match === null) return undefined;
  const [slot, minorUnits, tokens] = [Number(match[1]), Number(match[2]), Number(match[3])];
  if (!Number.isSafeInteger(slot) || minorUnits > CREDIT_LIMIT_MINOR_UNITS || tokens > 2 * MAX_TOKEN_COUNT) return undefined;
  return { slot, minorUnits, tokens };
}

/**
 * The holds in flight of one account or key, by slot: `money[i]` and `tokens[i]` were placed in slot `slot − i`.
 * The in-memory store keeps these; the Redis store packs the same numbers into the rate-limit bucket fields it reads
 * and writes on every decision (src/store/redis/lua/authorize/held-sums.lua).
 */
export interface HoldSlots {
  slot: number;
  money: number[];
  tokens: number[];
}

function emptyHoldSlots(slot: number): HoldSlots {
  return { slot, money: new Array<number>(HOLD_SLOTS).fill(0), tokens: new Array<number>(HOLD_SLOTS).fill(0) };
}

/** The slots as of `slot`: those that have passed dropped, the rest moved along; a slot behind the stored one keeps them. */
export function holdSlotsAt(slots: HoldSlots | undefined, slot: number): HoldSlots {
  if (slots === undefined) return emptyHoldSlots(slot);
  const moved = emptyHoldSlots(Math.max(slot, slots.slot));
  const shift = moved.slot - slots.slot;
  for (let i = 0; i + shift < HOLD_SLOTS; i += 1) {
    moved.money[i + shift] = slots.money[i]!;
    moved.tokens[i + shift] = slots.tokens[i]!;
  }
  return moved;
}

/** The money and tokens the slots hold in all. */
export function heldInSlots(slots: HoldSlots): { minorUnits: number; tokens: number } {
  return { minorUnits: slots.money.reduce((a, b) => a + b, 0), tokens: slots.tokens.reduce((a, b) => a + b, 0) };
}

/** A hold metered (or let go) taken off the slot it was placed in; one whose slot has passed is gone already. */
export function releaseFromSlots(slots: HoldSlots, hold: PlacedHold): void {
  const i = slots.slot - hold.slot;
  if (i < 0 || i >= HOLD_SLOTS) return;
  slots.money[i] = Math.max(slots.money[i]! - hold.minorUnits, 0);
  slots.tokens[i] = Math.max(slots.tokens[i]! - hold.tokens, 0);
}

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
