import { ManualClock } from '../../../src/platform/clock';
import { NO_TOKEN_BUDGETS, type TokenBudgetPlan } from '../../../src/accounts/limits/token-budgets';
import type { UsageApplyOutcome, UsageRecord } from '../../../src/metering/usage-record';
import { Metrics } from '../../../src/platform/metrics';
import { MemoryStore } from '../../../src/store/memory-store';
import { StoreOutcomeUnknownError, StoreUnavailableError, type UsageLedger } from '../../../src/ports/store';
import { UsageRecorder } from '../../../src/metering/usage-recorder';
import { LogCapture } from '../../support/log-capture';

const T0 = Date.parse('2026-11-22T12:00:00Z');

/**
 * The in-memory store's real ledger, with faults put in front of it: `down`
 * refuses every call (nothing applied), `loseReplies` applies and then throws
 * (a reply lost after Redis applied the script), `poison` refuses one request
 * id for ever; `notDurable` makes every durability check answer that reason.
 */
class FaultyLedger implements UsageLedger {
  readonly streamsOnApply = false;
  notDurable: string | undefined;
  durabilityChecks = 0;
  down = false;
  loseReplies = 0;
  streamDown = false;
  poison = new Set<string>();
  applyCalls = 0;
  streamCalls = 0;
  constructor(readonly store: MemoryStore) {}

  async applyUsage(record: UsageRecord, budgets: TokenBudgetPlan): Promise<UsageApplyOutcome> {
    this.applyCalls += 1;
    await Promise.resolve();
    if (this.down || this.poison.has(record.requestId)) throw new StoreUnavailableError('Redis command failed: connect ECONNREFUSED');
    const outcome = await this.store.applyUsage(record, budgets);
    if (this.loseReplies > 0) {
      this.loseReplies -= 1;
      throw new StoreOutcomeUnknownError('Redis did not answer within 2000 ms');
    }
    return outcome;
  }

  async appendUsageStream(record: UsageRecord, applied: UsageApplyOutcome): Promise<'appended' | 'duplicate'> {
    this.streamCalls += 1;
    await Promise.resolve();
    if (this.down || this.streamDown) throw new StoreUnavailableError('Redis command failed: connect ECONNREFUSED');
    return this.store.appendUsageStream(record, applied);
  }

  async usageDurabilityShortfall(): Promise<string | undefined> {
    this.durabilityChecks += 1;
    await Promise.resolve();
    return this.notDurable;
  }
}

let sequence = 0;
function usage(extra: Partial<UsageRecord> = {}): UsageRecord {
  sequence += 1;
  return {
    requestId: `req-${sequence}`,
    accountId: 'acme',
    keyId: 'key_a',
    keyPrefix: 'gk_live_AbC4',
    family: 'messages',
    style: 'messages',
    model: 'claude-sonnet-4-5',
    tokens: { inputTokens: 10, outputTokens: 5, cachedInputTokens: 0, cacheCreationTokens: 0 },
    costMinorUnits: 3,
    estimated: false,
    atMs: T0,
    ...extra,
  };
}

async function world(options: { maxBuffered?: number; creditBalance?: number } = {}) {
  const store = new MemoryStore(new ManualClock(T0));
  await store.createAccount({
    id: 'acme',
    name: 'Acme',
    status: 'active',
    createdAt: '2026-11-01T00:00:00.000Z',
    creditBalance: options.creditBalance ?? 1_000_000,
  });
  const ledger = new FaultyLedger(store);
  const logs = new LogCapture();
  const metrics = new Metrics({ usageModelLabel: (model) => (model?.startsWith('claude-sonnet-4-5') ? 'claude-sonnet-4-5*' : 'other') });
  const recorder = new UsageRecorder(ledger, NO_TOKEN_BUDGETS, logs.logger, metrics, {
    maxBuffered: options.maxBuffered ?? 1_000,
    batchSize: 10,
    firstRetryMs: 5,
    maxRetryMs: 20,
  });
  metrics.watchUsageBuffer(() => recorder.buffered);
  const counter = async (name: string, labels: Record<string, string> = {}) => {
    const metric = (await metrics.registry.getMetricsAsJSON()).find((m) => m.name === name);
    const values = (metric?.values ?? []) as { value: number; labels: Record<string, string | number> }[];
    return values.filter((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l)).reduce((sum, v) => sum + v.value, 0);
  };
  const balance = async () => (await store.getAccount('acme'))?.creditBalance;
  const streamed = async () => (await store.readUsageStream({ count: 100_000 })).map((entry) => entry.fields.requestId);
  return { store, ledger, logs, metrics, recorder, counter, balance, streamed };
}

const until = async (condition: () => boolean | Promise<boolean>, ms = 2_000) => {
  const end = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
};

