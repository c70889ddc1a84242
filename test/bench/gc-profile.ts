/**
 * The garbage collector under a steady load, with the key cache full: what a
 * mark-compact costs, how often one runs, what promotes to the old
 * generation, and the event-loop delay and RSS that follow. A tool for
 * issue 14's "tail" work, not part of `npm run bench`.
 *
 *   npm run build && npm run build:bench
 *   node .bench/build/test/bench/gc-profile.js seed --redis-url redis://127.0.0.1:6390   # once: 200k keys
 *   node .bench/build/test/bench/gc-profile.js run --redis-url redis://127.0.0.1:6390 --rate 3000 --seconds 60 \
 *        --node-arg=--trace-gc [--node-options='--max-old-space-size=192'] [--dist <an earlier dist/>]
 *
 *   node .bench/build/test/bench/gc-profile.js run --redis-url redis://127.0.0.1:6390 --rate 8500 --seconds 20 --h2load [--h2load-rounds 12] [--h2load-staggered]
 *
 * `run` starts a fresh gateway (`node dist/cli/main.js serve`), sends one
 * Check for each seeded key (filling the cache to its default bound), then
 * the bench's mixed traffic open loop at `--rate` for `--seconds`. Over that
 * steady window only it reports: the GCs the gateway traced (`--trace-gc`
 * or `--trace-gc-nvp`, whichever was given), the event-loop delay measured
 * inside the gateway by a preloaded probe (`monitorEventLoopDelay` at 1 ms
 * resolution), the server-side Check latency histogram from /metrics and,
 * from the same scrape, the authorize script's round trip (the Redis leg of
 * a Check), and RSS and heap sampled every second.
 *
 * With `--h2load` the window is driven as the bench's tail phase drives it
 * (h2load, one valid key, a fixed rate; `--h2load-rounds N` splits it into N
 * rounds 3 s apart), and every request slower than 10 ms is grouped into
 * episodes lined up against the gateway's GCs and event-loop stalls (wall
 * clock, from the probe) and Redis's LATENCY events: what each slow stretch
 * had in it.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import Redis from 'ioredis';
import { H2Driver, PhaseStats } from './h2-driver';
import { findH2load, runH2load, STAGGERED_CONNECTIONS } from './h2load';
import { startGateway } from './processes';
import { rssBytesOf } from './proc-stats';
import { seedKeys } from './seed';
import { BENCH_DIR, GATEWAY_DEFAULT_ENV, SHIPPED_NODE_OPTIONS, envAssignments, expectClean, writeGatewayConfig } from './setup';
import { envoyShapedRequest, frameOf, malformedKeys, mixedTraffic, unknownKeys, uniformTraffic } from './traffic';

const KEYS_FILE = path.join(BENCH_DIR, 'gc-profile-keys.json');
const PROBE_FILE = path.join(BENCH_DIR, 'gc-profile-probe.cjs');
const PROBE_OUT = path.join(BENCH_DIR, 'gc-profile-probe.json');
const PROMOTED_OUT = path.join(BENCH_DIR, 'gc-profile-promoted.heapprofile');

/**
 * Preloaded into the gateway (`--require`): SIGUSR2 writes the event-loop
 * delay since the last SIGUSR2 and starts anew. With GC_PROFILE_PROMOTED
 * set, it also samples allocations from one SIGUSR2 to the next, keeping
 * those that outlived a scavenge (V8's sampling heap profiler drops objects
 * that died young only), and writes that profile: what promotes.
 */
