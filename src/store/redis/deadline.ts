import { performance } from 'node:perf_hooks';

/**
 * Deadlines that never beat a reply which has already arrived.
 *
 * When the event loop is busy (a burst of Checks), a plain timer and the
 * socket data carrying the reply become ready in the same turn, and Node runs
 * timers before I/O: the command "times out" although Redis answered in
 * time. Deferring the rejection by one setImmediate lets pending I/O (the
 * reply) settle first; a Redis that really is slow or paused still fails at
 * the deadline.
 */
export class DeadlineExceededError extends Error {
  constructor(ms: number) {
    super(`Redis did not answer within ${ms} ms`);
    this.name = 'DeadlineExceededError';
  }
}

/** Something waiting for an answer until `deadline` (performance.now() ms); `settled` once answered or failed. */
export interface Expiring {
  readonly deadline: number;
  settled: boolean;
}

/**
 * One timer for every command of a connection, instead of one per command:
 * all commands get the same deadline after they are issued, so in issue
 * order their deadlines only grow. The timer is armed for the oldest command
 * still waiting; when it fires (and, as above, once pending I/O has run), it
 * fails every command past its deadline and re-arms for the next. A healthy
 * connection costs one timer per deadline period, not one per command.
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
      const entry = entries[at]!;
      if (entry.settled) continue;
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

/** One promise with its own deadline, for rare calls outside the sweep (the health ping). */
export function withinDeadline<T>(work: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const timer = setTimeout(() => {
      setImmediate(() => {
        if (settled) return;
        settled = true;
        reject(new DeadlineExceededError(ms));
      });
    }, ms);
    work.then(
      (value) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}
