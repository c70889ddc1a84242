import type { MeteredResponse } from '../../../src/metering/metered-response';
import { DEFAULT_CURRENCY } from '../../../src/accounts/money';
import { withFallbacks, type PriceTable } from '../../../src/metering/price-table';
import { pricingOf } from '../../../src/metering/pricing';
import { usageRecordProblem, type UsageRecord } from '../../../src/metering/usage-record';
import { usageLedgerSink, usageRecordOf } from '../../../src/metering/usage-ledger-sink';

const TABLE: PriceTable = {
  models: [{ pattern: 'gpt-4o-mini*', prices: withFallbacks({ input: 150_000, output: 600_000, cachedInput: 75_000 }, 10_000) }],
  defaultPrices: withFallbacks({ input: 1_000_000, output: 1_000_000 }, 10_000),
  unpricedModels: 'charge-default',
};
const PRICES = pricingOf(TABLE, DEFAULT_CURRENCY);

const AT = Date.UTC(2026, 10, 23, 12, 0, 0);

function answer(extra: Partial<MeteredResponse> = {}): MeteredResponse {
  return {
    requestId: 'req-1',
    accountId: 'acme',
    keyId: 'key_ki7sq0QuenAUq8kr',
    keyPrefix: 'gk_live_1mm5',
    family: 'chat-completions',
    model: 'gpt-4o-mini-2024-07-18',
    outcome: {
      kind: 'metered',
      usage: {
        tokens: { inputTokens: 1_000, outputTokens: 2_000, cachedInputTokens: 4_000, cacheCreationTokens: 0 },
        estimated: false,
        final: true,
        streamComplete: true,
      },
    },
    delivery: 'complete',
    httpStatus: 200,
    observedAtMs: AT,
    ...extra,
  };
}