const PROBE_SOURCE = `'use strict';
const { monitorEventLoopDelay } = require('node:perf_hooks');
const fs = require('node:fs');
const histogram = monitorEventLoopDelay({ resolution: 1 });
histogram.enable();
// Wall-clock times (ms since the epoch) of GCs and of loop stalls, to line up with a driver's per-request log.
const { PerformanceObserver, performance } = require('node:perf_hooks');
let timeline = [];
new PerformanceObserver((list) => {
  for (const entry of list.getEntries())
    timeline.push({ what: entry.detail && entry.detail.kind === 1 ? 'scavenge' : entry.detail && entry.detail.kind === 4 ? 'mark-compact' : 'gc', atMs: performance.timeOrigin + entry.startTime, ms: entry.duration });
}).observe({ entryTypes: ['gc'] });
const STALL_TICK_MS = 2;
let tickDue = performance.now() + STALL_TICK_MS;
const stallTick = () => {
  const now = performance.now();
  if (now - tickDue > 3) timeline.push({ what: 'stall', atMs: performance.timeOrigin + tickDue, ms: now - tickDue });
  tickDue = now + STALL_TICK_MS;
  setTimeout(stallTick, STALL_TICK_MS).unref();
};
setTimeout(stallTick, STALL_TICK_MS).unref();
const sampling = process.env.GC_PROFILE_PROMOTED ? new (require('node:inspector').Session)() : undefined;
let sampled = false;
if (sampling) sampling.connect();
process.on('SIGUSR2', () => {
  const ms = (ns) => ns / 1e6;
  const out = { count: histogram.count, p50: ms(histogram.percentile(50)), p90: ms(histogram.percentile(90)),
    p99: ms(histogram.percentile(99)), p999: ms(histogram.percentile(99.9)), max: ms(histogram.max), mean: ms(histogram.mean) };
  if (typeof global.gc === 'function') {
    // With --expose-gc: full, non-incremental collections, timed; an upper bound for a mark-compact's pause.
    const times = [];
    for (let i = 0; i < 5; i += 1) { const t = process.hrtime.bigint(); global.gc(); times.push(Number(process.hrtime.bigint() - t) / 1e6); }
    times.sort((a, b) => a - b);
    out.fullGcMs = { min: times[0], median: times[2] };
  }
  out.timeline = timeline;
  timeline = [];
  histogram.reset();
  if (!sampling) return fs.writeFileSync(${JSON.stringify(PROBE_OUT)}, JSON.stringify(out));
  if (!sampled) {
    sampled = true;
    sampling.post('HeapProfiler.startSampling', { samplingInterval: 16384, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: process.env.GC_PROFILE_PROMOTED === 'all' }, () =>
      fs.writeFileSync(${JSON.stringify(PROBE_OUT)}, JSON.stringify(out)));
    return;
  }
  sampling.post('HeapProfiler.stopSampling', (error, result) => {
    fs.writeFileSync(${JSON.stringify(PROMOTED_OUT)}, JSON.stringify(error ? { error: String(error) } : result.profile));
    fs.writeFileSync(${JSON.stringify(PROBE_OUT)}, JSON.stringify(out));
  });
});
`;

const log = (text: string) => process.stderr.write(`${text}\n`);

interface SavedKeys {
  kept: string[];
  rateLimited: string[];
}

interface GcEvent {
  atMs: number;
  kind: 'scavenge' | 'mark-compact' | 'other';
  pauseMs: number;
  reason?: string;
  promotedBytes?: number;
  heapAfterMb?: number;
}

/** Lines of `--trace-gc` or `--trace-gc-nvp` in the gateway's stdout (mixed with its JSON log lines). */
function parseGcTrace(text: string): GcEvent[] {
  const events: GcEvent[] = [];
  for (const line of text.split('\n')) {
    const head = /^\[\d+:0x[0-9a-f]+\]\s+(\d+) ms: (.*)$/.exec(line);
    if (!head) continue;
    const atMs = Number(head[1]);
    const body = head[2]!;
    if (body.startsWith('pause=')) {
      const field = (name: string) => new RegExp(`(?:^| )${name}=(\\S+)`).exec(body)?.[1];
      const gc = field('gc');
      events.push({
        atMs,
        kind: gc === 's' ? 'scavenge' : gc === 'mc' ? 'mark-compact' : 'other',
        pauseMs: Number(field('pause')),
        promotedBytes: Number(field('promoted') ?? 0),
        heapAfterMb: Number(field('total_size_after') ?? 0) / 2 ** 20,
      });
      continue;
    }
    const classic =
      /^(Scavenge|Mark-Compact|Minor Mark-Compact|Mark-Compact \(reduce\))[^,]*-> ([\d.]+) \([\d.]+\) MB, (?:pooled: [\d.]+ MB, )?([\d.]+) \/ [\d.]+ ms.*?\) (.*)$/.exec(
        body,
      );
    if (classic) {
      events.push({
        atMs,
        kind: classic[1] === 'Scavenge' ? 'scavenge' : classic[1]!.startsWith('Mark-Compact') ? 'mark-compact' : 'other',
        pauseMs: Number(classic[3]),
        heapAfterMb: Number(classic[2]),
        reason: classic[4]!.replace(/^\(average mu[^)]*\)\s*/, '').trim(),
      });
    }
  }
  return events;
}

