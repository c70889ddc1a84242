import type { UsageApplyOutcome, UsageRecord } from '../domain/usage-record';

/**
 * The usage stream's entry, field by field: the contract with the billing
 * system (README "Usage and billing" documents each field). Every field is
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

export function usageStreamFields(record: UsageRecord, applied: UsageApplyOutcome): [string, string][] {
  const billing = applied.kind === 'account_not_found' ? 'account_not_found' : applied.billing;
  const shortfall = applied.kind === 'account_not_found' ? 0 : applied.creditShortfall;
  const { tokens } = record;
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
    ['estimated', record.estimated ? 'true' : 'false'],
    [USAGE_STREAM_BILLING_FIELD, billing],
    [USAGE_STREAM_SHORTFALL_FIELD, String(shortfall)],
    ['time', new Date(record.atMs).toISOString()],
    ['timeMs', String(record.atMs)],
  ];
}
