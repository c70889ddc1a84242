/** The benchmark's result: its JSON shape, the targets, and the printed table. */
import type { PhaseResult } from './h2-driver';
import type { MachineInfo } from './proc-stats';
import type { CommandCounts } from './redis-stats';
import { markdownTable } from './setup';

export interface ServerRun {
  label: string;
  saturation: PhaseResult;
  /** Decisions/s of each alternating round: the spread shows how noisy the machine was. */
  roundRates: number[];
  /** CPU time (user + system) of the server's process tree per decision, during the saturation window. */
  cpuUsPerDecision: number;
  /** The load driver's own CPU per decision, for context: it shares the machine. */
  driverCpuUsPerDecision: number;
  halfLoad: PhaseResult & { rate: number };
  /** Open loop at half the (main) gateway's own saturation rate. */
  ownHalfLoad: PhaseResult & { rate: number };
  rssMb: number;
  /** Redis's own CPU (INFO cpu) per decision over the saturation window. */
  redisCpuUsPerDecision?: number;
  /** INFO commandstats over the saturation window, per decision: every command Redis ran, script-internal ones included. */
  redisCommands?: { perDecision: number; byCommand: Record<string, number> };
  /** Deltas of the gateway's own counters over the saturation window. */
  metrics?: Record<string, number>;
}

export interface GatewayRun extends ServerRun {
  keys: number;
  accounts: number;
  seedSeconds: number;
  gatewayEnv: Record<string, string>;
  /** MONITOR: client commands (round trips) per decision, by request class. */
  roundTrips: Record<string, { decisions: number; commands: CommandCounts; perDecision: number }>;
  rssSteadyMb: number;
  /** RSS after one Check for each of `cachedKeys` distinct keys (the key cache as full as it gets). */
  /** A fresh process: the cache filled, then `steadyRate` decisions/s of the mix for 5 s. */
  rssCacheFull?: { cachedKeys: number; rssMb: number; heapUsedMb: number; steadyRate: number };
}

export interface Target {
  name: string;
  goal: string;
  value: string;
  /** null: not measured in this run (says how to measure it). */
  pass: boolean | null;
  note?: string;
}

export interface BenchReport {
  version: 1;
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
  redis: { version: string; source: string };
  baseline: ServerRun;
  gateway: GatewayRun;
  keyCountComparison?: { small: GatewayRun; large: GatewayRun };
  /** More gateways measured in the same alternating rounds: GRPC_WORKERS=N (--workers) and A/B runs (--versus, --versus-env). */
  versus?: GatewayRun[];
  halfLoadRate: number;
  ownHalfLoadRate: number;
  targets: Target[];
  elapsedSeconds: number;
}

const ONE_MILLION = 1_000_000;

export function evaluateTargets(report: BenchReport): Target[] {
  const { baseline, gateway } = report;
  const targets: Target[] = [];
  for (const run of [gateway, ...(report.versus ?? [])]) {
    const which = run === gateway ? '' : ` [${run.label}]`;
    const ratio = run.saturation.perSecond / baseline.saturation.perSecond;
    targets.push({ name: `saturation throughput${which}`, goal: '≥ 0.90 × baseline', value: `${ratio.toFixed(2)} ×`, pass: ratio >= 0.9 });
    const p99 = run.halfLoad.latency.p99Ms / baseline.halfLoad.latency.p99Ms;
    targets.push({
      name: `p99 at half the baseline's saturation${which}`,
      goal: '≤ 1.5 × baseline p99',
      value: `${p99.toFixed(2)} ×`,
      pass: p99 <= 1.5,
    });
    const ownP99 = run.ownHalfLoad.latency.p99Ms / baseline.ownHalfLoad.latency.p99Ms;
    targets.push({
      name: `p99 at half the gateway's own saturation${which}`,
      goal: '≤ 1.5 × baseline p99 at that rate',
      value: `${ownP99.toFixed(2)} × (${ms(run.ownHalfLoad.latency.p99Ms)} ms vs ${ms(baseline.ownHalfLoad.latency.p99Ms)} ms)`,
      pass: ownP99 <= 1.5,
      note: 'not in the issue: the same goal where the gateway is not overloaded',
    });
  }
  const valid = gateway.roundTrips['valid (cached)']?.perDecision ?? Number.NaN;
  targets.push({ name: 'Redis round trips, cached valid key', goal: '≤ 1', value: valid.toFixed(2), pass: valid <= 1 });
  const malformed = gateway.roundTrips.malformed?.perDecision ?? Number.NaN;
  targets.push({ name: 'Redis commands, malformed key', goal: '0', value: malformed.toFixed(2), pass: malformed === 0 });
  for (const run of [gateway, ...(report.versus ?? [])]) {
    const which = run === gateway ? '' : ` [${run.label}]`;
    const rss = run.rssCacheFull?.rssMb ?? run.rssSteadyMb;
    const cached = run.rssCacheFull ? `, ${run.rssCacheFull.cachedKeys.toLocaleString('en-US')} keys cached` : '';
    targets.push({
      name: `RSS with 1M keys in Redis${which}`,
      goal: '≤ 200 MB',
      value: `${rss.toFixed(0)} MB with ${run.keys.toLocaleString('en-US')} keys${cached}`,
      pass: run.keys >= ONE_MILLION ? rss <= 200 : null,
      ...(run.keys >= ONE_MILLION ? {} : { note: 'run with --keys 1000000' }),
    });
  }
  const comparison = report.keyCountComparison;
  if (comparison) {
    const ratio = comparison.large.saturation.perSecond / comparison.small.saturation.perSecond;
    targets.push({
      name: `throughput ${short(comparison.large.keys)} vs ${short(comparison.small.keys)} keys`,
      goal: '≥ 0.95 ×',
      value: `${ratio.toFixed(2)} ×`,
      pass: comparison.large.keys >= ONE_MILLION ? ratio >= 0.95 : null,
    });
  } else {
    targets.push({ name: 'throughput 1M vs 10k keys', goal: '≥ 0.95 ×', value: 'n/a', pass: null, note: 'run with --compare-key-counts' });
  }
  return targets;
}