function percentile(sorted: number[], q: number): number {
  return sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
}

/** A histogram's buckets (by default `gateway_authz_check_latency_seconds`), summed over the series whose labels include `labels`: cumulative count at each upper bound. */
function latencyBuckets(metrics: string, name = 'gateway_authz_check_latency_seconds', labels = ''): Map<number, number> {
  const buckets = new Map<number, number>();
  for (const match of metrics.matchAll(new RegExp(`^${name}_bucket\\{([^}]*)\\} (\\S+)$`, 'gm'))) {
    if (!match[1]!.includes(labels)) continue;
    const le = /le="([^"]+)"/.exec(match[1]!)![1]!;
    const bound = le === '+Inf' ? Infinity : Number(le);
    buckets.set(bound, (buckets.get(bound) ?? 0) + Number(match[2]));
  }
  return buckets;
}

/** The q-quantile of the window between two scrapes, interpolated linearly inside its bucket (as Prometheus does). */
function histogramQuantile(before: Map<number, number>, after: Map<number, number>, q: number): { ms: number; total: number } {
  const bounds = [...after.keys()].sort((a, b) => a - b);
  const counts = bounds.map((bound) => (after.get(bound) ?? 0) - (before.get(bound) ?? 0));
  const total = counts.at(-1) ?? 0;
  const rank = q * total;
  let lower = 0;
  for (let i = 0; i < bounds.length; i += 1) {
    if (counts[i]! >= rank) {
      const upper = bounds[i]!;
      if (upper === Infinity) return { ms: lower * 1000, total };
      const below = i === 0 ? 0 : counts[i - 1]!;
      const share = counts[i]! === below ? 0 : (rank - below) / (counts[i]! - below);
      return { ms: (lower + (upper - lower) * share) * 1000, total };
    }
    lower = bounds[i]!;
  }
  return { ms: NaN, total };
}

async function scrape(adminUrl: string): Promise<string> {
  return (await fetch(`${adminUrl}/metrics`)).text();
}

interface TimelineEvent {
  what: string;
  atMs: number;
  ms: number;
}

async function probeDump(pid: number): Promise<Record<string, number> & { timeline?: TimelineEvent[] }> {
  fs.rmSync(PROBE_OUT, { force: true });
  process.kill(pid, 'SIGUSR2');
  for (let i = 0; i < 100 && !fs.existsSync(PROBE_OUT); i += 1) await new Promise((resolve) => setTimeout(resolve, 20));
  return JSON.parse(fs.readFileSync(PROBE_OUT, 'utf8')) as Record<string, number> & { timeline?: TimelineEvent[] };
}

async function seedCommand(redisUrl: string, keys: number): Promise<void> {
  const seeded = await seedKeys(redisUrl, { keys, keysPerAccount: 10, rateLimitedKeys: 100, keep: keys }, log);
  fs.mkdirSync(BENCH_DIR, { recursive: true });
  fs.writeFileSync(KEYS_FILE, JSON.stringify({ kept: seeded.kept, rateLimited: seeded.rateLimited } satisfies SavedKeys));
  log(`seeded ${keys} keys in ${seeded.seconds.toFixed(1)} s; plaintexts in ${KEYS_FILE}`);
}

