import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../platform/logger';
import type { TokenBudgetPlan } from '../accounts/limits/token-budgets';
import { usageRecordProblem, type UsageApplyOutcome, type UsageRecord } from './usage-record';
import { CorruptRecordError, type UsageLedger } from '../ports/store';

/** What became of a record handed to the recorder (the `outcome` label of gateway_authz_usage_records_total). */
export type UsageRecordOutcome =
  /** Applied to its account at the first attempt. */
  | 'applied'
  /** Applied after one or more failed attempts (Redis down, slow or unreachable): late, not lost. */
  | 'applied_late'
  /** Its request id had been applied already (not by an earlier attempt of this process): nothing changed. */
  | 'duplicate'
  /** No such account: nothing to debit; it still went to the usage stream. */
  | 'account_not_found'
  /** Refused when handed over: it could never be applied (logged with what is wrong). */
  | 'invalid'
  /** The buffer was full: refused and logged in full (event usage_dropped), never applied. */
  | 'dropped_buffer_full'
  /** Still unapplied when the shutdown deadline passed: logged in full (event usage_unapplied). */
  | 'dropped_at_shutdown'
  /** Applied to its account, but not yet in the usage stream when the shutdown deadline passed: logged in full. */
  | 'unstreamed_at_shutdown'
  /** Applied, but not confirmed durable (USAGE_DURABILITY) when the shutdown deadline passed: logged in full (event usage_unconfirmed). */
  | 'unconfirmed_at_shutdown';

export interface UsageRecorderMetrics {
  observeUsageRecord(outcome: UsageRecordOutcome): void;
  /** Once per record applied to its account (not for duplicates): its tokens and cost. */
  observeUsageApplied(record: UsageRecord): void;
}

export interface UsageRecorderOptions {
  /** Records held at most (USAGE_BUFFER_MAX_RECORDS); past it a new record is dropped and logged. */
  maxBuffered: number;
  /** Records sent to the store at once (each is its own script call; ioredis pipelines them). */
  batchSize?: number;
  /** Pause after a batch of which nothing succeeded, doubled after each such batch up to maxRetryMs. */
  firstRetryMs?: number;
  maxRetryMs?: number;
}

interface Pending {
  readonly record: UsageRecord;
  /** Set once the account side is done: how it was billed, for the stream entry. */
  applied?: UsageApplyOutcome;
  streamed: boolean;
  /** Attempts to apply that failed: a later 'duplicate' is then this process's own earlier attempt, applied late. */
  failedApplies: number;
  /** The store's first answer: what the metrics count, however often a record not yet durable is sent again. */
  firstAnswer?: UsageApplyOutcome;
  /** Answered, but not confirmed durable: sent again, and Redis may yet lose it. */
  unconfirmed: boolean;
}

/**
 * Usage is money, so a record is never dropped because Redis stumbled: it
 * waits in a bounded in-process buffer and is retried with backoff until
 * Redis answers, then applied exactly once (the store's marker by request
 * id makes a retry after a lost reply harmless). Records go to the store in
 * batches as soon as they arrive, one batch in flight at a time, so a busy
 * processor sends many records per round trip and a quiet one sends each at
 * once. A record that keeps failing goes to the back, so it never holds up
 * the others. On shutdown, stop() keeps sending until the buffer is empty or
 * its deadline passes; what is left is logged record by record (no record
 * holds a key or a prompt), so an operator can still bill it.
 *
 * When the buffer is full a new record is refused (and logged in full), not
 * an older one: the older ones may already be on their way to Redis.
 *
 * A record leaves the buffer only once its writes are durable as the
 * deployment asks (USAGE_DURABILITY, the ledger's usageDurabilityShortfall,
 * asked once per batch): until then it stays and is sent again, which its
 * markers make harmless. Where the ledger streams on apply, the debit, the
 * record and its stream entry are one write, kept or lost together.
 */
export class UsageRecorder {
  private queue: Pending[] = [];
  private inFlight: Pending[] = [];
  private sending: Promise<void> | undefined;
  private scheduled = false;
  private retryTimer: NodeJS.Timeout | undefined;
  private retryMs: number;
  private readonly batchSize: number;
  private readonly firstRetryMs: number;
  private readonly maxRetryMs: number;
  /** Failure log lines are limited to one per failed batch, with the count since the last one and the last error. */
  private failuresSinceLog = 0;
  private lastError = '';
  private stopped = false;

