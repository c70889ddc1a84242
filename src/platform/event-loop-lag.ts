import { performance } from 'node:perf_hooks';

/** Lateness under this is timer granularity, not a blocked loop. */
const GRANULARITY_MS = 1;

/**
 * How long the event loop was just blocked (a GC pause, a long callback), for
 * timing Checks from their arrival rather than from when their handler ran: a
 * Check that arrives during a pause is read only after it, so a timer started
 * in its handler misses the wait.
 *
 * A timer is due every `periodMs`, and the wait is read from it two ways:
 * - it is overdue now: the loop has not been free to run it for that long
 *   (a pause in this turn's timers phase, whose I/O is read before the timer runs);
 * - it fired late in this turn: the lateness holds for the I/O read right
 *   after the timers phase (a pause in the previous turn), and is cleared in
 *   this turn's check phase.
 * It is an estimate, not a per-Check arrival time: a Check that arrived in the
 * middle of a pause is charged the whole pause (an upper bound), one read in a
 * later turn than the one right after the pause is charged none of it, and a
 * pause shorter than the period may be missed. The hot path reads two numbers;
 * nothing is allocated per Check.
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

  /** Milliseconds the loop was just blocked, `nowMs` being performance.now(); 0 when it was not. */
  currentMs(nowMs: number): number {
    const overdue = nowMs - this.expectedAt;
    return overdue > GRANULARITY_MS && overdue > this.lagMs ? overdue : this.lagMs;
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