interface RunOptions {
  redisUrl: string;
  rate: number;
  seconds: number;
  nodeArgs: string[];
  nodeOptions: string;
  env: Record<string, string>;
  distDir?: string;
  fill: number;
  tag: string;
  /** Drive the window with h2load (one valid key, as the bench's tail phase) instead of the Node driver's mix, and report where the slow requests fell. */
  h2load: boolean;
  h2loadRounds: number;
  /** Idle seconds between h2load rounds. */
  h2loadGapSeconds: number;
  /** `--h2load-staggered`: 10 connections opened 1 ms apart instead of 4 at once (see H2loadOptions.staggered). */
  h2loadStaggered: boolean;
  warmupSeconds: number;
  warmupRate?: number;
}

/** Slow requests (h2load's log) grouped into episodes, each with the gateway's GCs and loop stalls and Redis's latency events that overlap it. */
function slowEpisodes(rows: [number, number][], timeline: TimelineEvent[], redisEvents: TimelineEvent[], slowMs: number) {
  const slow = rows.filter(([, latency]) => latency >= slowMs).sort((a, b) => a[0] - b[0]);
  const episodes: { fromMs: number; toMs: number; requests: number; maxMs: number }[] = [];
  for (const [start, latency] of slow) {
    const last = episodes.at(-1);
    if (last && start - last.toMs < 20) {
      last.toMs = Math.max(last.toMs, start + latency);
      last.requests += 1;
      last.maxMs = Math.max(last.maxMs, latency);
    } else episodes.push({ fromMs: start, toMs: start + latency, requests: 1, maxMs: latency });
  }
  const overlapping = (events: TimelineEvent[], from: number, to: number) =>
    events
      .filter((event) => event.atMs + event.ms >= from - 5 && event.atMs <= to + 5)
      .map((event) => `${event.what} ${event.ms.toFixed(1)}`);
  const first = rows.length ? Math.min(...rows.slice(0, 1000).map(([start]) => start)) : 0;
  const detailed = episodes.map((episode) => ({
    atS: Number(((episode.fromMs - first) / 1000).toFixed(3)),
    spanMs: Number((episode.toMs - episode.fromMs).toFixed(1)),
    requests: episode.requests,
    maxMs: Number(episode.maxMs.toFixed(1)),
    gateway: overlapping(timeline, episode.fromMs, episode.toMs),
    redis: overlapping(redisEvents, episode.fromMs - 1000, episode.toMs),
  }));
  const withGateway = detailed.filter((episode) => episode.gateway.length > 0);
  return {
    slowMs,
    slowRequests: slow.length,
    episodes: detailed.length,
    slowRequestsInEpisodesWithAGatewayEvent: withGateway.reduce((sum, episode) => sum + episode.requests, 0),
    worst: [...detailed].sort((a, b) => b.requests - a.requests).slice(0, 15),
  };
}

/** h2load's log as [start ms since the epoch, latency ms] rows. */
function h2loadRows(logFile: string): [number, number][] {
  const rows: [number, number][] = [];
  for (const line of fs.readFileSync(logFile, 'utf8').split('\n')) {
    const [start, , latency] = line.split('\t').map(Number);
    if (Number.isFinite(start) && Number.isFinite(latency)) rows.push([start! / 1000, latency! / 1000]);
  }
  return rows;
}

