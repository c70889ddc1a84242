/**
 * The gateway's own /metrics (admin port), read before and after a phase:
 * a few counters (key cache outcomes, store errors, decisions by reason,
 * shed Checks by reason) and the Check latency histogram, whose delta over a
 * phase is the tail as the service itself sees it.
 */

/** The histogram the service times each Check with, from its arrival (event-loop delay included) to its answer. */
export const CHECK_LATENCY_HISTOGRAM = 'gateway_authz_check_latency_seconds';

export interface Histogram {
  /** Bucket upper bounds in seconds, ascending; the last is Infinity (+Inf). */
  bounds: number[];
  /** Cumulative counts, one per bound. */
  cumulative: number[];
}

export interface MetricsSnapshot {
  /** Counters; also V8's GC pauses by kind from the default metrics (`gc.<kind>.count`, `gc.<kind>.ms`). */
  counters: Record<string, number>;
  /** The longest event-loop delay since the previous scrape (prom-client resets it at each one), ms. */
  loopDelayMaxMs?: number;
  /** Absent when the server does not export CHECK_LATENCY_HISTOGRAM (an older build under --versus). */
  checkLatency?: Histogram;
}

/**
 * prom-client's event-loop gauges come from `monitorEventLoopDelay` with a
 * timer due every 10 ms (its default eventLoopMonitoringPrecision), whose
 * histogram records the time from one tick to the next: the interval itself
 * included. A loop never held up reads 10 ms; the delay is what is past it.
 */
const PROM_CLIENT_LOOP_TIMER_MS = 10;

export function parseMetrics(text: string): MetricsSnapshot {
  const counters: Record<string, number> = {};
  const add = (name: string, value: string) => (counters[name] = (counters[name] ?? 0) + Number(value));
  for (const match of text.matchAll(/^gateway_authz_key_cache_lookups_total\{outcome="([^"]+)"\} (\S+)$/gm))
    add(`keyCache.${match[1]}`, match[2]!);
  for (const match of text.matchAll(/^gateway_authz_store_errors_total\{operation="([^"]+)"\} (\S+)$/gm))
    add(`storeErrors.${match[1]}`, match[2]!);
  for (const match of text.matchAll(/^gateway_authz_decisions_total\{[^}]*reason="([^"]+)"[^}]*\} (\S+)$/gm))
    add(`reason.${match[1]}`, match[2]!);
  for (const match of text.matchAll(/^gateway_authz_checks_shed_total\{reason="([^"]+)"\} (\S+)$/gm)) add(`shed.${match[1]}`, match[2]!);
  for (const match of text.matchAll(/^gateway_authz_nodejs_gc_duration_seconds_count\{kind="([^"]+)"\} (\S+)$/gm))
    add(`gc.${match[1]}.count`, match[2]!);
  for (const match of text.matchAll(/^gateway_authz_nodejs_gc_duration_seconds_sum\{kind="([^"]+)"\} (\S+)$/gm))
    add(`gc.${match[1]}.ms`, String(Number(match[2]) * 1000));
  const loopDelay = /^gateway_authz_nodejs_eventloop_lag_max_seconds (\S+)$/m.exec(text);
  const buckets: [number, number][] = [];
  const bucketLine = new RegExp(`^${CHECK_LATENCY_HISTOGRAM}_bucket\\{le="([^"]+)"\\} (\\S+)$`, 'gm');
  for (const match of text.matchAll(bucketLine)) buckets.push([match[1] === '+Inf' ? Infinity : Number(match[1]), Number(match[2])]);
  buckets.sort((a, b) => a[0] - b[0]);
  return {
    counters,
    ...(loopDelay ? { loopDelayMaxMs: Math.max(0, Number(loopDelay[1]) * 1000 - PROM_CLIENT_LOOP_TIMER_MS) } : {}),
    ...(buckets.length > 0 ? { checkLatency: { bounds: buckets.map(([le]) => le), cumulative: buckets.map(([, count]) => count) } } : {}),
  };
}

export async function scrapeMetrics(adminUrl: string): Promise<MetricsSnapshot> {
  const response = await fetch(`${adminUrl}/metrics`);
  if (!response.ok) throw new Error(`${adminUrl}/metrics answered ${response.status}`);
  return parseMetrics(await response.text());
}

export function counterDelta(before: MetricsSnapshot, after: MetricsSnapshot): Record<string, number> {
  const delta: Record<string, number> = {};
  for (const [name, value] of Object.entries(after.counters)) {
    const diff = value - (before.counters[name] ?? 0);
    if (diff !== 0) delta[name] = diff;
  }
  return delta;
}

/** after − before, bucket by bucket; undefined when either lacks the histogram or the buckets differ. */
export function histogramDelta(before: Histogram | undefined, after: Histogram | undefined): Histogram | undefined {
  if (!before || !after || before.bounds.join() !== after.bounds.join()) return undefined;
  return { bounds: after.bounds, cumulative: after.cumulative.map((count, i) => count - before.cumulative[i]!) };
}

export function addHistograms(a: Histogram | undefined, b: Histogram | undefined): Histogram | undefined {
  if (!a) return b;
  if (!b || a.bounds.join() !== b.bounds.join()) return a;
  return { bounds: a.bounds, cumulative: a.cumulative.map((count, i) => count + b.cumulative[i]!) };
}

/** The bucket the q-quantile falls in, in ms: only as fine as the buckets (the quantile is somewhere in (lowerMs, upperMs]). */
export interface BucketQuantile {
  q: number;
  count: number;
  lowerMs: number;
  /** Infinity when the quantile is past the last finite bound. */
  upperMs: number;
}

export function histogramQuantile(histogram: Histogram, q: number): BucketQuantile | undefined {
  const count = histogram.cumulative.at(-1) ?? 0;
  if (count === 0) return undefined;
  const rank = Math.ceil(q * count);
  const index = histogram.cumulative.findIndex((cumulative) => cumulative >= rank);
  return {
    q,
    count,
    lowerMs: index > 0 ? histogram.bounds[index - 1]! * 1000 : 0,
    upperMs: histogram.bounds[index]! * 1000,
  };
}

export function formatBucket(bucket: BucketQuantile | undefined): string {
  if (!bucket) return 'n/a';
  const ms = (value: number) => String(Number(value.toPrecision(3)));
  return bucket.upperMs === Infinity ? `> ${ms(bucket.lowerMs)}` : `${ms(bucket.lowerMs)}–${ms(bucket.upperMs)}`;
}
