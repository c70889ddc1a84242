import type { UsageApplyOutcome, UsageRecord } from '../domain/usage-record';

/**
 * The usage stream's entry, field by field: the contract with the billing
 * system (docs/concepts/metering.md documents each field). Every field is
 * always present, as text; never a key, a hash or a prompt. `version` names
 * this layout: a field is only ever added, and a change of meaning gets a new
 * version.
 */
export const USAGE_STREAM_VERSION = '1';

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
    ['billing', billing],
    ['creditShortfall', String(shortfall)],
    ['time', new Date(record.atMs).toISOString()],
    ['timeMs', String(record.atMs)],
  ];
}
