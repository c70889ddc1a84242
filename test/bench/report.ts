/** The benchmark's result: its JSON shape, the targets (issue 14's table), and the printed table. */
import type { CircuitBreakerLimits } from './envoy-circuit-breaker';
import type { ExtProcCpuResult } from './ext-proc-cpu';
import type { LatencySummary, OverloadResult, PhaseResult } from './h2-driver';
import type { MachineInfo } from './proc-stats';
import { lastUsedBatchCommands, type CommandCounts } from './redis-stats';
import { formatBucket, type BucketQuantile } from './server-metrics';
import { STAGGERED_CONNECTIONS } from './h2load';
import { markdownTable } from './setup';

/** The tail phase (h2load, one valid key, fixed rate) for one server. */
export interface TailRun {
  /** Requests per second asked of h2load, over all its connections. */
  rate: number;
  /** Requests measured (started after each round's warm-up), and the rate that is. */
  requests: number;
  heldPerSecond: number;
  /** Failed streams, or an HTTP status other than 200. */
  failed: number;
  /** Exact percentiles, from h2load's per-request log. */
  latency: LatencySummary;
  /** Gateways: the same phase in the service's own Check latency histogram (bucket resolution), and its decisions by reason. */
  server?: {
    count: number;
    p50?: BucketQuantile;
    p99?: BucketQuantile;
    p999?: BucketQuantile;
    counters: Record<string, number>;
  };
}

export interface ServerRun {
  label: string;
  saturation: PhaseResult;
  /** Decisions/s of each alternating round: the spread shows how noisy the machine was. */
  roundRates: number[];
  /** CPU time (user + system) of the server's process tree per decision, during the saturation window. */
  cpuUsPerDecision: number;
  /** The load driver's own CPU per decision, for context: it shares the machine. */
  driverCpuUsPerDecision: number;
  /** The no-ops on the shipped transport have none (only the grpc-js one is the tail's yardstick). */
  tail?: TailRun;
  /**
   * The same rounds with h2load's connections opened 1 ms apart (H2loadOptions.staggered), so the Checks come
   * rate / 1000 each millisecond instead of rate / 100 at once every 10 ms: the rounds the tail targets judge (tailTargets).
   */
  staggeredTail?: TailRun;
  rssMb: number;
  /** Redis's own CPU (INFO cpu) per decision over the saturation window. */
  redisCpuUsPerDecision?: number;
  /** The same apart, and the decisions Redis took per read: what its CPU per decision depends on besides the script (RedisWork). */
  redisWork?: { userUsPerDecision: number; systemUsPerDecision: number; decisionsPerRead: number };
  /** INFO commandstats over the saturation window, per decision: every command Redis ran, script-internal ones included. */
  redisCommands?: { perDecision: number; byCommand: Record<string, number> };
  /** Gateways: the commands of one whole last-used flush interval at saturation, the gateway alone (the commands target). */
  flushIntervalCommands?: FlushIntervalCommands;
  /** Deltas of the gateway's own counters over the saturation window. */
  metrics?: Record<string, number>;
}

/** Decisions and the Redis commands (absolute counts) from just after one last-used flush to the end of the next, which writes their uses. */
export interface FlushIntervalCommands {
  windowSeconds: number;
  decisions: number;
  commands: CommandCounts;
  perDecision: number;
}

/** An open-loop phase at a multiple of the gateway's own saturation. */
export interface OverloadRun extends OverloadResult {
  multiple: number;
  /** The Envoy circuit breaker the driver modelled (envoy.yaml's ext_authz thresholds); absent: raw, the gateway alone. */
  envoyCircuitBreaker?: CircuitBreakerLimits;
  /** The gateway's own counters over the phase: shed Checks by reason (shed.over_capacity, shed.past_deadline), store errors… */
  counters: Record<string, number>;
  /** The service's Check latency histogram over the phase (decided Checks only). */
  serverP99?: BucketQuantile;
  /** The gateway process's CPU time over the phase, warm-up and drain included. */
  serverCpuSeconds: number;
  /** The largest RSS sample (MB) during the phase, warm-up and drain included. */
  rssMaxMb?: number;
  /** Connections the driver held at the end: it adds one, as Envoy does, when the open ones are at the server's stream limit. */
  connections: number;
  /** Decisions/s of the same process in a closed loop as phase 1 runs it, just before and just after this phase. */
  saturationBeside: { before: number; after: number };
}

/** The saturation an overload phase's goodput is judged against: the mean of the closed loops on either side of it. */
export function saturationBesideMean(phase: Pick<OverloadRun, 'saturationBeside'>): number {
  return (phase.saturationBeside.before + phase.saturationBeside.after) / 2;
}

