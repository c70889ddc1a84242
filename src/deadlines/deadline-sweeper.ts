import { performance } from 'node:perf_hooks';

/** Something waiting for an answer until `deadline` (performance.now() ms); `settled` once answered or failed. */
export interface Expiring {
  readonly deadline: number;
  settled: boolean;
}

/**
 * One timer for many deadlines, instead of one each: entries that all get
 * the same allowance from the moment they are added have deadlines that
 * only grow in the order they are added (the Redis commands of a connection,
 * the gRPC calls with one grpc-timeout). The timer is armed for the oldest
 * entry still waiting; when it fires, and once pending I/O has run (so an
 * answer that arrived in the same turn of the event loop wins), it expires
 * every entry past its deadline and re-arms for the next. A healthy
 * connection costs one timer per deadline period, not one per entry, and
 * nothing per entry that could outlive a scavenge.
 */
export class DeadlineSweeper<Entry extends Expiring> {
  /** In issue order, so in deadline order; entries before `head` are done. */
  private entries: (Entry | undefined)[] = [];
  private head = 0;
  private timer: NodeJS.Timeout | undefined;
  private sweepPending = false;

  constructor(
    /** Called (once) for a command whose deadline passed unanswered; must settle it. */
    private readonly expire: (entry: Entry) => void,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Entries must come in deadline order: the same allowance from issue time. */
  add(entry: Entry): void {
    this.entries.push(entry);
    if (this.timer === undefined && !this.sweepPending) this.arm(entry.deadline);
  }

  /**
   * Call once the command is settled. Answers come back about in issue
   * order, so answered commands leave from the front at once: the sweeper
   * holds only what is in flight, and nothing it holds outlives its answer
   * for long (which would get it promoted to the old generation).
   */
  settled(): void {
    const entries = this.entries;
    while (this.head < entries.length && entries[this.head]!.settled) {
      entries[this.head] = undefined;
      this.head += 1;
    }
    if (this.head === entries.length) {
      this.entries = [];
      this.head = 0;
    } else if (this.head > 1024 && this.head * 2 > entries.length) {
      this.entries = entries.slice(this.head);
      this.head = 0;
    }
  }

  /** Commands still held (answered ones behind an unanswered one included); for tests. */
  get size(): number {
    return this.entries.length - this.head;
  }

  /** Stops the timer (on close); nothing expires afterwards. */
  stop(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.entries = [];
    this.head = 0;
  }

  private arm(deadline: number): void {
    this.timer = setTimeout(this.fire, Math.max(0, Math.ceil(deadline - this.now())));
    // The connection's socket keeps the process alive while commands wait.
    this.timer.unref();
  }

  private readonly fire = (): void => {
    this.timer = undefined;
    this.sweepPending = true;
    setImmediate(this.sweep);
  };

  private readonly sweep = (): void => {
    this.sweepPending = false;
    const now = this.now();
    const entries = this.entries;
    for (let at = this.head; at < entries.length; at += 1) {
      const entry = entries[at];
      // expire settles the entry and calls settled(), which clears the answered ones behind it too (answered out of order).
      if (entry === undefined || entry.settled) continue;
      if (entry.deadline > now) {
        this.settled();
        this.arm(entry.deadline);
        return;
      }
      this.expire(entry);
    }
    this.settled();
  };
}
