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
 * fails every command past its deadline and re-arms for the next. Commands
 * answered in time are dropped from the front as the sweep passes them, so
 * a healthy connection costs one timer per deadline period, not one per
 * command.
 */
export class DeadlineSweeper<Entry extends Expiring> {
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

  /** Commands still waiting (answered ones not yet swept included); for tests. */
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
    while (this.head < entries.length) {
      const entry = entries[this.head]!;
      if (!entry.settled) {
        if (entry.deadline > now) break;
        this.expire(entry);
      }
      entries[this.head] = undefined;
      this.head += 1;
    }
    if (this.head === entries.length) {
      this.entries = [];
      this.head = 0;
      return;
    }
    if (this.head > 1024 && this.head * 2 > entries.length) {
      this.entries = entries.slice(this.head);
      this.head = 0;
    }
    this.arm(this.entries[this.head]!.deadline);
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