export interface GatewayRun extends ServerRun {
  keys: number;
  accounts: number;
  seedSeconds: number;
  gatewayEnv: Record<string, string>;
  /** MONITOR: client commands (round trips) per decision, by request class. */
  roundTrips: Record<string, { decisions: number; commands: CommandCounts; perDecision: number }>;
  /** RSS of the timed process after the saturation and tail phases. */
  rssSteadyMb: number;
  /**
   * A fresh process with the same settings: one Check for each of
   * `cachedKeys` keys, then `steadyRate` decisions/s of the mix for 5 s
   * (rssMb, heapUsedMb), then the overload phases, RSS sampled throughout (rssUnderLoadMb: the largest).
   */
  fresh: { cachedKeys: number; rssMb?: number; heapUsedMb?: number; steadyRate?: number; rssUnderLoadMb: number };
  overload: OverloadRun[];
}

export interface Target {
  name: string;
  goal: string;
  value: string;
  /** null: no goal, or not measured in this run (the note says why). */
  pass: boolean | null;
  note?: string;
}

export interface BenchReport {
  version: 2;
  date: string;
  command: string;
  machine: MachineInfo;
  driver: {
    name: string;
    why: string;
    connections: number;
    concurrency: number;
    rounds: number;
    roundSeconds: number;
    warmupSeconds: number;
    trafficMix: Record<string, number>;
    activeKeys: number;
  };
  tailDriver: {
    name: string;
    version: string;
    connections: number;
    streamsPerConnection: number;
    request: string;
    /** Seconds each server ran at the tail's rate before its counted rounds, counted nowhere. */
    warmupSeconds: number;
    /** The CPUs of the tail phase (cpu-affinity.ts); absent: not split (one CPU, or a report from before). */
    cpus?: { server: string; others: string; redisPinned: boolean };
  };
  redis: { version: string; source: string };
  baseline: ServerRun;
  /** The no-op Check server on the transport the service ships, when that is not grpc-js. */
  shippedNoop?: ServerRun & { transport: string };
  gateway: GatewayRun;
  keyCountComparison?: { small: GatewayRun; large: GatewayRun };
  /** More gateways measured in the same alternating rounds: GRPC_WORKERS=N (--workers) and A/B runs (--versus, --versus-env). */
  versus?: GatewayRun[];
  /** The tail phase's rate: half the (main) gateway's saturation. */
  tailRate: number;
  /** Envoy's deadline the overload phases judge answers by. */
  answerWithinMs: number;
  /** The usage processor (ext_proc) on a gateway process of its own, ext-proc-cpu.ts; absent with --no-ext-proc. */
  extProc?: ExtProcCpuResult;
  targets: Target[];
  elapsedSeconds: number;
}

const ONE_MILLION = 1_000_000;
/** The gateway's default KEY_CACHE_MAX_ENTRIES: the RSS target's cache. */
export const KEY_CACHE_MAX_ENTRIES = 200_000;

const int = (value: number) => Math.round(value).toLocaleString('en-US');
const ms = (value: number) => value.toFixed(2);
/** A tail's p50 / p99 / p99.9 inside the server, as the buckets they fall in. */
const serverPercentiles = (server: NonNullable<TailRun['server']>) => [server.p50, server.p99, server.p999].map(formatBucket).join(' / ');
const times = (value: number) => `${value.toFixed(2)} ×`;

/** The usage processor's figures, as the table and the targets list print them. */
export function extProcFigures(run: ExtProcCpuResult): { cpu: { label: string; value: string }; memory: { label: string; value: string } } {
  const usPerAnswer = run.cpuMsPerAnswer * 1000;
  return {
    cpu: {
      // The body's messages: one per SSE event, after the request and response headers.
      label: `processor CPU µs per metered answer (streamed, ~${int(run.messagesPerAnswer - 2)} events)`,
      value: `${int(usPerAnswer)} µs (${run.cpuUsPerMessage.toFixed(2)} µs per message; ${int(run.meteredWithUsage)} of ${int(run.answers)} answers metered complete)`,
    },
    memory: {
      label: `processor memory per open stream (${int(run.openStreamsHeld)} held mid-answer)`,
      value: `${int(run.rssPerOpenStreamKiB)} KiB RSS, ${int(run.heapPerOpenStreamKiB)} KiB JS heap`,
    },
  };
}

