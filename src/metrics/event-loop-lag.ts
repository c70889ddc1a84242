import { performance } from 'node:perf_hooks';

/** Lateness under this is timer granularity, not a blocked loop. */
const GRANULARITY_MS = 1;

/**
 * How long the event loop was just blocked (a GC pause, a long callback), for
 * timing Checks from their arrival rather than from when their handler ran: a
 * Check that arrives during a pause is read only after it, so a timer started
 * in its handler misses the wait.
 *
 * A timer due every `periodMs` measures how late it fires. The lateness holds
 * for the rest of that loop turn (the I/O read right after the timers phase,
 * which is where Checks that arrived during the pause are read) and is
 * cleared in the turn's check phase. It is an estimate: a pause shorter than
 * the period, or one the timer was not due in, is seen only in part, and
 * Checks read in a later turn than the one right after the pause get none of it.
 * The hot path reads one number; nothing is allocated per Check.
 */
export class EventLoopLag {
  private lagMs = 0;
  private expectedAt = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly periodMs = 5) {}

  start(): void {
    if (this.timer) return;
    this.schedule();
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.lagMs = 0;
  }

  /** Milliseconds the loop was blocked before the current turn; 0 when it was not. */
  currentMs(): number {
    return this.lagMs;
  }

  private schedule(): void {
    this.expectedAt = performance.now() + this.periodMs;
    this.timer = setTimeout(this.tick, this.periodMs);
    this.timer.unref();
  }

  private readonly tick = (): void => {
    const late = performance.now() - this.expectedAt;
    if (late > GRANULARITY_MS) {
      this.lagMs = late;
      setImmediate(this.clear);
    }
    this.schedule();
  };

  private readonly clear = (): void => {
    this.lagMs = 0;
  };
}