describe('usageRecordOf: a metered answer as the ledger applies it', () => {
  it('carries the identity, request id, model, tokens and time, and the price table cost rounded up once', () => {
    const record = usageRecordOf(answer(), PRICES);
    // 1,000 × 0.15 + 2,000 × 0.6 + 4,000 × 0.075 = 150 + 1,200 + 300 = 1,650 minor units.
    expect(record).toEqual({
      requestId: 'req-1',
      accountId: 'acme',
      keyId: 'key_ki7sq0QuenAUq8kr',
      keyPrefix: 'gk_live_1mm5',
      family: 'chat-completions',
      style: 'chat',
      model: 'gpt-4o-mini-2024-07-18',
      tokens: { inputTokens: 1_000, outputTokens: 2_000, cachedInputTokens: 4_000, cacheCreationTokens: 0 },
      costMinorUnits: 1_650,
      charge: {
        priceTableHash: PRICES.tableHash,
        pricePattern: 'gpt-4o-mini*',
        exactCostMillionths: '1650000000',
        currency: DEFAULT_CURRENCY,
      },
      estimated: false,
      atMs: AT,
    });
    expect(usageRecordProblem(record!)).toBeUndefined();
  });

  it("charges a messages answer's 1-hour cache writes their own price, and records them among the cache writes", () => {
    const prices = pricingOf(
      {
        models: [
          {
            pattern: 'claude-sonnet-4-5*',
            prices: withFallbacks(
              { input: 3_000_000, output: 15_000_000, cachedInput: 300_000, cacheCreation: 3_750_000, cacheCreation1h: 6_000_000 },
              10_000,
            ),
          },
        ],
        defaultPrices: TABLE.defaultPrices,
        unpricedModels: 'refuse',
      },
      DEFAULT_CURRENCY,
    );
    const tokens = { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, cacheCreationTokens: 1_000, cacheCreation1hTokens: 600 };
    const record = usageRecordOf(
      answer({
        family: 'messages',
        model: 'claude-sonnet-4-5',
        outcome: { kind: 'metered', usage: { tokens, estimated: false, final: true, streamComplete: true } },
      }),
      prices,
    )!;
    // 400 × 3.75 + 600 × 6 = 5,100 minor units (with one price for every write: 3,750).
    expect(record.costMinorUnits).toBe(5_100);
    expect(record.tokens.cacheCreationTokens).toBe(1_000);
    expect(usageRecordProblem(record)).toBeUndefined();
  });

  it('a record whose charge does not re-price to its cost, or whose parts exceed their counts, is refused', () => {
    const record = usageRecordOf(answer(), PRICES)!;
    const charge = record.charge!;
    expect(usageRecordProblem({ ...record, charge: { ...charge, exactCostMillionths: '1650000001' } })).toBe(
      'charge.exactCostMillionths rounded up must be costMinorUnits',
    );
    expect(usageRecordProblem({ ...record, charge: { ...charge, exactCostMillionths: '1.5' } })).toContain('decimal digits');
    expect(usageRecordProblem({ ...record, charge: { ...charge, currency: { code: 'usd', exponent: 6 } } })).toContain('currency');
    expect(usageRecordProblem({ ...record, tokens: { ...record.tokens, reasoningTokens: 2_001 } })).toBe(
      'tokens.reasoningTokens must be a whole number from 0 to tokens.outputTokens',
    );
    expect(usageRecordProblem({ ...record, tokens: { ...record.tokens, webSearchCalls: 10_001 } })).toContain('webSearchCalls');
  });

  it('charges the default prices for a model the table does not price, and for an answer naming no model', () => {
    const tokens = { inputTokens: 1, outputTokens: 1, cachedInputTokens: 0, cacheCreationTokens: 0 };
    const usage = { tokens, estimated: false, final: true, streamComplete: true };
    expect(usageRecordOf(answer({ model: 'other-model', outcome: { kind: 'metered', usage } }), PRICES)?.costMinorUnits).toBe(2);
    const { model: _model, ...unnamed } = answer({ outcome: { kind: 'metered', usage } });
    const record = usageRecordOf(unnamed, PRICES)!;
    expect(record.costMinorUnits).toBe(2);
    expect('model' in record).toBe(false);
  });

  /** An answer charged the estimate of 10 input and 3 output tokens, with `extra` in its usage. */
  const estimatedAnswer = (extra: { malformed?: 'total-mismatch' } = {}) =>
    answer({
      outcome: {
        kind: 'metered',
        usage: {
          tokens: { inputTokens: 10, outputTokens: 3, cachedInputTokens: 0, cacheCreationTokens: 0 },
          estimated: true,
          ...extra,
          final: true,
          streamComplete: true,
        },
      },
    });

  it('costs 0 without a price table (tokens only), and keeps the estimated flag', () => {
    expect(usageRecordOf(estimatedAnswer(), undefined)).toMatchObject({ costMinorUnits: 0, estimated: true, tokens: { inputTokens: 10 } });
  });

  it('says in the record why an estimate replaced a malformed usage, and says nothing for one believed', () => {
    expect(usageRecordOf(estimatedAnswer({ malformed: 'total-mismatch' }), PRICES)).toMatchObject({
      estimated: true,
      malformed: 'total-mismatch',
    });
    expect('malformed' in usageRecordOf(answer(), PRICES)!).toBe(false);
  });

  it('names the style of each metered family', () => {
    expect(usageRecordOf(answer({ family: 'messages' }), PRICES)?.style).toBe('messages');
    expect(usageRecordOf(answer({ family: 'generative-content' }), PRICES)?.style).toBe('generative');
  });

  it('makes no record of an answer that costs nothing (an error answer, no answer at all)', () => {
    expect(usageRecordOf(answer({ outcome: { kind: 'free', reason: 'error-status' }, httpStatus: 429 }), PRICES)).toBeUndefined();
    expect(usageRecordOf(answer({ outcome: { kind: 'free', reason: 'no-response' }, delivery: 'disconnected' }), PRICES)).toBeUndefined();
  });

  it('a disconnected answer is recorded with what it delivered', () => {
    const cut = answer({
      delivery: 'disconnected',
      outcome: {
        kind: 'metered',
        usage: {
          tokens: { inputTokens: 7, outputTokens: 4, cachedInputTokens: 0, cacheCreationTokens: 0 },
          estimated: false,
          final: false,
          streamComplete: false,
        },
      },
    });
    expect(usageRecordOf(cut, PRICES)?.tokens).toEqual({ inputTokens: 7, outputTokens: 4, cachedInputTokens: 0, cacheCreationTokens: 0 });
  });
});

describe('usageLedgerSink', () => {
  it('hands each metered answer to the recorder as its usage record, and nothing for a free one', () => {
    const recorded: UsageRecord[] = [];
    const sink = usageLedgerSink({ record: (record) => recorded.push(record) }, PRICES);
    sink.record(answer());
    sink.record(answer({ requestId: 'req-2', outcome: { kind: 'free', reason: 'error-status' } }));
    expect(recorded).toEqual([usageRecordOf(answer(), PRICES)]);
  });
});
