import type { Counter } from 'prom-client';

/**
 * Check-path counts added to their prom-client Counter children when the
 * registry is read (the Counter's `collect` hook calls flush()), not on
 * every Check: prom-client's `inc` validates and hashes the labels on every
 * call, even through a `labels()` child. A scrape shows the same values as
 * if each count had been added at once.
 */
export class BatchedCounts {
  private readonly counts: BatchedCount[] = [];

  /** A count for one labelled child; look it up once per label set and keep it. */
  countFor(child: Counter.Internal): BatchedCount {
    const count = new BatchedCount(child);
    this.counts.push(count);
    return count;
  }

  flush(): void {
    for (const count of this.counts) count.flush();
  }
}

export class BatchedCount {
  private pending = 0;

  constructor(private readonly child: Counter.Internal) {}

  inc(): void {
    this.pending += 1;
  }

  flush(): void {
    if (this.pending === 0) return;
    this.child.inc(this.pending);
    this.pending = 0;
  }
}
