import type { MeteredResponse, MeteredResponseSink } from './metered-response';
import type { PlacedHold } from '../accounts/credit-holds';
import type { ClientStyle } from '../check/routes/route';
import type { UsageRecord } from './usage-record';
import { FAMILY_HEADER_RULES } from '../check/routes/family-header-rules';
import { chargeOf, type Pricing } from './pricing';

/**
 * The usage record of a metered answer, as the usage ledger applies it; none
 * for an answer that costs nothing (an error answer, a request that is not
 * a generation, an answer that never came). Identity and request id are
 * what the processor read from the request headers (ext_authz's identity
 * headers and Envoy's x-request-id), so an answer without them never gets
 * here. The cost is the price table's, rounded up once per answer, with
 * how it was reached (the record's charge); 0 and no charge without a price
 * table (usage is then counted in tokens only).
 */
export function usageRecordOf(response: MeteredResponse, pricing: Pricing | undefined): UsageRecord | undefined {
  if (response.outcome.kind === 'free') return undefined;
  const { tokens, estimated, malformed } = response.outcome.usage;
  const charged = pricing ? chargeOf(pricing, response.model, tokens) : undefined;
  return {
    requestId: response.requestId,
    accountId: response.accountId,
    keyId: response.keyId,
    keyPrefix: response.keyPrefix,
    family: response.family,
    ...(response.hold ? { hold: response.hold } : {}),
    style: styleOf(response.family),
    ...(response.model !== undefined ? { model: response.model } : {}),
    tokens,
    costMinorUnits: charged ? charged.costMinorUnits : 0,
    ...(charged ? { charge: charged.charge } : {}),
    estimated,
    ...(malformed !== undefined ? { malformed } : {}),
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
  releaseHold(accountId: string, keyId: string, requestId: string, hold: PlacedHold): Promise<void>;
}

/**
 * The processor's sink that hands every metered answer to the usage ledger,
 * which releases its credit hold with the debit; an answer that costs nothing
 * has no record, so its hold is released here, at once (best effort: one
 * that fails lapses with its lifetime, src/accounts/credit-holds.ts).
 */
export function usageLedgerSink(
  target: UsageRecordTarget,
  pricing: Pricing | undefined,
  holds?: HoldReleaseTarget,
  onReleaseFailed?: (error: unknown) => void,
): MeteredResponseSink {
  return {
    record(response) {
      const record = usageRecordOf(response, pricing);
      if (record) target.record(record);
      else if (response.hold) {
        holds
          ?.releaseHold(response.accountId, response.keyId, response.requestId, response.hold)
          .catch((error: unknown) => onReleaseFailed?.(error));
      }
    },
  };
}
