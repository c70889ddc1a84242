import { performance } from 'node:perf_hooks';

/** Something waiting for an answer until `deadline` (performance.now() ms); `settled` once answered or failed. */
export interface Expiring {
  readonly deadline: number;
  settled: boolean;
}

/** Settles behind an unanswered head that start a compaction, at the least. */
const COMPACT_AFTER_SETTLED = 512;

/**
 * One timer for many deadlines, instead of one each: entries that all get
 * the same allowance from the moment they are added have deadlines that
 * only grow in the order they are added (the Redis commands of a connection,
 * the gRPC calls with one grpc-timeout). The timer is armed for the oldest
 * entry still waiting; when it fires, and once the loop has read its sockets
 * after the deadline (so an answer that came in meanwhile wins; see sweep),
 * it expires every entry past its deadline and re-arms for the next. A healthy
 * connection costs one timer per deadline period, not one per entry, and
 * nothing per entry that could outlive a scavenge.
 */
export class DeadlineSweeper<Entry extends Expiring> {
  /** In issue order, so in deadline order; entries before `head` are done. */
  private entries: (Entry | undefined)[] = [];
  private head = 0;
  /** settled() calls since the entries were last compacted: about how many answered entries wait behind the head. */
  private settledSinceCompaction = 0;
  /**
   * Settles that start the next compaction: at least as many as it kept unanswered the last time, so each entry
   * walked again is paid for by a settle, and a compaction costs O(1) per add and settle.
   */
  private compactAfter = COMPACT_AFTER_SETTLED;
  /** A sweep is walking the entries by index: they are not compacted under it. */
  private sweeping = false;
  private timer: NodeJS.Timeout | undefined;
  private sweepPending = false;
  /** Set by a sweep's first step: what was due by then expires in the second, if still unanswered. */
  private cutoff: number | undefined;

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
   * Call once the command is settled. Answered entries at the front leave at
   * once. Answers need not come in issue order: a gRPC server's calls shed at
   * once sit behind admitted ones still waiting for Redis. Those are dropped
   * by a compaction once they outnumber the entries still waiting, so the
   * sweeper holds about what is in flight and nothing it holds outlives its
   * answer for long: under overload, answered calls held for a slow one's
   * hundreds of milliseconds were promoted to the old generation by the
   * hundred thousand a second.
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
      this.settledSinceCompaction = 0;
      return;
    }
    this.settledSinceCompaction += 1;
    if (this.settledSinceCompaction >= this.compactAfter && !this.sweeping) this.compact();
  }

  /** Keeps the unanswered entries, in order (so still in deadline order), and drops the answered ones. */
  private compact(): void {
    const entries = this.entries;
    let kept = 0;
    for (let at = this.head; at < entries.length; at += 1) {
      const entry = entries[at];
      if (entry !== undefined && !entry.settled) entries[kept++] = entry;
    }
    entries.length = kept;
    this.head = 0;
    this.settledSinceCompaction = 0;
    this.compactAfter = Math.max(COMPACT_AFTER_SETTLED, kept);
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
    this.settledSinceCompaction = 0;
    this.compactAfter = COMPACT_AFTER_SETTLED;
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

  /**
   * Two steps, a turn of the loop apart. The timer fires in a turn's timers
   * phase, and that turn's poll phase reads only the answers that had come by
   * the time it looked: one that comes in while a callback of that same poll
   * phase holds the loop (a burst of Checks, a GC pause) waits for the next
   * turn's poll. So the first step only notes the time, if anything is due;
   * the second, in the next turn's check phase, expires what was due then and
   * is still unanswered after that poll. A Redis that answers in time is never
   * failed for this process's own pause; one that does not is failed a turn
   * later, microseconds when the loop is free.
   */
  private readonly sweep = (): void => {
    const cutoff = this.cutoff;
    if (cutoff === undefined) {
      const now = this.now();
      const oldest = this.oldestUnsettled();
      if (oldest !== undefined && oldest.deadline <= now) {
        this.cutoff = now;
        setImmediate(this.sweep);
        return;
      }
      this.sweepPending = false;
      this.settled();
      if (oldest !== undefined) this.arm(oldest.deadline);
      return;
    }
    this.cutoff = undefined;
    this.sweepPending = false;
    const entries = this.entries;
    this.sweeping = true;
    try {
      for (let at = this.head; at < entries.length; at += 1) {
        const entry = entries[at];
        // expire settles the entry and calls settled(), which clears the answered ones behind it too (answered out of order).
        if (entry === undefined || entry.settled) continue;
        if (entry.deadline > cutoff) {
          this.sweeping = false;
          this.settled();
          this.arm(entry.deadline);
          return;
        }
        this.expire(entry);
      }
    } finally {
      this.sweeping = false;
    }
    this.settled();
  };

  private oldestUnsettled(): Entry | undefined {
    const entries = this.entries;
    for (let at = this.head; at < entries.length; at += 1) {
      const entry = entries[at];
      if (entry !== undefined && !entry.settled) return entry;
    }
    return undefined;
  }
}
