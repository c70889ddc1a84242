import type { UsageRecord } from '../../src/metering/usage-record';

/**
 * A metered messages answer as the usage recorder hands it to the store: the
 * fields a test varies are given, the rest (family, style, model, a few
 * tokens, exact usage) are a plain answer's.
 */
export function messagesUsageRecord(fields: {
  requestId: string;
  accountId: string;
  keyId: string;
  keyPrefix?: string;
  costMinorUnits?: number;
  inputTokens?: number;
  outputTokens?: number;
  atMs: number;
}): UsageRecord {
  return {
    requestId: fields.requestId,
    accountId: fields.accountId,
    keyId: fields.keyId,
    keyPrefix: fields.keyPrefix ?? 'gk_live_AbC4',
    family: 'messages',
    style: 'messages',
    model: 'claude-sonnet-4-5',
    tokens: { inputTokens: fields.inputTokens ?? 3, outputTokens: fields.outputTokens ?? 4, cachedInputTokens: 0, cacheCreationTokens: 0 },
    costMinorUnits: fields.costMinorUnits ?? 0,
    estimated: false,
    atMs: fields.atMs,
  };
}
