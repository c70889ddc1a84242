import type { Clock } from '../domain/clock';
import type { Logger } from '../logging/logger';
import type { LastUse, LastUsedSink } from './store';
import type { KeyIds } from '../domain/key-records';

/**
 * Records when keys were last used without touching the hot path: a Check
 * only notes the use in memory; a timer writes the latest use of each key in
 * one batch, so each key gets at most one write per flush interval.
 */
export class LastUsedRecorder {
  private pending = new Map<string, LastUse>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly sink: LastUsedSink,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly flushIntervalMs: number,
    /** Flush early past this many distinct keys, so memory stays bounded under a flood. */
    private readonly maxPending = 50_000,
    /**
     * Keys written per store call. A flush of many keys is sent in chunks, each
     * awaited before the next, so Redis interleaves the Checks of every replica
     * with them instead of running thousands of writes back to back. Measured
     * on a 2-core machine, 10,000 keys flushed while Checks ran: unchunked,
     * the slowest Check waited 270-340 ms (past Envoy's 200 ms); in chunks of
     * 100, under 11 ms, and the flush took no longer.
     */
    private readonly chunkSize = 100,
  ) {}

  start(): void {
    this.timer ??= setInterval(() => void this.flush(), this.flushIntervalMs);
    this.timer.unref();
  }

  note(ids: KeyIds): void {
    this.pending.set(ids.keyId, { ...ids, atMs: this.clock.now() });
    if (this.pending.size >= this.maxPending) void this.flush();
  }

  /** Writes what is pending; a failed batch is logged and dropped (it is only a timestamp). */
  flush(): Promise<void> {
    if (this.pending.size === 0) return this.flushing;
    const batch = [...this.pending.values()];
    this.pending = new Map();
    this.flushing = this.flushing.then(async () => {
      for (let start = 0; start < batch.length; start += this.chunkSize) {
        const chunk = batch.slice(start, start + this.chunkSize);
        try {
          await this.sink.recordLastUsed(chunk);
        } catch (error) {
          this.logger.warn({ event: 'last_used', keys: chunk.length, detail: (error as Error).message }, 'could not record last use');
        }
      }
    });
    return this.flushing;
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.flush();
  }
}