describe('UsageRecorder', () => {
  it('applies records as they arrive, in batches, each once, and streams each with how it was billed', async () => {
    const w = await world();
    const records = Array.from({ length: 25 }, () => usage());
    for (const record of records) expect(w.recorder.record(record)).toBe('queued');
    expect(w.recorder.buffered).toBe(25);
    await until(() => w.recorder.buffered === 0);
    expect(await w.balance()).toBe(1_000_000 - 25 * 3);
    expect(await w.streamed()).toEqual(records.map((r) => r.requestId));
    expect((await w.store.readUsageStream({ count: 1 }))[0]?.fields.billing).toBe('prepaid');
    expect(w.ledger.applyCalls).toBe(25);
    expect(await w.counter('gateway_authz_usage_records_total', { outcome: 'applied' })).toBe(25);
    expect(await w.counter('gateway_authz_usage_tokens_total', { kind: 'input', model: 'claude-sonnet-4-5*', style: 'messages' })).toBe(
      250,
    );
    expect(await w.counter('gateway_authz_usage_spend_minor_units_total', { family: 'messages' })).toBe(75);
    expect(await w.counter('gateway_authz_usage_buffered_records')).toBe(0);
  });

  it('keeps records while the store is down, retrying with backoff, and applies them late when it answers', async () => {
    const w = await world();
    w.ledger.down = true;
    for (let i = 0; i < 15; i += 1) w.recorder.record(usage());
    await until(() => w.ledger.applyCalls >= 45);
    expect(w.recorder.buffered).toBe(15);
    expect(await w.counter('gateway_authz_usage_buffered_records')).toBe(15);
    expect(await w.balance()).toBe(1_000_000);
    const retries = w.logs.events('usage_retry');
    expect(retries.length).toBeGreaterThan(0);
    expect(retries.length).toBeLessThan(w.ledger.applyCalls);
    w.ledger.down = false;
    await until(() => w.recorder.buffered === 0);
    expect(await w.balance()).toBe(1_000_000 - 15 * 3);
    expect(await w.counter('gateway_authz_usage_records_total', { outcome: 'applied_late' })).toBe(15);
    expect(await w.counter('gateway_authz_usage_records_total', { outcome: 'applied' })).toBe(0);
  });

  it('counts a record whose reply was lost once: the retry finds it applied, and it is counted as applied late', async () => {
    const w = await world();
    w.ledger.loseReplies = 3;
    const records = [usage(), usage(), usage()];
    for (const record of records) w.recorder.record(record);
    await until(() => w.recorder.buffered === 0);
    expect(await w.balance()).toBe(1_000_000 - 9);
    expect(await w.counter('gateway_authz_usage_records_total', { outcome: 'applied_late' })).toBe(3);
    expect(await w.counter('gateway_authz_usage_spend_minor_units_total')).toBe(9);
    expect(await w.streamed()).toEqual(records.map((r) => r.requestId));
  });

  it('counts a request id applied before (not by this recorder) as a duplicate, changing nothing', async () => {
    const w = await world();
    const record = usage();
    await w.store.applyUsage(record, NO_TOKEN_BUDGETS);
    w.recorder.record(record);
    await until(() => w.recorder.buffered === 0);
    expect(await w.balance()).toBe(1_000_000 - 3);
    expect(await w.counter('gateway_authz_usage_records_total', { outcome: 'duplicate' })).toBe(1);
    expect(await w.counter('gateway_authz_usage_spend_minor_units_total')).toBe(0);
  });

  it('retries only the stream step when the account side is done', async () => {
    const w = await world();
    w.ledger.streamDown = true;
    w.recorder.record(usage());
    await until(() => w.ledger.streamCalls >= 3);
    expect(await w.balance()).toBe(1_000_000 - 3);
    w.ledger.streamDown = false;
    await until(() => w.recorder.buffered === 0);
    expect(w.ledger.applyCalls).toBe(1);
    expect(await w.streamed()).toHaveLength(1);
  });

  it('never lets a record that keeps failing hold up the others', async () => {
    const w = await world();
    const stuck = Array.from({ length: 12 }, () => usage());
    for (const record of stuck) w.ledger.poison.add(record.requestId);
    for (const record of stuck) w.recorder.record(record);
    const others = Array.from({ length: 30 }, () => usage());
    for (const record of others) w.recorder.record(record);
    await until(async () => (await w.streamed()).length === 30);
    expect(w.recorder.buffered).toBe(12);
    expect(await w.balance()).toBe(1_000_000 - 30 * 3);
  });

  it('drops a new record when the buffer is full, logging it in full, and keeps the ones it holds', async () => {
    const w = await world({ maxBuffered: 3 });
    w.ledger.down = true;
    const kept = [usage(), usage(), usage()];
    for (const record of kept) expect(w.recorder.record(record)).toBe('queued');
    const dropped = usage({ costMinorUnits: 77 });
    expect(w.recorder.record(dropped)).toBe('dropped');
    expect(await w.counter('gateway_authz_usage_records_total', { outcome: 'dropped_buffer_full' })).toBe(1);
    expect(w.logs.events('usage_dropped')).toEqual([expect.objectContaining({ maxBuffered: 3, record: dropped })]);
    w.ledger.down = false;
    await until(() => w.recorder.buffered === 0);
    expect(await w.streamed()).toEqual(kept.map((r) => r.requestId));
  });

  it('refuses a record that could never be applied, saying why', async () => {
    const w = await world();
    expect(w.recorder.record(usage({ requestId: 'has space' }))).toBe('invalid');
    expect(w.recorder.record(usage({ costMinorUnits: -1 }))).toBe('invalid');
    expect(w.recorder.record(usage({ tokens: { inputTokens: 1.5, outputTokens: 0, cachedInputTokens: 0, cacheCreationTokens: 0 } }))).toBe(
      'invalid',
    );
    expect(w.recorder.buffered).toBe(0);
    expect(w.logs.events('usage_invalid').map((line) => line.detail)).toEqual([
      expect.stringContaining('requestId'),
      expect.stringContaining('costMinorUnits'),
      expect.stringContaining('tokens.inputTokens'),
    ]);
    expect(await w.counter('gateway_authz_usage_records_total', { outcome: 'invalid' })).toBe(3);
  });

  it('streams a record for an account that does not exist, billed as account_not_found', async () => {
    const w = await world();
    w.recorder.record(usage({ accountId: 'ghost' }));
    await until(() => w.recorder.buffered === 0);
    expect((await w.store.readUsageStream({ count: 1 }))[0]?.fields).toMatchObject({ accountId: 'ghost', billing: 'account_not_found' });
    expect(await w.counter('gateway_authz_usage_records_total', { outcome: 'account_not_found' })).toBe(1);
    expect(w.logs.events('usage_unbilled')).toHaveLength(1);
  });

  it('on stop, sends everything buffered, waiting for a store that comes back before the deadline', async () => {
    const w = await world();
    w.ledger.down = true;
    for (let i = 0; i < 40; i += 1) w.recorder.record(usage());
    setTimeout(() => (w.ledger.down = false), 100);
    await w.recorder.stop(Date.now() + 5_000);
    expect(w.recorder.buffered).toBe(0);
    expect(await w.balance()).toBe(1_000_000 - 40 * 3);
    expect(w.logs.events('usage_unapplied')).toEqual([]);
  });

  it('on stop with the store down past the deadline, logs and counts every record left, applied or not', async () => {
    const w = await world();
    w.ledger.streamDown = true;
    const applied = usage();
    w.recorder.record(applied);
    await until(() => w.ledger.streamCalls >= 1);
    w.ledger.down = true;
    const unapplied = [usage(), usage()];
    for (const record of unapplied) w.recorder.record(record);
    const started = Date.now();
    await w.recorder.stop(Date.now() + 150);
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(w.recorder.buffered).toBe(0);
    const lines = w.logs.events('usage_unapplied');
    expect(lines).toHaveLength(3);
    expect(lines.find((line) => (line.record as UsageRecord).requestId === applied.requestId)).toMatchObject({ appliedToAccount: true });
    expect(await w.counter('gateway_authz_usage_records_total', { outcome: 'dropped_at_shutdown' })).toBe(2);
    expect(await w.counter('gateway_authz_usage_records_total', { outcome: 'unstreamed_at_shutdown' })).toBe(1);
    // After stop, a record is refused at once, logged, never sent.
    expect(w.recorder.record(usage())).toBe('dropped');
    expect(w.logs.events('usage_unapplied')).toHaveLength(4);
  });

  it('keeps applied records until the ledger says they are durable, sending them again, and counts each once', async () => {
    const w = await world();
    w.ledger.notDurable = 'WAIT 1: 0 replica(s) acknowledged within 500 ms';
    const records = [usage(), usage(), usage()];
    for (const record of records) w.recorder.record(record);
    await until(() => w.ledger.durabilityChecks >= 3);
    expect(w.recorder.buffered).toBe(3);
    // Applied once; every later attempt finds the marker and changes nothing.
    expect(await w.balance()).toBe(1_000_000 - 9);
    expect(w.ledger.applyCalls).toBeGreaterThanOrEqual(9);
    expect(w.logs.events('usage_not_durable')[0]).toMatchObject({ records: 3, detail: w.ledger.notDurable });
    expect(await w.counter('gateway_authz_usage_records_total')).toBe(0);
    w.ledger.notDurable = undefined;
    await until(() => w.recorder.buffered === 0);
    expect(await w.balance()).toBe(1_000_000 - 9);
    expect(await w.streamed()).toEqual(records.map((r) => r.requestId));
    expect(await w.counter('gateway_authz_usage_records_total', { outcome: 'applied' })).toBe(3);
    expect(await w.counter('gateway_authz_usage_spend_minor_units_total')).toBe(9);
  });

  it('on stop, logs and counts a record applied but never confirmed durable', async () => {
    const w = await world();
    w.ledger.notDurable = 'WAIT 1: 0 replica(s) acknowledged within 500 ms';
    const record = usage();
    w.recorder.record(record);
    await until(() => w.ledger.durabilityChecks >= 1);
    await w.recorder.stop(Date.now() + 100);
    expect(w.logs.events('usage_unconfirmed')).toEqual([expect.objectContaining({ record, detail: w.ledger.notDurable })]);
    expect(await w.counter('gateway_authz_usage_records_total', { outcome: 'unconfirmed_at_shutdown' })).toBe(1);
  });
});