function short(keys: number): string {
  return keys >= ONE_MILLION ? `${keys / ONE_MILLION}M` : keys >= 1000 ? `${keys / 1000}k` : String(keys);
}

const int = (value: number) => Math.round(value).toLocaleString('en-US');
const ms = (value: number) => value.toFixed(2);

/**
 * Decisions/s that CPU alone allows: a Node process uses at most one core,
 * and the server, Redis and the load driver share the machine's cores.
 */
function ceiling(cores: number, run: ServerRun, processes: number): number {
  const perProcess = (processes * 1e6) / run.cpuUsPerDecision;
  const machine = (cores * 1e6) / (run.cpuUsPerDecision + (run.redisCpuUsPerDecision ?? 0) + run.driverCpuUsPerDecision);
  return Math.min(perProcess, machine);
}

const processesOf = (run: GatewayRun) => Math.max(1, Number(run.gatewayEnv.GRPC_WORKERS ?? '1'));

/** The table, as printed and as pasted into the README. */
export function printReport(report: BenchReport, out: (line: string) => void): void {
  const { baseline: base, gateway: gw, machine, driver } = report;
  const gateways: GatewayRun[] = [...(report.keyCountComparison ? [report.keyCountComparison.small] : []), gw, ...(report.versus ?? [])];
  out('');
  out(
    `machine: ${machine.cpus} × ${machine.cpuModel}, ${machine.memTotalMb} MB, Linux ${machine.kernel}, node ${machine.node}, Redis ${report.redis.version} (${report.redis.source})`,
  );
  out(
    `driver: ${driver.name}, ${driver.connections} HTTP/2 connections, ${driver.concurrency} streams in flight at saturation; ` +
      `${driver.rounds} alternating rounds of ${driver.roundSeconds} s per phase and server (after ${driver.warmupSeconds} s warm-up); mix ${Object.entries(
        driver.trafficMix,
      )
        .map(([name, share]) => `${name} ${share * 100}%`)
        .join(', ')}; ` +
      `${int(driver.activeKeys)} active keys of ${int(gw.keys)} in Redis`,
  );
  out(
    `gateway settings: ${
      Object.entries(gw.gatewayEnv)
        .map(([name, value]) => `${name}=${value}`)
        .join(' ') || '(defaults)'
    }`,
  );
  out('');
  const header = ['', 'baseline (no-op grpc-js)', ...gateways.flatMap((run) => [run.label, 'ratio'])];
  const rows: string[][] = [header];
  const row = (label: string, b: number | undefined, value: (run: GatewayRun) => number | undefined, format: (v: number) => string) =>
    rows.push([
      label,
      b === undefined ? '–' : format(b),
      ...gateways.flatMap((run) => {
        const v = value(run);
        return [v === undefined ? '–' : format(v), v === undefined || b === undefined || b === 0 ? '' : (v / b).toFixed(2)];
      }),
    ]);
  const text = (label: string, b: string, value: (run: GatewayRun) => string) =>
    rows.push([label, b, ...gateways.flatMap((run) => [value(run), ''])]);
  row('decisions/s at saturation', base.saturation.perSecond, (run) => run.saturation.perSecond, int);
  row(`p50 ms at ${int(report.halfLoadRate)}/s (open loop)`, base.halfLoad.latency.p50Ms, (run) => run.halfLoad.latency.p50Ms, ms);
  row(`p99 ms at ${int(report.halfLoadRate)}/s`, base.halfLoad.latency.p99Ms, (run) => run.halfLoad.latency.p99Ms, ms);
  row(`p99.9 ms at ${int(report.halfLoadRate)}/s`, base.halfLoad.latency.p999Ms, (run) => run.halfLoad.latency.p999Ms, ms);
  row(
    `p50 ms at ${int(report.ownHalfLoadRate)}/s (half the gateway's saturation)`,
    base.ownHalfLoad.latency.p50Ms,
    (run) => run.ownHalfLoad.latency.p50Ms,
    ms,
  );
  row(`p99 ms at ${int(report.ownHalfLoadRate)}/s`, base.ownHalfLoad.latency.p99Ms, (run) => run.ownHalfLoad.latency.p99Ms, ms);
  row(`p99.9 ms at ${int(report.ownHalfLoadRate)}/s`, base.ownHalfLoad.latency.p999Ms, (run) => run.ownHalfLoad.latency.p999Ms, ms);
  row(
    'CPU µs per decision (server processes)',
    base.cpuUsPerDecision,
    (run) => run.cpuUsPerDecision,
    (v) => v.toFixed(1),
  );
  row(
    'load driver CPU µs per decision',
    base.driverCpuUsPerDecision,
    (run) => run.driverCpuUsPerDecision,
    (v) => v.toFixed(1),
  );
  row(
    'Redis CPU µs per decision',
    undefined,
    (run) => run.redisCpuUsPerDecision,
    (v) => v.toFixed(1),
  );
  // Every process here shares the machine's cores: this is the rate that CPU alone allows.
  row(
    `CPU-bound ceiling, decisions/s (1 core per process, ${machine.cpus} cores shared)`,
    ceiling(machine.cpus, base, 1),
    (run) => ceiling(machine.cpus, run, processesOf(run)),
    int,
  );
  row(
    'RSS MB after the timed phases (incl. overload)',
    base.rssMb,
    (run) => run.rssSteadyMb,
    (v) => v.toFixed(0),
  );
  if (gw.rssCacheFull) {
    row(
      `RSS MB, fresh process, ${int(gw.rssCacheFull.cachedKeys)} keys cached, then ¼ load`,
      undefined,
      (run) => run.rssCacheFull?.rssMb,
      (v) => v.toFixed(0),
    );
    row(
      '  of which live JS heap MB',
      undefined,
      (run) => run.rssCacheFull?.heapUsedMb,
      (v) => v.toFixed(0),
    );
  }
  row(
    'Redis commands per decision (all, incl. in-script)',
    undefined,
    (run) => run.redisCommands?.perDecision,
    (v) => v.toFixed(2),
  );
  text('  by command', '', (run) =>
    Object.entries(run.redisCommands?.byCommand ?? {})
      .sort((a, b) => b[1] - a[1])
      .map(([command, calls]) => `${command} ${calls.toFixed(2)}`)
      .join(', '),
  );
  for (const name of Object.keys(gw.roundTrips))
    row(
      `Redis round trips: ${name}`,
      undefined,
      (run) => run.roundTrips[name]?.perDecision,
      (v) => v.toFixed(2),
    );
  text('key cache lookups during saturation', '', (run) =>
    ['hit', 'negative_hit', 'miss'].map((outcome) => `${outcome} ${int(run.metrics?.[`keyCache.${outcome}`] ?? 0)}`).join(', '),
  );
  text('decisions/s per round', base.roundRates.map(int).join(' / '), (run) => run.roundRates.map(int).join(' / '));
  for (const line of markdownTable(rows)) out(line);
  out('');
  out('targets:');
  for (const target of report.targets) {
    const verdict = target.pass === null ? 'n/a ' : target.pass ? 'PASS' : 'MISS';
    out(`  ${verdict}  ${target.name}: ${target.value} (goal ${target.goal})${target.note ? ` [${target.note}]` : ''}`);
  }
  for (const run of [base, ...gateways]) {
    for (const [phase, result] of [
      ['saturation', run.saturation],
      ['half load', run.halfLoad],
      ['half its own saturation', run.ownHalfLoad],
    ] as const) {
      if (result.errors > 0 || result.unavailable > 0) {
        out(
          `note: ${run.label}, ${phase}: ${result.errors} RPCs past Envoy's 200 ms deadline, ${result.unavailable} of the decoded answers were 503 (Redis deadline): overload`,
        );
      }
    }
  }
}