  constructor(
    private readonly ledger: UsageLedger,
    private readonly budgets: TokenBudgetPlan,
    private readonly logger: Logger,
    private readonly metrics: UsageRecorderMetrics,
    private readonly options: UsageRecorderOptions,
  ) {
    this.batchSize = options.batchSize ?? 100;
    this.firstRetryMs = options.firstRetryMs ?? 100;
    this.maxRetryMs = options.maxRetryMs ?? 5_000;
    this.retryMs = this.firstRetryMs;
  }

  /** Records waiting to be applied or streamed, including those being sent now. */
  get buffered(): number {
    return this.queue.length + this.inFlight.length;
  }

  /** Hands a record over; it is applied as soon as the store answers. Never throws, never waits. */
  record(record: UsageRecord): 'queued' | 'invalid' | 'dropped' {
    if (this.stopped) {
      this.metrics.observeUsageRecord('dropped_at_shutdown');
      this.logger.error(
        { event: 'usage_unapplied', appliedToAccount: false, streamed: false, record },
        'shut down: usage record not applied',
      );
      return 'dropped';
    }
    const problem = usageRecordProblem(record);
    if (problem !== undefined) {
      this.metrics.observeUsageRecord('invalid');
      this.logger.error(
        { event: 'usage_invalid', detail: problem, record: safeView(record) },
        'usage record refused: it can never be applied',
      );
      return 'invalid';
    }
    if (this.buffered >= this.options.maxBuffered) {
      this.metrics.observeUsageRecord('dropped_buffer_full');
      this.logger.error(
        { event: 'usage_dropped', maxBuffered: this.options.maxBuffered, record },
        'usage buffer full (the store has not answered for a while): record dropped, not applied',
      );
      return 'dropped';
    }
    this.queue.push({ record, streamed: false, failedApplies: 0, unconfirmed: false });
    this.schedule();
    return 'queued';
  }

  /**
   * Sends everything buffered, keeping at it until the buffer is empty or
   * `deadlineMs` (wall clock) has passed; then logs and counts what is left.
   * Records handed over meanwhile are sent too.
   */
  async stop(deadlineMs: number): Promise<void> {
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    while (this.buffered > 0 && Date.now() < deadlineMs) {
      if (this.sending) await this.sending;
      else if (this.queue.length > 0) {
        const progressed = await this.sendBatch();
        if (!progressed) await sleep(Math.min(this.retryMs, Math.max(0, deadlineMs - Date.now())));
      }
    }
    if (this.sending) await this.sending;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    this.stopped = true;
    const left = [...this.queue, ...this.inFlight];
    this.queue = [];
    for (const pending of left) {
      if (pending.unconfirmed && pending.applied === undefined) {
        this.metrics.observeUsageRecord('unconfirmed_at_shutdown');
        this.logger.error(
          { event: 'usage_unconfirmed', detail: this.lastError, record: pending.record },
          'shutting down: usage record applied but not confirmed durable (USAGE_DURABILITY): Redis may still lose it',
        );
        continue;
      }
      const applied = pending.applied !== undefined;
      this.metrics.observeUsageRecord(applied ? 'unstreamed_at_shutdown' : 'dropped_at_shutdown');
      this.logger.error(
        { event: 'usage_unapplied', appliedToAccount: applied, streamed: pending.streamed, record: pending.record },
        applied ? 'shutting down: usage record applied but not in the usage stream' : 'shutting down: usage record not applied',
      );
    }
  }

