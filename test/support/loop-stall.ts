import { monitorEventLoopDelay } from 'node:perf_hooks';

/**
 * Runs `work` and measures the longest time this process's event loop was
 * held meanwhile (a GC of the jest worker's heap, the machine's other suites
 * taking the CPU). Suites that run the app in the test process judge the
 * server's own timing net of that: a stall of the whole process is not the
 * code under test waiting for something.
 */
export async function measuringLoopStall<T>(work: () => Promise<T>): Promise<{ result: T; stallMs: number }> {
  // Sampled every millisecond; a held loop shows as one late sample as long as the hold.
  const histogram = monitorEventLoopDelay({ resolution: 1 });
  histogram.enable();
  try {
    // A hold before the monitor's second tick would go unseen (its first tick only starts the clock): wait for one sample.
    while (histogram.count === 0) await new Promise((resolve) => setTimeout(resolve, 1));
    const result = await work();
    // One more sample, so a hold at the very end is counted.
    await new Promise((resolve) => setTimeout(resolve, 2));
    return { result, stallMs: histogram.max / 1e6 };
  } finally {
    histogram.disable();
  }
}
