/**
 * Deadlines that never beat a reply which has already arrived.
 *
 * When the event loop is busy (a burst of Checks), a plain timer and the
 * socket data carrying the reply become ready in the same turn, and Node runs
 * timers before I/O: the command "times out" although Redis answered in
 * time. Deferring the rejection by one setImmediate lets pending I/O (the
 * reply) settle first; a Redis that really is slow or paused still fails at
 * the deadline. DeadlineSweeper (src/transport/deadline-sweeper.ts) does so for the Check path's
 * commands.
 */
export class DeadlineExceededError extends Error {
  constructor(ms: number) {
    super(`Redis did not answer within ${ms} ms`);
    this.name = 'DeadlineExceededError';
  }
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
