import { decimalText } from '../accounts/money';
import type { UsageApplyOutcome, UsageRecord } from '../metering/usage-record';

/**
 * The usage stream's entry, field by field: the contract with the billing
 * system (docs/concepts/metering.md documents each field). Every field is
 * always present, as text; never a key, a hash or a prompt. `version` names
 * this layout: a field is only ever added, and a change of meaning gets a new
 * version.
 */
export const USAGE_STREAM_VERSION = '1';

/**
 * The two fields that say how a record was billed. Where the stream entry is
 * written by the script that applies the record (gwaApplyAndStreamUsage),
 * the script fills in their values.
 */
export const USAGE_STREAM_BILLING_FIELD = 'billing';
export const USAGE_STREAM_SHORTFALL_FIELD = 'creditShortfall';

/** The exact cost counts millionths of a minor unit (prices are per million tokens): six fraction digits at most. */
const EXACT_COST_FRACTION_DIGITS = 6;

export function usageStreamFields(record: UsageRecord, applied: UsageApplyOutcome): [string, string][] {
  const billing = applied.kind === 'account_not_found' ? 'account_not_found' : applied.billing;
  const shortfall = applied.kind === 'account_not_found' ? 0 : applied.creditShortfall;
  const { tokens, charge } = record;
  const oneHourWrites = tokens.cacheCreation1hTokens ?? 0;
  return [
    ['version', USAGE_STREAM_VERSION],
    ['requestId', record.requestId],
    ['accountId', record.accountId],
    ['keyId', record.keyId],
    ['keyPrefix', record.keyPrefix],
    ['family', record.family],
    ['style', record.style],
    ['model', record.model ?? ''],
    ['inputTokens', String(tokens.inputTokens)],
    ['outputTokens', String(tokens.outputTokens)],
    ['cachedInputTokens', String(tokens.cachedInputTokens)],
    ['cacheCreationTokens', String(tokens.cacheCreationTokens)],
    ['costMinorUnits', String(record.costMinorUnits)],
    // Added with the price record (docs/concepts/pricing.md): each priced part, and how the cost was reached. '' without a price table.
    ['cacheCreation5mTokens', String(tokens.cacheCreationTokens - oneHourWrites)],
    ['cacheCreation1hTokens', String(oneHourWrites)],
    ['reasoningTokens', String(tokens.reasoningTokens ?? 0)],
    ['inputAudioTokens', String(tokens.inputAudioTokens ?? 0)],
    ['inputImageTokens', String(tokens.inputImageTokens ?? 0)],
    ['outputAudioTokens', String(tokens.outputAudioTokens ?? 0)],
    ['outputImageTokens', String(tokens.outputImageTokens ?? 0)],
    ['webSearchCalls', String(tokens.webSearchCalls ?? 0)],
    ['exactCostMinorUnits', charge ? decimalText(BigInt(charge.exactCostMillionths), EXACT_COST_FRACTION_DIGITS) : ''],
    ['priceTableHash', charge?.priceTableHash ?? ''],
    ['pricePattern', charge?.pricePattern ?? ''],
    ['priceTier', charge?.tierAboveInputTokens !== undefined ? String(charge.tierAboveInputTokens) : ''],
    ['currency', charge?.currency.code ?? ''],
    ['currencyExponent', charge ? String(charge.currency.exponent) : ''],
    ['estimated', record.estimated ? 'true' : 'false'],
    // Why the estimate replaced the upstream's usage (a MalformedUsageReason); '' for a report believed, or none at all.
    ['malformed', record.malformed ?? ''],
    [USAGE_STREAM_BILLING_FIELD, billing],
    [USAGE_STREAM_SHORTFALL_FIELD, String(shortfall)],
    ['time', new Date(record.atMs).toISOString()],
    ['timeMs', String(record.atMs)],
  ];
}