/** Informational lines (no goal): what metering a streamed answer costs, or why it was not measured. */
function extProcTargets(run: ExtProcCpuResult | undefined): Target[] {
  if (!run) {
    return [
      {
        name: 'processor CPU µs per metered answer (streamed)',
        goal: 'none',
        value: 'not measured',
        pass: null,
        note: 'skipped (--no-ext-proc)',
      },
    ];
  }
  const { cpu, memory } = extProcFigures(run);
  const unmetered = run.meteredWithUsage < run.answers;
  return [
    {
      name: cpu.label,
      goal: 'none (informational)',
      value: cpu.value,
      pass: null,
      ...(unmetered ? { note: `${int(run.answers - run.meteredWithUsage)} answers not metered complete: the figure is suspect` } : {}),
    },
    { name: memory.label, goal: 'none (informational)', value: memory.value, pass: null },
  ];
}

/**
 * A figure as the targets list prints it (`digits` decimals), to judge it
 * by: a target is met or missed on the number the reader sees, so 1.004
 * round trips, printed 1.00, meets "≤ 1".
 */
export function asShown(value: number, digits: number): number {
  return Number(value.toFixed(digits));
}

/**
 * The tail's two targets, judged on the schedule that holds a fixed rate:
 * h2load's connections opened 1 ms apart (rate / 1000 Checks each ms). With
 * them opened together, h2load's 10 ms rate timer sends rate / 100 Checks at
 * once; at half a server's own saturation that burst takes about 5 ms of its
 * one core to serve, whatever the server, so its p99 there measures the
 * schedule. Those figures are printed beside, with that floor worked out.
 * A report without the staggered rounds is judged on the bursts.
 */
function tailTargets(run: ServerRun, baseline: ServerRun, which: string): Target[] {
  const targets: Target[] = [];
  const staggered = run.staggeredTail && baseline.staggeredTail ? { run: run.staggeredTail, baseline: baseline.staggeredTail } : undefined;
  const bursts = run.tail && baseline.tail ? { run: run.tail, baseline: baseline.tail } : undefined;
  const judged = staggered ?? bursts;
  if (!judged) return targets;
  const schedule =
    judged === staggered
      ? `${STAGGERED_CONNECTIONS} connections opened 1 ms apart: rate / 1000 Checks each ms`
      : 'connections opened together: rate / 100 Checks every 10 ms';
  const ratio = judged.run.latency.p99Ms / judged.baseline.latency.p99Ms;
  targets.push({
    name: `p99 at half the gateway's saturation, ${int(judged.run.rate)}/s (h2load, a valid key, ${schedule})${which}`,
    goal: "≤ 1.5 × the no-op grpc-js's p99 at the same rate",
    value: `${times(ratio)} (${ms(judged.run.latency.p99Ms)} vs ${ms(judged.baseline.latency.p99Ms)} ms)`,
    pass: asShown(ratio, 2) <= 1.5,
  });
  const inside = judged.run.server?.p99;
  targets.push({
    name: `p99 inside the server, same phase (Check latency histogram, event-loop delay included)${which}`,
    goal: '≤ 5 ms',
    value: inside ? `${formatBucket(inside)} ms (bucket resolution: the p99 is in this bucket)` : 'n/a',
    pass: inside ? inside.upperMs <= 5 : null,
    ...(inside ? {} : { note: 'this build exports no gateway_authz_check_latency_seconds' }),
  });
  if (staggered && bursts) {
    const burst = bursts.run.rate / 100;
    const floorMs = (burst * run.cpuUsPerDecision) / 1000;
    targets.push({
      name: `the same tail with h2load's connections opened together (rate / 100 Checks at once every 10 ms)${which}`,
      goal: 'none',
      value:
        `p99 ${ms(bursts.run.latency.p99Ms)} ms (${times(bursts.run.latency.p99Ms / bursts.baseline.latency.p99Ms)} the no-op grpc-js's ` +
        `${ms(bursts.baseline.latency.p99Ms)} ms); inside the server ${bursts.run.server?.p99 ? formatBucket(bursts.run.server.p99) : 'n/a'} ms`,
      pass: null,
      note:
        `each burst of ${int(burst)} Checks takes ${int(burst)} × ${run.cpuUsPerDecision.toFixed(1)} µs = ${floorMs.toFixed(1)} ms of one core to serve, ` +
        'so the last of a burst waits about that long on any server at half its own saturation',
    });
  }
  return targets;
}

