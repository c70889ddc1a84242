import type { MeteredResponse, MeteredResponseSink } from '../domain/metered-response';
import type { PriceTable } from '../domain/pricing';
import type { ClientStyle } from '../domain/route';
import type { UsageRecord } from '../domain/usage-record';
import { FAMILY_HEADER_RULES } from '../routes/family-header-rules';
import { chargedPrices, costOf } from './pricing';

/**
 * The usage record of a metered answer, as the usage ledger applies it; none
 * for an answer that costs nothing (an error answer, a request that is not
 * a generation, an answer that never came). Identity and request id are
 * what the processor read from the request headers (ext_authz's identity
 * headers and Envoy's x-request-id), so an answer without them never gets
 * here. The cost is the price table's, rounded up once per answer; 0
 * without a price table (usage is then counted in tokens only).
 */
export function usageRecordOf(response: MeteredResponse, prices: PriceTable | undefined): UsageRecord | undefined {
  if (response.outcome.kind === 'free') return undefined;
  const { tokens, estimated } = response.outcome.usage;
  return {
    requestId: response.requestId,
    accountId: response.accountId,
    keyId: response.keyId,
    keyPrefix: response.keyPrefix,
    family: response.family,
    style: styleOf(response.family),
    ...(response.model !== undefined ? { model: response.model } : {}),
    tokens,
    costMinorUnits: prices ? costOf(tokens, chargedPrices(prices, response.model).prices).minorUnits : 0,
    estimated,
    atMs: response.observedAtMs,
  };
}

/** The client style of a metered family (the metrics' `style` label); `models` and the rest are never metered. */
function styleOf(family: MeteredResponse['family']): ClientStyle {
  return family === 'models' ? 'generic' : FAMILY_HEADER_RULES[family].style;
}

/** Where usage records go: the UsageRecorder, which buffers and never throws or waits. */
export interface UsageRecordTarget {
  record(record: UsageRecord): unknown;
}

/** Where the hold of an answer that costs nothing goes (the store); a failure only leaves the hold to lapse. */
export interface HoldReleaseTarget {
  releaseHold(accountId: string, requestId: string): Promise<void>;
}

/**
 * The processor's sink that hands every metered answer to the usage ledger,
 * which releases its credit hold with the debit; an answer that costs nothing
 * has no record, so its hold is released here, at once (best effort: one
 * that fails lapses with its lifetime, src/domain/credit-holds.ts).
 */
export function usageLedgerSink(
  target: UsageRecordTarget,
  prices: PriceTable | undefined,
  holds?: HoldReleaseTarget,
  onReleaseFailed?: (error: unknown) => void,
): MeteredResponseSink {
  return {
    record(response) {
      const record = usageRecordOf(response, prices);
      if (record) target.record(record);
      else holds?.releaseHold(response.accountId, response.requestId).catch((error: unknown) => onReleaseFailed?.(error));
    },
  };
}