  /** Sends the next batch once the current turn of the event loop has handed over its records. */
  private schedule(): void {
    if (this.scheduled || this.sending || this.retryTimer) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      if (!this.sending && !this.retryTimer && this.queue.length > 0) void this.sendBatch();
    });
  }

  /** One batch; true when at least one record made progress (so Redis answers). Then the next batch follows at once. */
  private sendBatch(): Promise<boolean> {
    const batch = this.queue.splice(0, this.batchSize);
    this.inFlight = batch;
    const run = (async () => {
      const results = await Promise.all(batch.map((pending) => this.settle(pending)));
      const durable = await this.confirmDurable(batch.filter((pending) => pending.streamed));
      this.inFlight = [];
      // Anything unfinished goes to the back: one record that keeps failing never holds up the others.
      const unfinished = batch.filter((pending) => !pending.streamed);
      this.queue.push(...unfinished);
      // Redis answered, but what it answered may yet be lost: back off as if it had not.
      const progressed = durable && results.some(Boolean);
      if (progressed) this.retryMs = this.firstRetryMs;
      return { progressed, unfinished: unfinished.length };
    })();
    this.sending = run.then(() => undefined);
    return run.then(({ progressed, unfinished }) => {
      this.sending = undefined;
      if (unfinished > 0) this.logFailures();
      if (progressed) this.schedule();
      else this.retryLater();
      return progressed;
    });
  }

  private retryLater(): void {
    if (this.retryTimer) return;
    const pause = this.retryMs;
    this.retryMs = Math.min(this.retryMs * 2, this.maxRetryMs);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      this.schedule();
    }, pause);
    this.retryTimer.unref();
  }

  /**
   * The records of a batch whose writes were all answered leave the buffer
   * (and are counted) only once the ledger says those writes are durable;
   * otherwise they are marked to be sent again. True when durable.
   */
  private async confirmDurable(done: Pending[]): Promise<boolean> {
    if (done.length === 0) return true;
    let shortfall: string | undefined;
    try {
      shortfall = await this.ledger.usageDurabilityShortfall();
    } catch (error) {
      shortfall = `durability not confirmed: ${(error as Error).message}`;
    }
    if (shortfall === undefined) {
      for (const pending of done) this.observeApplied(pending, pending.firstAnswer ?? pending.applied!);
      return true;
    }
    for (const pending of done) {
      pending.applied = undefined;
      pending.streamed = false;
      pending.unconfirmed = true;
    }
    this.lastError = shortfall;
    this.logger.warn(
      { event: 'usage_not_durable', records: done.length, buffered: this.buffered, retryInMs: this.retryMs, detail: shortfall },
      'usage records applied but not yet durable as USAGE_DURABILITY asks: kept and sent again',
    );
    return false;
  }

  /** Both steps of one record; true when a step succeeded. Errors are counted, logged (limited) and retried. */
  private async settle(pending: Pending): Promise<boolean> {
    let progressed = false;
    try {
      if (pending.applied === undefined) {
        try {
          pending.applied = await this.ledger.applyUsage(pending.record, this.budgets);
        } catch (error) {
          pending.failedApplies += 1;
          throw error;
        }
        pending.firstAnswer ??= pending.applied;
        // One step where the ledger writes the stream entry with the record.
        if (this.ledger.streamsOnApply) pending.streamed = true;
        progressed = true;
      }
      if (!pending.streamed) {
        await this.ledger.appendUsageStream(pending.record, pending.applied);
        pending.streamed = true;
        progressed = true;
      }
    } catch (error) {
      this.failuresSinceLog += 1;
      if (error instanceof CorruptRecordError) {
        // Retrying cannot help until the record is repaired; it stays buffered (and counted) until then.
        this.logger.error(
          { event: 'usage_apply_failed', detail: error.message, accountId: pending.record.accountId, requestId: pending.record.requestId },
          'usage record cannot be applied: the record in Redis that detail names needs repair',
        );
      }
      this.lastError = (error as Error).message;
    }
    return progressed;
  }

  private logFailures(): void {
    if (this.failuresSinceLog === 0) return;
    this.logger.warn(
      { event: 'usage_retry', failures: this.failuresSinceLog, buffered: this.buffered, retryInMs: this.retryMs, detail: this.lastError },
      'usage records not applied yet: the store did not answer; retrying',
    );
    this.failuresSinceLog = 0;
  }

  private observeApplied(pending: Pending, outcome: UsageApplyOutcome): void {
    switch (outcome.kind) {
      case 'applied':
        this.metrics.observeUsageRecord(pending.failedApplies > 0 ? 'applied_late' : 'applied');
        this.metrics.observeUsageApplied(pending.record);
        return;
      case 'duplicate':
        // After a failed attempt of ours, the first application was almost surely that attempt (its reply was lost).
        if (pending.failedApplies > 0) {
          this.metrics.observeUsageRecord('applied_late');
          this.metrics.observeUsageApplied(pending.record);
        } else {
          this.metrics.observeUsageRecord('duplicate');
        }
        return;
      case 'account_not_found':
        this.metrics.observeUsageRecord('account_not_found');
        this.logger.warn(
          { event: 'usage_unbilled', accountId: pending.record.accountId, requestId: pending.record.requestId },
          'usage record for an account that does not exist: nothing debited; it goes to the usage stream',
        );
        return;
    }
  }
}

/** An invalid record is logged without anything that failed its checks being trusted as text: lengths are bounded. */
function safeView(record: UsageRecord): Record<string, unknown> {
  return JSON.parse(JSON.stringify(record, (_key, value: unknown) => (typeof value === 'string' ? value.slice(0, 200) : value))) as Record<
    string,
    unknown
  >;
}