async function runCommand(options: RunOptions): Promise<void> {
  const saved = JSON.parse(fs.readFileSync(KEYS_FILE, 'utf8')) as SavedKeys;
  fs.writeFileSync(PROBE_FILE, PROBE_SOURCE);
  const logFile = path.join(BENCH_DIR, `gc-profile-${options.tag}.log`);
  const server = await startGateway(
    {
      REDIS_URL: options.redisUrl,
      CONFIG_FILE: writeGatewayConfig('gc-profile-config.json'),
      ...GATEWAY_DEFAULT_ENV,
      NODE_OPTIONS: options.nodeOptions,
      ...options.env,
    },
    logFile,
    ['--require', PROBE_FILE, ...options.nodeArgs],
    options.distDir,
  );
  const driver = await H2Driver.connect(server.grpcAddress, 4);
  try {
    const fill = saved.kept.slice(0, options.fill);
    const fillStarted = Date.now();
    for (let first = 0; first < fill.length; first += 20_000) {
      expectClean('cache fill', await driver.sendAll(uniformTraffic('valid', fill.slice(first, first + 20_000)), 32), true);
    }
    // Spend the rate-limited keys' one allowed request, so they are refused from now on.
    await driver.sendAll(uniformTraffic('valid', saved.rateLimited), 16);
    log(`${options.tag}: cache filled with ${fill.length} keys in ${((Date.now() - fillStarted) / 1000).toFixed(1)} s`);
    const active = fill.filter((_, index) => index % Math.max(1, Math.floor(fill.length / 10_000)) === 0).slice(0, 10_000);
    const traffic = mixedTraffic(
      { valid: active, malformed: malformedKeys(400), unknown: unknownKeys(2000), rateLimited: saved.rateLimited },
      Math.max(100_000, active.length * 4),
    );
    // The mixed load before the window (2 s at --rate unless told), so the window starts from a steady state.
    await driver.openLoop({
      traffic,
      rate: options.warmupRate ?? options.rate,
      warmupMs: 0,
      durationMs: options.warmupSeconds * 1000,
      decodeEvery: 16,
      maxInFlight: 10_000,
    });

    const traceFrom = fs.statSync(logFile).size;
    const metricsBefore = await scrape(server.adminUrl!);
    await probeDump(server.pid);
    const rss: number[] = [];
    const sampler = setInterval(() => rss.push(rssBytesOf(server.pid) / 2 ** 20), 1000);
    let result: Awaited<ReturnType<H2Driver['openLoop']>> | undefined;
    let tail: { p50Ms: number; p99Ms: number; p999Ms: number; requests: number; failed: number; summary: string } | undefined;
    const tailLog = path.join(BENCH_DIR, 'gc-profile-h2load.log');
    const redis = new Redis(options.redisUrl);
    await redis.config('SET', 'latency-monitor-threshold', '2');
    await redis.latency('RESET');
    if (options.h2load) {
      const body = path.join(BENCH_DIR, 'gc-profile-h2load-body.bin');
      fs.writeFileSync(body, frameOf(envoyShapedRequest(active[0]!, 0)));
      // --h2load-rounds N: N rounds of seconds/N each, --h2load-gap-seconds apart (default 3, as the bench's tail phase
      // alternates servers; its first round comes after 30 s or more with no traffic).
      const latencies: number[] = [];
      const firstTenth: number[] = [];
      let failed = 0;
      let summary = '';
      const rows: [number, number][] = [];
      for (let round = 0; round < options.h2loadRounds; round += 1) {
        if (round > 0) await new Promise((resolve) => setTimeout(resolve, options.h2loadGapSeconds * 1000));
        const result = await runH2load({
          binary: findH2load().binary,
          address: server.grpcAddress,
          bodyFile: body,
          logFile: tailLog,
          connections: options.h2loadStaggered ? STAGGERED_CONNECTIONS : 4,
          streamsPerConnection: 256,
          rate: options.rate,
          warmupMs: 0,
          durationMs: (options.seconds * 1000) / options.h2loadRounds,
          staggered: options.h2loadStaggered,
        });
        const roundRows = h2loadRows(tailLog);
        const startedAt = Math.min(...roundRows.slice(0, 1000).map(([start]) => start));
        for (const row of roundRows) {
          rows.push(row);
          if (row[0] - startedAt < (options.seconds * 100) / options.h2loadRounds) firstTenth.push(row[1]);
        }
        for (const latency of result.latenciesMs) latencies.push(latency);
        const roundSorted = [...result.latenciesMs].sort((a, b) => a - b);
        log(`round ${round + 1}: p99 ${percentile(roundSorted, 0.99)} ms, max ${roundSorted.at(-1) ?? 0} ms`);
        failed += result.failed;
        summary = result.summary;
      }
      fs.writeFileSync(tailLog, rows.map(([start, ms]) => `${Math.round(start * 1000)}\t200\t${Math.round(ms * 1000)}`).join('\n'));
      const round = { latenciesMs: latencies, failed, summary };
      firstTenth.sort((a, b) => a - b);
      log(
        `first tenth of each round: ${firstTenth.length} requests, p50 ${percentile(firstTenth, 0.5)} p99 ${percentile(firstTenth, 0.99)} ms`,
      );
      const sorted = [...round.latenciesMs].sort((a, b) => a - b);
      tail = {
        p50Ms: percentile(sorted, 0.5),
        p99Ms: percentile(sorted, 0.99),
        p999Ms: percentile(sorted, 0.999),
        requests: sorted.length,
        failed: round.failed,
        summary: round.summary,
      };
    } else {
      result = await driver.openLoop({
        traffic,
        rate: options.rate,
        warmupMs: 0,
        durationMs: options.seconds * 1000,
        decodeEvery: 16,
        maxInFlight: 10_000,
        stats: new PhaseStats(),
      });
    }
    clearInterval(sampler);
    const loopDelay = await probeDump(server.pid);
    // LATENCY HISTORY rows: [unix seconds, ms]; second resolution only.
    const redisEvents: TimelineEvent[] = [];
    for (const [name] of (await redis.latency('LATEST')) as [string][]) {
      for (const [at, ms] of (await redis.call('LATENCY', 'HISTORY', name)) as [number, number][])
        redisEvents.push({ what: name, atMs: at * 1000, ms });
    }
    redis.disconnect();
    const timeline = loopDelay.timeline ?? [];
    delete loopDelay.timeline;
    const metricsAfter = await scrape(server.adminUrl!);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const trace = fs.readFileSync(logFile, 'utf8').slice(traceFrom);
    const events = parseGcTrace(trace);

    const minutes = options.seconds / 60;
    const summary = (kind: GcEvent['kind']) => {
      const list = events.filter((event) => event.kind === kind);
      const pauses = list.map((event) => event.pauseMs).sort((a, b) => a - b);
      return {
        count: list.length,
        perMinute: list.length / minutes,
        pauseMs: {
          p50: percentile(pauses, 0.5),
          p99: percentile(pauses, 0.99),
          max: pauses.at(-1) ?? 0,
          total: pauses.reduce((a, b) => a + b, 0),
        },
        promotedMbPerSecond: list.reduce((sum, event) => sum + (event.promotedBytes ?? 0), 0) / 2 ** 20 / options.seconds,
      };
    };
    const reasons: Record<string, number> = {};
    for (const event of events) if (event.kind === 'mark-compact' && event.reason) reasons[event.reason] = (reasons[event.reason] ?? 0) + 1;
    const heapUsed = (metrics: string) => Number(/^gateway_authz_nodejs_heap_size_used_bytes (\S+)$/m.exec(metrics)?.[1] ?? NaN) / 2 ** 20;
    const before = latencyBuckets(metricsBefore);
    const after = latencyBuckets(metricsAfter);
    const p99 = histogramQuantile(before, after, 0.99);
    const under5 = (after.get(0.005)! - (before.get(0.005) ?? 0)) / p99.total;
    const report = {
      tag: options.tag,
      nodeOptions: options.nodeOptions,
      nodeArgs: options.nodeArgs,
      env: options.env,
      rate: options.rate,
      seconds: options.seconds,
      cachedKeys: fill.length,
      driver: result
        ? {
            perSecond: result.perSecond,
            latency: result.latency,
            errors: result.errors,
            unavailable: result.unavailable,
            mismatches: result.mismatches,
            overloaded: result.overloaded,
          }
        : { h2load: tail },
      ...(options.h2load ? { slow: slowEpisodes(h2loadRows(tailLog), timeline, redisEvents, 10) } : {}),
      gatewayTimeline: {
        stalls: timeline.filter((event) => event.what === 'stall').length,
        stallMsOver10: timeline.filter((event) => event.what === 'stall' && event.ms > 10).length,
      },
      redisLatencyEvents: redisEvents.length,
      serverCheckLatency: { p99Ms: p99.ms, shareUnder5ms: under5, count: p99.total },
      // The authorize script's round trip alone, as the Check path times it: the Redis leg of the tail.
      authorizeRoundTrip: (() => {
        const name = 'gateway_authz_store_duration_seconds';
        const [from, to] = [
          latencyBuckets(metricsBefore, name, 'operation="authorize"'),
          latencyBuckets(metricsAfter, name, 'operation="authorize"'),
        ];
        const share5 = ((to.get(0.005) ?? 0) - (from.get(0.005) ?? 0)) / ((to.get(Infinity) ?? 0) - (from.get(Infinity) ?? 0));
        return { p50Ms: histogramQuantile(from, to, 0.5).ms, p99Ms: histogramQuantile(from, to, 0.99).ms, shareUnder5ms: share5 };
      })(),
      eventLoopDelayMs: loopDelay,
      gc: { scavenge: summary('scavenge'), markCompact: summary('mark-compact'), markCompactReasons: reasons },
      rssMb: { min: Math.min(...rss), max: Math.max(...rss), last: rss.at(-1) },
      heapUsedMb: { before: heapUsed(metricsBefore), after: heapUsed(metricsAfter) },
    };
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    fs.writeFileSync(path.join(BENCH_DIR, `gc-profile-${options.tag}.json`), JSON.stringify({ ...report, events, timeline }, null, 2));
  } finally {
    driver.close();
    await server.stop();
  }
}

