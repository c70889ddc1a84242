import type { Registry } from 'prom-client';

/**
 * A Prometheus histogram for the Check path, registered on a prom-client
 * registry and exported exactly as prom-client's Histogram exports it (same
 * `get()` shape, so the same text, JSON and cluster aggregation).
 *
 * Why not prom-client's: its `observe` builds a label object, validates it
 * and hashes the label values into a string on every call, even through a
 * `labels()` child; a Check made three such calls, about 2 µs of its CPU and
 * garbage on every Check (test/bench/cpu-profile.ts). Here a child is looked
 * up once per label set and an observation is a bucket search and three
 * additions. test/unit/metrics/hot-path-histogram.test.ts compares the
 * exposition with prom-client's Histogram fed the same values.
 */
export class HotPathHistogram<Label extends string = never> {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly name: string;
  readonly help: string;
  private readonly upperBounds: readonly number[];
  private readonly labelNames: readonly Label[];
  private children = new Map<string, HotPathHistogramChild>();

  constructor(options: {
    name: string;
    help: string;
    buckets: readonly number[];
    labelNames?: readonly Label[];
    registers: readonly Registry[];
  }) {
    this.name = options.name;
    this.help = options.help;
    this.upperBounds = [...options.buckets].sort((a, b) => a - b);
    this.labelNames = options.labelNames ?? [];
    // As prom-client: a histogram without labels is exported (at zero) before its first observation.
    if (this.labelNames.length === 0) this.labels({} as Record<Label, string>);
    // prom-client's Registry takes any object with its metric shape (name, get, reset); its types name only its own classes.
    for (const registry of options.registers) registry.registerMetric(this as unknown as Parameters<Registry['registerMetric']>[0]);
  }

  /** The child for one label set; look it up once and keep it (each call builds a key). */
  labels(labels: Readonly<Record<Label, string>>): HotPathHistogramChild {
    const key = this.labelNames.map((name) => labels[name]).join('\u0000');
    let child = this.children.get(key);
    if (!child) {
      const own: Record<string, string> = {};
      for (const name of this.labelNames) own[name] = labels[name];
      child = new HotPathHistogramChild(this.upperBounds, own);
      this.children.set(key, child);
    }
    return child;
  }

  /** Zeroes every label set (the children handed out stay valid; prom-client's reset would forget the label sets). */
  reset(): void {
    for (const child of this.children.values()) child.reset();
  }

  /** prom-client's Histogram.get(): per label set, the cumulative buckets (le, +Inf last), then _sum and _count. */
  get(): Promise<{
    name: string;
    help: string;
    type: 'histogram';
    aggregator: 'sum';
    values: ExportedValue[];
  }> {
    const values: ExportedValue[] = [];
    for (const child of this.children.values()) {
      let cumulative = 0;
      for (let i = 0; i < this.upperBounds.length; i += 1) {
        cumulative += child.counts[i]!;
        values.push({
          labels: { le: this.upperBounds[i]!, ...child.labelSet },
          value: cumulative,
          metricName: `${this.name}_bucket`,
          exemplar: null,
        });
      }
      values.push({ labels: { le: '+Inf', ...child.labelSet }, value: child.count, metricName: `${this.name}_bucket`, exemplar: null });
      values.push({ labels: { ...child.labelSet }, value: child.sum, metricName: `${this.name}_sum` });
      values.push({ labels: { ...child.labelSet }, value: child.count, metricName: `${this.name}_count` });
    }
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values });
  }
}

/** One sample as prom-client's Histogram.get() gives it (buckets carry `exemplar: null` there too). */
interface ExportedValue {
  labels: Record<string, string | number>;
  value: number;
  metricName: string;
  exemplar?: null;
}

export class HotPathHistogramChild {
  /** Observations per bucket (not cumulative); one past the last bound is counted in `count` only (+Inf). */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(
    private readonly upperBounds: readonly number[],
    readonly labelSet: Readonly<Record<string, string>>,
  ) {
    this.counts = new Float64Array(upperBounds.length);
  }

  observe(value: number): void {
    if (!Number.isFinite(value)) throw new TypeError(`Value is not a valid number: ${value}`);
    const bounds = this.upperBounds;
    for (let i = 0; i < bounds.length; i += 1) {
      if (value <= bounds[i]!) {
        this.counts[i]! += 1;
        break;
      }
    }
    this.sum += value;
    this.count += 1;
  }

  reset(): void {
    this.counts.fill(0);
    this.sum = 0;
    this.count = 0;
  }
}
