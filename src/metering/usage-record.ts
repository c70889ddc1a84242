import { MAX_CURRENCY_EXPONENT, type Currency } from '../accounts/money';
import { MAX_RESPONSE_COST_MINOR_UNITS } from './price-table';
import type { ClientStyle, RouteFamily } from '../check/routes/route';
import { isTokenCount, MAX_CALL_COUNT, TOKEN_PARTS, type MalformedUsageReason, type TokenCounts } from './usage';
import { ACCOUNT_ID_PATTERN, KEY_ID_PATTERN } from '../keys/key-records';
import { formatPlacedHold, parsePlacedHold, type PlacedHold } from '../accounts/credit-holds';

/**
 * What one metered answer cost, as it is applied to the account (balance,
 * monthly spend, token budgets, usage aggregates) and sent to the billing
 * stream. Never a key, a key hash, a prompt or any text of the answer: only
 * ids, the display prefix, counts and the model name.
 */
export interface UsageRecord {
  /**
   * Envoy's `x-request-id`: applying the same request id twice changes
   * nothing the second time (see the store's idempotency marker).
   */
  readonly requestId: string;
  readonly accountId: string;
  readonly keyId: string;
  /** Display prefix only. */
  readonly keyPrefix: string;
  readonly family: RouteFamily;
  readonly style: ClientStyle;
  /** The model the answer named; absent when it named none. */
  readonly model?: string;
  readonly tokens: TokenCounts;
  /** Integer minor units, already rounded up per answer (src/metering/pricing.ts); 0 without a price table. */
  readonly costMinorUnits: number;
  /** How the cost was reached, enough to re-price the record; absent without a price table. */
  readonly charge?: UsageCharge;
  /** True when the counts are an estimate, never the upstream's report. */
  readonly estimated: boolean;
  /** Why the estimate replaced the upstream's usage, when that usage contradicted itself; absent otherwise. */
  readonly malformed?: MalformedUsageReason;
  /** When the answer ended (epoch ms): the hour, day and month it is counted in. */
  readonly atMs: number;
  /** The credit hold its Check placed (src/accounts/credit-holds.ts), released when the record is applied; absent: none. */
  readonly hold?: PlacedHold;
}

/**
 * What a billing system needs, beside the counts, to recompute a record's
 * cost: which prices applied, the exact cost before the one rounding up, and
 * what the integers count.
 */
export interface UsageCharge {
  /** The price table that priced it (src/metering/pricing.ts priceTableHash). */
  readonly priceTableHash: string;
  /** The price entry's model pattern; absent when the default prices applied. */
  readonly pricePattern?: string;
  /** The long-context tier's threshold, when one applied. */
  readonly tierAboveInputTokens?: number;
  /**
   * The exact cost in millionths of a minor unit, as decimal digits (it can
   * pass 2^53): Σ count × price per million tokens + calls × fee × 10^6.
   * costMinorUnits is it divided by 10^6, rounded up.
   */
  readonly exactCostMillionths: string;
  readonly currency: Currency;
}

/** Sums over usage records: what the usage API and the aggregates hold per group and period. */
export interface UsageTotals {
  /** Metered answers. */
  requests: number;
  inputTokens: number;
  outputTokens: number;
  cachedInputTokens: number;
  cacheCreationTokens: number;
  costMinorUnits: number;
  /** Answers whose counts were estimated. */
  estimatedRequests: number;
}

export const USAGE_TOTAL_NAMES = [
  'requests',
  'inputTokens',
  'outputTokens',
  'cachedInputTokens',
  'cacheCreationTokens',
  'costMinorUnits',
  'estimatedRequests',
] as const satisfies readonly (keyof UsageTotals)[];

export function zeroUsageTotals(): UsageTotals {
  return {
    requests: 0,
    inputTokens: 0,
    outputTokens: 0,
    cachedInputTokens: 0,
    cacheCreationTokens: 0,
    costMinorUnits: 0,
    estimatedRequests: 0,
  };
}

/** What one record adds to any sum it is counted in. */
export function usageTotalsOf(record: UsageRecord): UsageTotals {
  return {
    requests: 1,
    inputTokens: record.tokens.inputTokens,
    outputTokens: record.tokens.outputTokens,
    cachedInputTokens: record.tokens.cachedInputTokens,
    cacheCreationTokens: record.tokens.cacheCreationTokens,
    costMinorUnits: record.costMinorUnits,
    estimatedRequests: record.estimated ? 1 : 0,
  };
}

export function addUsageTotals(into: UsageTotals, more: UsageTotals): UsageTotals {
  for (const name of USAGE_TOTAL_NAMES) into[name] += more[name];
  return into;
}

/** Request ids are Envoy's UUIDs; any printable ASCII word up to this length is accepted. */
export const MAX_REQUEST_ID_LENGTH = 128;
export const MAX_MODEL_NAME_LENGTH = 256;

function isModelName(model: unknown): boolean {
  // eslint-disable-next-line no-control-regex
  return typeof model === 'string' && model.length > 0 && model.length <= MAX_MODEL_NAME_LENGTH && !/[\u0000-\u001f\u007f]/.test(model);
}

const METERED_FAMILIES: readonly RouteFamily[] = ['chat-completions', 'messages', 'generative-content'];
const STYLES: readonly ClientStyle[] = ['chat', 'messages', 'generative', 'generic'];

/**
 * What is wrong with a record, or undefined. A record is checked once, when
 * it is handed to the recorder: one that could never be applied is refused
 * there (and logged), never retried for ever.
 */