async function main(): Promise<void> {
  const [command, ...rest] = process.argv.slice(2);
  const { values } = parseArgs({
    args: rest,
    options: {
      'redis-url': { type: 'string' },
      keys: { type: 'string', default: '200000' },
      rate: { type: 'string', default: '3000' },
      seconds: { type: 'string', default: '60' },
      'node-arg': { type: 'string', multiple: true, default: [] },
      'node-options': { type: 'string', default: SHIPPED_NODE_OPTIONS },
      env: { type: 'string', multiple: true, default: [] },
      dist: { type: 'string' },
      tag: { type: 'string', default: 'run' },
      h2load: { type: 'boolean', default: false },
      'h2load-rounds': { type: 'string', default: '1' },
      'h2load-gap-seconds': { type: 'string', default: '3' },
      'h2load-staggered': { type: 'boolean', default: false },
      'warmup-seconds': { type: 'string', default: '2' },
      'warmup-rate': { type: 'string' },
    },
  });
  const redisUrl = values['redis-url'];
  if (!redisUrl) throw new Error('--redis-url is required (a disposable Redis: seed writes to it)');
  if (command === 'seed') return seedCommand(redisUrl, Number(values.keys));
  if (command === 'run') {
    return runCommand({
      redisUrl,
      rate: Number(values.rate),
      seconds: Number(values.seconds),
      nodeArgs: values['node-arg'],
      nodeOptions: values['node-options'],
      env: envAssignments(values.env, 'env'),
      ...(values.dist ? { distDir: path.resolve(values.dist) } : {}),
      fill: Number(values.keys),
      tag: values.tag,
      h2load: values.h2load,
      h2loadRounds: Number(values['h2load-rounds']),
      h2loadGapSeconds: Number(values['h2load-gap-seconds']),
      h2loadStaggered: values['h2load-staggered'],
      warmupSeconds: Number(values['warmup-seconds']),
      ...(values['warmup-rate'] ? { warmupRate: Number(values['warmup-rate']) } : {}),
    });
  }
  throw new Error(`unknown command '${command ?? ''}': seed or run`);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    log(`gc-profile failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.exit(1);
  },
);