/** Issue 14's targets, for the gateway and each --versus/--workers gateway, then the earlier issue's that still hold. */
export function evaluateTargets(report: BenchReport): Target[] {
  const { baseline, gateway } = report;
  const targets: Target[] = [];
  for (const run of [gateway, ...(report.versus ?? [])]) {
    const which = run === gateway ? '' : ` [${run.label}]`;
    const vsNoop = run.saturation.perSecond / baseline.saturation.perSecond;
    targets.push({
      name: `decisions/s at saturation vs the no-op grpc-js server${which}`,
      goal: '≥ 1.0 ×',
      value: `${times(vsNoop)} (${int(run.saturation.perSecond)} vs ${int(baseline.saturation.perSecond)}/s)`,
      pass: asShown(vsNoop, 2) >= 1,
    });
    const shipped = report.shippedNoop ?? baseline;
    const vsShipped = run.saturation.perSecond / shipped.saturation.perSecond;
    targets.push({
      name: `decisions/s at saturation vs the no-op on the shipped transport (${report.shippedNoop?.transport ?? 'grpc-js'})${which}`,
      goal: 'none',
      value: `${times(vsShipped)} (${int(run.saturation.perSecond)} vs ${int(shipped.saturation.perSecond)}/s)`,
      pass: null,
      note: report.shippedNoop
        ? 'what the decision itself costs'
        : 'this build ships grpc-js (noop-server.ts has no other transport), so the no-op above is the shipped one',
    });
    targets.push({
      name: `server CPU per decision${which}`,
      goal: '≤ 60 µs',
      value: `${run.cpuUsPerDecision.toFixed(1)} µs (${times(run.cpuUsPerDecision / baseline.cpuUsPerDecision)} the no-op grpc-js's ${baseline.cpuUsPerDecision.toFixed(1)} µs)`,
      pass: asShown(run.cpuUsPerDecision, 1) <= 60,
    });
    targets.push(...tailTargets(run, baseline, which));
    targets.push({
      name: `Redis CPU per decision${which}`,
      goal: '≤ 15 µs',
      value: `${(run.redisCpuUsPerDecision ?? Number.NaN).toFixed(1)} µs`,
      pass: asShown(run.redisCpuUsPerDecision ?? Infinity, 1) <= 15,
      ...(run.redisWork ? { note: redisWorkText(run.redisWork) } : {}),
    });
    const window = run.flushIntervalCommands;
    const commands = window?.perDecision ?? Number.NaN;
    const inLastUsedBatches = flushShareOf(window) ?? Number.NaN;
    targets.push({
      name: `Redis commands per decision over the mix at saturation, in-script and last-used batches included (one whole flush interval, the gateway alone)${which}`,
      goal: '≤ 5',
      value: window
        ? `${commands.toFixed(2)} (Checks ${(commands - inLastUsedBatches).toFixed(2)} + last-used batches ${inLastUsedBatches.toFixed(2)})`
        : 'n/a',
      pass: window ? asShown(commands, 2) <= 5 : null,
      ...(window ? {} : { note: 'no flush-interval phase in this run' }),
    });
    const cached = run.fresh.cachedKeys;
    targets.push({
      name: `RSS under load, ${int(cached)} keys cached${which}`,
      goal: `≤ 200 MB with ${int(KEY_CACHE_MAX_ENTRIES)} cached`,
      value: `${run.fresh.rssUnderLoadMb.toFixed(0)} MB, largest sample of the overload phases${run.fresh.rssMb === undefined ? '' : ` (fresh: ${run.fresh.rssMb.toFixed(0)} MB)`}`,
      pass: cached >= KEY_CACHE_MAX_ENTRIES ? asShown(run.fresh.rssUnderLoadMb, 0) <= 200 : null,
      ...(cached >= KEY_CACHE_MAX_ENTRIES
        ? {}
        : { note: `only ${int(cached)} keys cached: run with --keys ${KEY_CACHE_MAX_ENTRIES} or more, without --no-fill` }),
    });
    // The targets read the phases behind Envoy's circuit breaker (as envoy.yaml ships); the raw ones are printed beside them, judged on nothing.
    for (const phase of [...run.overload].sort((a, b) => Number(!a.envoyCircuitBreaker) - Number(!b.envoyCircuitBreaker))) {
      const short = phase.sentPerSecond < 0.95 * phase.rate;
      const driverNote = short
        ? `the driver sent only ${int(phase.sentPerSecond)} of ${int(phase.rate)}/s (it shares the cores; lag p99 ${ms(phase.scheduleLagMs.p99)} ms)`
        : undefined;
      const bound = phase.envoyCircuitBreaker;
      const variant = bound ? `, behind Envoy's circuit breaker (max_requests ${int(bound.maxRequests)})` : ', raw: no Envoy bound';
      const rawNote = bound ? undefined : 'not judged: the gateway alone, as behind an Envoy without the circuit breaker envoy.yaml sets';
      const note = [driverNote, rawNote].filter(Boolean).join('; ');
      targets.push({
        name: `${phase.multiple} × saturation (${int(phase.rate)}/s offered, open loop)${variant}: every Check answered within ${report.answerWithinMs} ms${which}`,
        goal: '0 late, 0 unanswered',
        value:
          `${int(phase.late)} late, ${int(phase.unanswered)} unanswered of ${int(phase.sent)} sent; ` +
          `${bound ? `refused by Envoy at once ${int(phase.refusedByEnvoy)}, ` : ''}shed by the gateway ${int(shedOf(phase))}`,
        pass: bound ? phase.late === 0 && phase.unanswered === 0 : null,
        ...(note ? { note } : {}),
      });
      const beside = saturationBesideMean(phase);
      const goodput = phase.goodputPerSecond / beside;
      targets.push({
        name: `${phase.multiple} × saturation${variant}: goodput (the gateway's decisions within ${report.answerWithinMs} ms, not shed, not 503)${which}`,
        goal: '≥ 0.9 × saturation, measured beside the phase on its process',
        value:
          `${times(goodput)} (${int(phase.goodputPerSecond)} vs ${int(beside)}/s, closed loop before and after it); ` +
          `${times(phase.goodputPerSecond / run.saturation.perSecond)} the rounds' saturation (${int(run.saturation.perSecond)}/s)`,
        pass: bound ? asShown(goodput, 2) >= 0.9 : null,
        ...(note ? { note } : {}),
      });
    }
  }
  // The earlier issue's targets, still measured.
  const valid = gateway.roundTrips['valid (cached)']?.perDecision ?? Number.NaN;
  targets.push({ name: 'Redis round trips, cached valid key', goal: '≤ 1', value: valid.toFixed(2), pass: asShown(valid, 2) <= 1 });
  const malformed = gateway.roundTrips.malformed?.perDecision ?? Number.NaN;
  targets.push({ name: 'Redis commands, malformed key', goal: '0', value: malformed.toFixed(2), pass: asShown(malformed, 2) === 0 });
  const comparison = report.keyCountComparison;
  if (comparison) {
    const ratio = comparison.large.saturation.perSecond / comparison.small.saturation.perSecond;
    targets.push({
      name: `throughput ${short(comparison.large.keys)} vs ${short(comparison.small.keys)} keys`,
      goal: '≥ 0.95 ×',
      value: times(ratio),
      pass: comparison.large.keys >= ONE_MILLION ? asShown(ratio, 2) >= 0.95 : null,
    });
  }
  targets.push(...extProcTargets(report.extProc));
  return targets;
}