export function usageRecordProblem(record: UsageRecord): string | undefined {
  if (typeof record.requestId !== 'string' || !/^[\x21-\x7e]+$/.test(record.requestId) || record.requestId.length > MAX_REQUEST_ID_LENGTH)
    return `requestId must be 1 to ${MAX_REQUEST_ID_LENGTH} printable ASCII characters without spaces`;
  if (typeof record.accountId !== 'string' || !ACCOUNT_ID_PATTERN.test(record.accountId)) return 'accountId is not an account id';
  if (typeof record.keyId !== 'string' || !KEY_ID_PATTERN.test(record.keyId)) return 'keyId is not a key id';
  if (typeof record.keyPrefix !== 'string' || !/^[\x21-\x7e]{1,64}$/.test(record.keyPrefix)) return 'keyPrefix is not a display prefix';
  if (!METERED_FAMILIES.includes(record.family)) return `family must be one of ${METERED_FAMILIES.join(', ')}`;
  if (!STYLES.includes(record.style)) return `style must be one of ${STYLES.join(', ')}`;
  if (record.model !== undefined && !isModelName(record.model)) {
    return `model must be 1 to ${MAX_MODEL_NAME_LENGTH} characters without control characters`;
  }
  const tokens = record.tokens as Partial<TokenCounts> | undefined;
  for (const name of ['inputTokens', 'outputTokens', 'cachedInputTokens', 'cacheCreationTokens'] as const) {
    if (!isTokenCount(tokens?.[name])) return `tokens.${name} must be a whole number from 0 to 10^9`;
  }
  for (const [part, whole] of TOKEN_PARTS) {
    const count = tokens?.[part];
    if (count !== undefined && (!isTokenCount(count) || count > tokens![whole]!))
      return `tokens.${part} must be a whole number from 0 to tokens.${whole}`;
  }
  const calls = tokens?.webSearchCalls;
  if (calls !== undefined && (!Number.isSafeInteger(calls) || calls < 0 || calls > MAX_CALL_COUNT))
    return `tokens.webSearchCalls must be a whole number from 0 to ${MAX_CALL_COUNT}`;
  if (!Number.isSafeInteger(record.costMinorUnits) || record.costMinorUnits < 0 || record.costMinorUnits > MAX_RESPONSE_COST_MINOR_UNITS)
    return `costMinorUnits must be a whole number from 0 to ${MAX_RESPONSE_COST_MINOR_UNITS}`;
  if (record.charge !== undefined) {
    const problem = chargeProblem(record.charge, record.costMinorUnits);
    if (problem) return `charge.${problem}`;
  }
  if (typeof record.estimated !== 'boolean') return 'estimated must be true or false';
  if (!Number.isSafeInteger(record.atMs) || record.atMs <= 0) return 'atMs must be a time in epoch milliseconds';
  if (record.hold !== undefined && parsePlacedHold(formatPlacedHold(record.hold)) === undefined)
    return 'hold must be a slot, minor units and tokens, whole numbers within their bounds';
  return undefined;
}

const MILLION = 1_000_000n;

function chargeProblem(charge: UsageCharge, costMinorUnits: number): string | undefined {
  if (typeof charge.priceTableHash !== 'string' || !/^[0-9a-f]{1,64}$/.test(charge.priceTableHash))
    return 'priceTableHash must be hex digits';
  if (charge.pricePattern !== undefined && !isModelName(charge.pricePattern)) return 'pricePattern must be a model pattern';
  const tier = charge.tierAboveInputTokens;
  if (tier !== undefined && !isTokenCount(tier)) return 'tierAboveInputTokens must be a whole number from 0 to 10^9';
  if (typeof charge.exactCostMillionths !== 'string' || !/^(0|[1-9][0-9]{0,24})$/.test(charge.exactCostMillionths))
    return 'exactCostMillionths must be decimal digits';
  // The one rounding: a record whose cost is not its exact cost rounded up could never be re-priced to itself.
  if ((BigInt(charge.exactCostMillionths) + MILLION - 1n) / MILLION !== BigInt(costMinorUnits))
    return 'exactCostMillionths rounded up must be costMinorUnits';
  // The settings checked the currency against the runtime's list; here only its form, on every record.
  const currency = charge.currency as Partial<Currency> | undefined;
  const exponent = currency?.exponent;
  if (
    typeof currency?.code !== 'string' ||
    !/^[A-Z]{3}$/.test(currency.code) ||
    !Number.isInteger(exponent) ||
    exponent! < 0 ||
    exponent! > MAX_CURRENCY_EXPONENT
  )
    return 'currency must be an ISO 4217 code and an exponent';
  return undefined;
}

/** How an applied record was billed: debited from a prepaid balance, or counted as post-paid spend. */
export type UsageBilling = 'prepaid' | 'postpaid';

/** What applying one record to its account did. */
export type UsageApplyOutcome =
  | {
      kind: 'applied';
      billing: UsageBilling;
      /**
       * Minor units of the cost not debited because the balance reached
       * −10^15 (CREDIT_LIMIT_MINOR_UNITS): added to the account's
       * creditShortfall instead, never lost. Almost always 0.
       */
      creditShortfall: number;
    }
  /** Applied before (same account and request id): nothing changed now; what the first application did. */
  | { kind: 'duplicate'; billing: UsageBilling; creditShortfall: number }
  /** No such account: nothing to debit. The record still goes to the usage stream. */
  | { kind: 'account_not_found' };
