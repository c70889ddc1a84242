import type { Clock } from '../platform/clock';

/** Why a Check was answered without a decision. Neither answer is ever an allow. */
export type ShedReason = 'over_capacity' | 'past_deadline';

/**
 * Admission of Checks, independent of the transport: at most `maxInFlight`
 * Checks are being decided at once, and a Check whose caller has already
 * given up is not started. Past saturation a queue only moves every answer
 * past Envoy's deadline (and Redis replies past theirs); answering the excess
 * at once lets Envoy retry it on another replica, or answer its
 * `status_on_error`, while the admitted Checks keep their latency.
 *
 * The count is per process: with GRPC_WORKERS=N the service admits up to
 * N × maxInFlight.
 */
export class CheckAdmission {
  private inFlight = 0;

  /** `clock`: the one the transport's deadlines are on (src/transport: the system clock). */
  constructor(
    readonly maxInFlight: number,
    private readonly clock: Clock,
  ) {}

  /**
   * `deadlineMs`: when the caller gives up, in the clock's epoch milliseconds
   * (Infinity when it set no deadline). Returns undefined when admitted, and
   * the caller then owes exactly one release(); otherwise why it is shed.
   */
  admit(deadlineMs: number): ShedReason | undefined {
    if (this.full) return 'over_capacity';
    // The clock is read only for Checks that carry a deadline (Envoy always sends one).
    if (deadlineMs !== Infinity && deadlineMs <= this.clock.now()) return 'past_deadline';
    this.inFlight += 1;
    return undefined;
  }

  /** Every place is taken: the next Check would be shed over_capacity. */
  get full(): boolean {
    return this.inFlight >= this.maxInFlight;
  }

  release(): void {
    this.inFlight -= 1;
  }

  get checksInFlight(): number {
    return this.inFlight;
  }
}