/** Checks the server shed (its own counter, over the whole phase), by either reason. */
function shedOf(phase: OverloadRun): number {
  return (phase.counters['shed.over_capacity'] ?? 0) + (phase.counters['shed.past_deadline'] ?? 0);
}

function short(keys: number): string {
  return keys >= ONE_MILLION ? `${keys / ONE_MILLION}M` : keys >= 1000 ? `${keys / 1000}k` : String(keys);
}

/**
 * Decisions/s that CPU alone allows: a Node process uses at most one core,
 * and the server, Redis and the load driver share the machine's cores.
 */
function ceiling(cores: number, run: ServerRun, processes: number): number {
  const perProcess = (processes * 1e6) / run.cpuUsPerDecision;
  const machine = (cores * 1e6) / (run.cpuUsPerDecision + (run.redisCpuUsPerDecision ?? 0) + run.driverCpuUsPerDecision);
  return Math.min(perProcess, machine);
}

const processesOf = (run: ServerRun) => Math.max(1, Number((run as Partial<GatewayRun>).gatewayEnv?.GRPC_WORKERS ?? '1'));
const isGateway = (run: ServerRun): run is GatewayRun => 'roundTrips' in run;

/** The table, as printed and as pasted into docs/performance/README.md. */
export function printReport(report: BenchReport, out: (line: string) => void): void {
  const { baseline: base, gateway: gw, machine, driver, tailDriver } = report;
  const gateways: GatewayRun[] = [...(report.keyCountComparison ? [report.keyCountComparison.small] : []), gw, ...(report.versus ?? [])];
  const others: ServerRun[] = [...(report.shippedNoop ? [report.shippedNoop] : []), ...gateways];
  out('');
  out(
    `machine: ${machine.cpus} × ${machine.cpuModel}, ${machine.memTotalMb} MB, Linux ${machine.kernel}, node ${machine.node}, Redis ${report.redis.version} (${report.redis.source})`,
  );
  out(
    `mixed traffic (saturation, overload): ${driver.name}, ${driver.connections} HTTP/2 connections, ${driver.concurrency} streams in flight at saturation; ` +
      `${driver.rounds} alternating rounds of ${driver.roundSeconds} s per server (after ${driver.warmupSeconds} s warm-up); mix ${Object.entries(
        driver.trafficMix,
      )
        .map(([name, share]) => `${name} ${share * 100}%`)
        .join(', ')}; ` +
      `${int(driver.activeKeys)} active keys of ${int(gw.keys)} in Redis`,
  );
  out(
    `tail: ${tailDriver.version}, ${tailDriver.connections} connections, up to ${tailDriver.streamsPerConnection} streams each, ` +
      `${int(report.tailRate)}/s (half the gateway's saturation), ${tailDriver.request}; the same rounds, after an uncounted ${tailDriver.warmupSeconds} s warm-up per server (the first gateway has been idle 30 s); ` +
      `each round also once more with ${STAGGERED_CONNECTIONS} connections opened 1 ms apart (judged: see the targets)` +
      (tailDriver.cpus
        ? `; the server under test alone on CPU ${tailDriver.cpus.server}, h2load${tailDriver.cpus.redisPinned ? ', Redis' : ''} and the rest on CPU ${tailDriver.cpus.others}`
        : '; every process on every CPU'),
  );
  out(
    `gateway settings: ${
      Object.entries(gw.gatewayEnv)
        .map(([name, value]) => `${name}=${value}`)
        .join(' ') || '(defaults)'
    }`,
  );
  if (report.extProc)
    out(
      `usage processor (ext_proc): a gateway process of its own (in-memory store), ${int(report.extProc.answers)} streamed chat-completions answers ` +
        `after 300 of warm-up, ${int(report.extProc.concurrency)} at a time, one message per SSE event (test/bench/ext-proc-cpu.ts); shown in the gateway's column`,
    );
  out('');
  const rows: string[][] = [['', base.label, ...others.flatMap((run) => [run.label, 'ratio'])]];
  /** One figure per server, and each one's ratio to the no-op grpc-js server's (when it has one). */
  const row = (label: string, value: (run: ServerRun) => number | undefined, format: (v: number) => string, ratio = true) => {
    const b = value(base);
    rows.push([
      label,
      b === undefined ? '–' : format(b),
      ...others.flatMap((run) => {
        const v = value(run);
        return [v === undefined ? '–' : format(v), !ratio || v === undefined || b === undefined || b === 0 ? '' : (v / b).toFixed(2)];
      }),
    ]);
  };
  const text = (label: string, value: (run: ServerRun) => string) =>
    rows.push([label, value(base), ...others.flatMap((run) => [value(run), ''])]);
  const gatewayOnly =
    <T>(value: (run: GatewayRun) => T | undefined) =>
    (run: ServerRun): T | undefined =>
      isGateway(run) ? value(run) : undefined;
  const fixed = (digits: number) => (v: number) => v.toFixed(digits);

  row('decisions/s at saturation', (run) => run.saturation.perSecond, int);
  row(`p50 ms at ${int(report.tailRate)}/s (h2load, valid key), connections opened together`, (run) => run.tail?.latency.p50Ms, ms);
  row(`p99 ms at ${int(report.tailRate)}/s`, (run) => run.tail?.latency.p99Ms, ms);
  row(`p99.9 ms at ${int(report.tailRate)}/s`, (run) => run.tail?.latency.p999Ms, ms);
  text('  rate held by h2load, failed requests', (run) => (run.tail ? `${int(run.tail.heldPerSecond)}/s, ${int(run.tail.failed)}` : '–'));
  text('  inside the server (histogram buckets): p50 / p99 / p99.9 ms', (run) =>
    run.tail?.server ? serverPercentiles(run.tail.server) : '–',
  );
  text(`p50 / p99 / p99.9 ms at ${int(report.tailRate)}/s, connections opened 1 ms apart (judged)`, (run) =>
    run.staggeredTail
      ? [run.staggeredTail.latency.p50Ms, run.staggeredTail.latency.p99Ms, run.staggeredTail.latency.p999Ms].map(ms).join(' / ')
      : '–',
  );
  text('  rate held, failed; inside the server p50 / p99 / p99.9 ms', (run) =>
    run.staggeredTail
      ? `${int(run.staggeredTail.heldPerSecond)}/s, ${int(run.staggeredTail.failed)}` +
        (run.staggeredTail.server ? `; ${serverPercentiles(run.staggeredTail.server)}` : '')
      : '–',
  );
  row('CPU µs per decision (server processes)', (run) => run.cpuUsPerDecision, fixed(1));
  row('load driver CPU µs per decision', (run) => run.driverCpuUsPerDecision, fixed(1));
  row('Redis CPU µs per decision', (run) => run.redisCpuUsPerDecision, fixed(1));
  text('  of which user / system µs; decisions per Redis read', (run) => (run.redisWork ? redisWorkText(run.redisWork) : '–'));
  // Every process here shares the machine's cores: this is the rate that CPU alone allows.
  row(
    `CPU-bound ceiling, decisions/s (1 core per process, ${machine.cpus} cores shared)`,
    (run) => ceiling(machine.cpus, run, processesOf(run)),
    int,
  );
  row('RSS MB after saturation and the tail', (run) => (isGateway(run) ? run.rssSteadyMb : run.rssMb), fixed(0));
  row(
    `RSS MB, fresh process, ${int(gw.fresh.cachedKeys)} keys cached, then ¼ load`,
    gatewayOnly((run) => run.fresh.rssMb),
    fixed(0),
    false,
  );
  row(
    '  of which live JS heap MB',
    gatewayOnly((run) => run.fresh.heapUsedMb),
    fixed(0),
    false,
  );
  row(
    'RSS MB under load (largest sample, overload phases), same process',
    gatewayOnly((run) => run.fresh.rssUnderLoadMb),
    fixed(0),
    false,
  );
  row(
    'Redis commands per decision, one whole flush interval at saturation (all, incl. in-script)',
    (run) => run.flushIntervalCommands?.perDecision,
    fixed(2),
    false,
  );
  row('  of which the last-used batch that flushed it', (run) => flushShareOf(run.flushIntervalCommands), fixed(2), false);
  row('Redis commands per decision in the rounds (all, incl. in-script)', (run) => run.redisCommands?.perDecision, fixed(2), false);
  row(
    '  of which the Checks (their scripts included)',
    (run) => (run.redisCommands ? commandsSplit(run).inChecks : undefined),
    fixed(2),
    false,
  );
  row(
    '  of which the last-used batches (their flushes in the rounds)',
    (run) => (run.redisCommands ? commandsSplit(run).inLastUsedBatches : undefined),
    fixed(2),
    false,
  );
  text('  by command', (run) =>
    Object.entries(run.redisCommands?.byCommand ?? {})
      .sort((a, b) => b[1] - a[1])
      .map(([command, calls]) => `${command} ${calls.toFixed(2)}`)
      .join(', '),
  );
  for (const name of Object.keys(gw.roundTrips))
    row(
      `Redis round trips: ${name}`,
      gatewayOnly((run) => run.roundTrips[name]?.perDecision),
      fixed(2),
      false,
    );
  text('key cache lookups during saturation', (run) =>
    isGateway(run)
      ? ['hit', 'negative_hit', 'miss'].map((outcome) => `${outcome} ${int(run.metrics?.[`keyCache.${outcome}`] ?? 0)}`).join(', ')
      : '',
  );
  const multiples = [...new Set(gateways.flatMap((run) => run.overload.map((phase) => phase.multiple)))];
  for (const [multiple, bounded] of multiples.flatMap((m) => [[m, true] as const, [m, false] as const])) {
    const phaseOf = (run: ServerRun) =>
      isGateway(run) ? run.overload.find((phase) => phase.multiple === multiple && !!phase.envoyCircuitBreaker === bounded) : undefined;
    if (!gateways.some((run) => phaseOf(run))) continue;
    const phaseText = (label: string, value: (phase: OverloadRun) => string) =>
      text(label, (run) => {
        const phase = phaseOf(run);
        return phase ? value(phase) : '';
      });
    phaseText(
      `at ${multiple} × the gateway's saturation, open loop, ${bounded ? "behind Envoy's circuit breaker (envoy.yaml)" : 'raw (no Envoy bound)'}: offered / sent per s`,
      (p) => `${int(p.rate)} / ${int(p.sentPerSecond)}`,
    );
    phaseText(`  decisions/s within ${report.answerWithinMs} ms (goodput)`, (p) => int(p.goodputPerSecond));
    phaseText(
      '  saturation beside it: closed loop on the same process, before / after per s; goodput ratio to their mean',
      (p) => `${int(p.saturationBeside.before)} / ${int(p.saturationBeside.after)}; ${times(p.goodputPerSecond / saturationBesideMean(p))}`,
    );
    if (bounded)
      phaseText(
        '  refused by Envoy at once (max_requests / max_pending_requests overflow, 503)',
        (p) =>
          `${int(p.refusedByEnvoy)} (max_requests ${int(p.envoyCircuitBreaker!.maxRequests)}, max_pending_requests ${int(p.envoyCircuitBreaker!.maxPendingRequests)})`,
      );
    phaseText(
      '  gRPC error answers (shed, or past the deadline) / 503 store_unavailable',
      (p) => `${int(p.grpcErrors)} / ${int(p.storeUnavailable)}`,
    );
    phaseText(
      '  shed by the server, whole phase incl. warm-up: over_capacity / past_deadline',
      (p) => `${int(p.counters['shed.over_capacity'] ?? 0)} / ${int(p.counters['shed.past_deadline'] ?? 0)}`,
    );
    phaseText(
      `  answers after ${report.answerWithinMs} ms / unanswered, of sent`,
      (p) => `${int(p.late)} / ${int(p.unanswered)} of ${int(p.sent)}`,
    );
    phaseText('  p50 / p99 / max ms, every answer', (p) => `${ms(p.latency.p50Ms)} / ${ms(p.latency.p99Ms)} / ${ms(p.latency.maxMs)}`);
    phaseText('  p99 ms inside the server (bucket)', (p) => formatBucket(p.serverP99));
    phaseText('  driver behind its schedule, p99 / max ms', (p) => `${ms(p.scheduleLagMs.p99)} / ${ms(p.scheduleLagMs.max)}`);
  }
  if (report.extProc) {
    const { cpu, memory } = extProcFigures(report.extProc);
    // Measured once, on a gateway process of its own: the figure goes in the main gateway's column only.
    const inGatewayColumn = (label: string, value: string) =>
      rows.push([label, '', ...others.flatMap((run) => [run === gw ? value : '', ''])]);
    inGatewayColumn(cpu.label, int(report.extProc.cpuMsPerAnswer * 1000));
    inGatewayColumn(`  ${memory.label}`, memory.value);
  }
  text('decisions/s per round', (run) => run.roundRates.map(int).join(' / '));
  for (const line of markdownTable(rows)) out(line);
  out('');
  out('targets:');
  for (const target of report.targets) {
    const verdict = target.pass === null ? 'n/a ' : target.pass ? 'MET ' : 'MISS';
    out(`  ${verdict}  ${target.name}: ${target.value} (goal ${target.goal})${target.note ? ` [${target.note}]` : ''}`);
  }
  for (const run of [base, ...others]) {
    const result = run.saturation;
    if (result.errors > 0 || result.unavailable > 0) {
      out(
        `note: ${run.label}, saturation: ${result.errors} RPCs failed or answered with a gRPC error, ${result.unavailable} of the decoded answers were 503 (Redis deadline): overload`,
      );
    }
    if (run.tail?.server) {
      const { counters } = run.tail.server;
      const notAllowed = Object.entries(counters).filter(
        ([name]) =>
          (name.startsWith('reason.') && name !== 'reason.allowed') || name.startsWith('shed.') || name.startsWith('storeErrors.'),
      );
      if (notAllowed.length > 0)
        out(
          `note: ${run.label}, tail phase: not every Check was allowed (${notAllowed.map(([name, count]) => `${name} ${count}`).join(', ')}; allowed ${counters['reason.allowed'] ?? 0})`,
        );
    }
  }
}

/** The last-used flush's commands per decision in a flush-interval window (derived by lastUsedBatchCommands). */
function flushShareOf(window: FlushIntervalCommands | undefined): number | undefined {
  return window ? lastUsedBatchCommands(window.commands) / window.decisions : undefined;
}

/** Commands per decision split into the Checks' own and the last-used batches' (derived by lastUsedBatchCommands). */
function commandsSplit(run: { redisCommands?: ServerRun['redisCommands'] }): { inChecks: number; inLastUsedBatches: number } {
  const all = run.redisCommands?.perDecision ?? Number.NaN;
  const inLastUsedBatches = lastUsedBatchCommands(run.redisCommands?.byCommand ?? {});
  return { inChecks: all - inLastUsedBatches, inLastUsedBatches };
}

/** Redis's CPU apart and its batch size: `10.3 user + 1.6 system; 15.4 decisions a read`. */
export function redisWorkText(work: NonNullable<ServerRun['redisWork']>): string {
  return `${work.userUsPerDecision.toFixed(1)} user + ${work.systemUsPerDecision.toFixed(1)} system; ${work.decisionsPerRead.toFixed(1)} decisions a read`;
}
