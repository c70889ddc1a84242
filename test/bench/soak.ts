/**
 * `npm run soak`: one gateway under steady load for a long time (not in CI).
 *
 *   npm run soak                                  # 10 minutes at half the gateway's own saturation rate
 *   npm run soak -- --minutes 1 --sample-seconds 10
 *   npm run soak -- --rate 4000                   # a fixed rate instead of measuring saturation first
 *
 * Redis: REDIS_URL (must be empty, or pass --flush), else a redis-server
 * spawned on a free port (test/support/redis-server.ts). The gateway runs in a
 * child process with the same settings as in `npm run bench` (main.ts); the
 * load driver (h2-driver.ts) runs here, one uninterrupted open loop at a fixed
 * rate with the bench's mixed traffic: --warmup-seconds unmeasured, then
 * --minutes cut into windows of --sample-seconds.
 *
 * Verdicts (exit code 0 only when all pass):
 *   - RSS growth: (RSS at the end of the last window − RSS at the end of the
 *     first window) / RSS at the end of the first window < 10 %;
 *   - zero failed RPCs (and no sends dropped because the gateway fell behind),
 *     zero 503s, zero wrong answers (1 response in 16 is decoded and checked);
 *   - p99 stable: the highest window p99 ≤ 2 × the median window p99.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import Redis from 'ioredis';
import { H2Driver, PhaseStats, type PhaseResult } from './h2-driver';
import { cpuSecondsOf, machineInfo, rssBytesOf, type MachineInfo } from './proc-stats';
import { startGateway, type ServerUnderTest } from './processes';
import { seedKeys } from './seed';
import {
  activePool,
  BENCH_DIR,
  envAssignments,
  expectClean,
  GATEWAY_DEFAULT_ENV,
  markdownTable,
  openDisposableRedis,
  writeGatewayConfig,
} from './setup';
import { malformedKeys, mixedTraffic, TRAFFIC_MIX, uniformTraffic, unknownKeys, type Traffic } from './traffic';

/** As in `npm run bench`: Envoy-like connections, streams in flight at saturation, distinct valid keys in the traffic. */
const CONNECTIONS = 4;
const CONCURRENCY = 64;
const ACTIVE_KEYS = 10_000;
/** One response in DECODE_EVERY is decoded and its status checked against its request class. */
const DECODE_EVERY = 16;
const SATURATION_WARMUP_MS = 1_000;
const SATURATION_MS = 5_000;
const MAX_IN_FLIGHT = 10_000;

const RSS_GROWTH_LIMIT = 0.1;
const P99_STABILITY_FACTOR = 2;

interface Options {
  minutes: number;
  /** Decisions/s; undefined: half the measured saturation rate. */
  rate: number | undefined;
  keys: number;
  sampleSeconds: number;
  /** Open loop at the soak rate before the first window (lets the heap settle after the saturation phase). */
  warmupMs: number;
  json: string;
  flush: boolean;
  /** Settings on top of the shipped ones (--env NAME=VALUE). */
  gatewayEnv: Record<string, string>;
}

const HELP = [
  'npm run soak -- [options]',
  '',
  'One gateway process under a steady open-loop load for a long time; RSS, latency and errors per window.',
  '',
  '  --minutes M           how long the measured soak lasts (default 10; decimals allowed)',
  "  --rate R              decisions/s to send (default: measure the gateway's saturation for",
  `                        ${SATURATION_MS / 1000} s in a closed loop first, and use half of it)`,
  '  --keys N              keys seeded in Redis (default 100000)',
  '  --sample-seconds S    length of one measurement window (default 30)',
  '  --warmup-seconds S    open loop at the rate before the first window, not measured (default 15)',
  '  --json FILE           where to write the result (default .bench/soak.json)',
  '  --flush               FLUSHALL the Redis at REDIS_URL first (it must be disposable)',
  '  --env NAME=VALUE      a gateway setting on top of the shipped ones (repeatable),',
  '                        e.g. --env GRPC_MAX_CONNECTION_AGE_MS=20000 to see connections recycled often',
  '  --help                this text',
  '',
  'Redis: REDIS_URL if set (it must be empty, or pass --flush), else a redis-server spawned on a free port.',
  'Exit code 0 when every verdict passes, 1 otherwise.',
  '',
].join('\n');

class UsageError extends Error {}

function parseOptions(argv: string[]): Options | 'help' {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        minutes: { type: 'string', default: '10' },
        rate: { type: 'string' },
        keys: { type: 'string', default: '100000' },
        'sample-seconds': { type: 'string', default: '30' },
        'warmup-seconds': { type: 'string', default: '15' },
        json: { type: 'string', default: path.join(BENCH_DIR, 'soak.json') },
        flush: { type: 'boolean', default: false },
        env: { type: 'string', multiple: true, default: [] },
        help: { type: 'boolean', default: false },
      },
    }));
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  if (values.help) return 'help';
  const positive = (text: string, name: string, unit: string) => {
    const value = Number(text);
    if (text.trim() === '' || !Number.isFinite(value) || value <= 0)
      throw new UsageError(`--${name} must be a positive number of ${unit}, got '${text}'`);
    return value;
  };
  const whole = (text: string, name: string) => {
    const value = Number(text);
    if (text.trim() === '' || !Number.isSafeInteger(value) || value < 1)
      throw new UsageError(`--${name} must be a whole number ≥ 1, got '${text}'`);
    return value;
  };
  const options: Options = {
    minutes: positive(values.minutes, 'minutes', 'minutes'),
    rate: values.rate === undefined ? undefined : positive(values.rate, 'rate', 'decisions per second'),
    keys: whole(values.keys, 'keys'),
    sampleSeconds: positive(values['sample-seconds'], 'sample-seconds', 'seconds'),
    warmupMs: positive(values['warmup-seconds'], 'warmup-seconds', 'seconds') * 1000,
    json: path.resolve(values.json),
    flush: values.flush,
    gatewayEnv: (() => {
      try {
        return envAssignments(values.env, 'env');
      } catch (error) {
        throw new UsageError((error as Error).message);
      }
    })(),
  };
  if (options.minutes * 60 < 2 * options.sampleSeconds) {
    throw new UsageError(
      `--minutes ${values.minutes} gives fewer than two windows of --sample-seconds ${values['sample-seconds']}: RSS growth and p99 stability need at least two`,
    );
  }
  return options;
}

const log = (text: string) => process.stderr.write(`${text}\n`);
const out = (text: string) => process.stdout.write(`${text}\n`);
const MB = 2 ** 20;

interface SoakWindow {
  index: number;
  /** Seconds since the measurement began, at the window's start and end. */
  fromSeconds: number;
  toSeconds: number;
  decisions: number;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
  p999Ms: number;
  maxMs: number;
  /** Failed RPCs (no grpc-status 0, broken stream, past the 250 ms grpc-timeout). */
  errors: number;
  /** Sends dropped because MAX_IN_FLIGHT Checks were outstanding (the gateway fell behind). */
  dropped: number;
  unavailable: number;
  mismatches: number;
  checked: number;
  firstError?: string;
  rssMb: number;
  /** Gateway CPU over the window, in % of one core. */
  cpuPercent: number;
  redisUsedMb: number;
  /**
   * The load driver's own event-loop delay over the window (p99 and max, ms).
   * Latency counts from each request's scheduled time, so a stall of the
   * driver (it shares the machine) shows up in p99 as well: when these are
   * close to p99, the driver, not the gateway, was late.
   */
  driverLagP99Ms: number;
  driverLagMaxMs: number;
}

interface Verdict {
  name: string;
  rule: string;
  value: string;
  pass: boolean;
}

interface SoakReport {
  version: 1;
  date: string;
  command: string;
  machine: MachineInfo;
  redis: { version: string; source: string };
  gatewayEnv: Record<string, string>;
  keys: number;
  accounts: number;
  activeKeys: number;
  trafficMix: Record<string, number>;
  driver: { connections: number; decodeEvery: number; maxInFlight: number; warmupSeconds: number };
  saturation?: { perSecond: number; concurrency: number; seconds: number; p99Ms: number; errors: number; unavailable: number };
  rate: number;
  rateSource: 'measured' | '--rate';
  minutes: number;
  sampleSeconds: number;
  windows: SoakWindow[];
  rssGrowth: number;
  medianP99Ms: number;
  maxP99Ms: number;
  verdicts: Verdict[];
  pass: boolean;
  elapsedSeconds: number;
}

/**
 * One PhaseStats that the open loop records into, forwarding each completion
 * to the current window's own PhaseStats: the load never pauses between
 * windows. A completion counts in the window in which it arrives.
 */
class WindowedStats extends PhaseStats {
  current = new PhaseStats();

  override record(latencyMs: number, cls: number, completion: Parameters<PhaseStats['record']>[2]): void {
    this.current.record(latencyMs, cls, completion);
  }

  /** The window so far, and a fresh one from now on. */
  cut(): PhaseStats {
    const closed = this.current;
    this.current = new PhaseStats();
    return closed;
  }
}

/** Everything started here, stopped once, whether the soak ends, fails, or is interrupted. */
const cleanups: (() => Promise<void>)[] = [];
let stopping: Promise<void> | undefined;
function stopAll(): Promise<void> {
  return (stopping ??= (async () => {
    for (const cleanup of cleanups.splice(0).reverse()) {
      try {
        await cleanup();
      } catch (error) {
        log(`cleanup: ${(error as Error).message}`);
      }
    }
  })());
}

let interrupted = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (interrupted) process.exit(130); // second signal: the exit hooks SIGKILL what is left
    interrupted = true;
    log(`\n${signal}: stopping the gateway and Redis…`);
    void stopAll().finally(() => process.exit(130));
  });
}

async function main(): Promise<number> {
  let parsed: Options | 'help';
  try {
    parsed = parseOptions(process.argv.slice(2));
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    log(`soak: ${error.message}\nRun \`npm run soak -- --help\` for the options.`);
    return 1;
  }
  if (parsed === 'help') {
    out(HELP);
    return 0;
  }
  const options = parsed;
  fs.mkdirSync(BENCH_DIR, { recursive: true });
  const started = Date.now();
  const machine = machineInfo();
  log(`gateway-authz soak on ${machine.cpus} × ${machine.cpuModel}, node ${machine.node}`);

  const redis = await openDisposableRedis(options.flush, 'soak');
  cleanups.push(() => redis.stop());
  const stats = new Redis(redis.url, { disconnectTimeout: 50 });
  cleanups.push(async () => stats.disconnect());
  const version = /redis_version:(\S+)/.exec(await stats.info('server'))?.[1] ?? 'unknown';
  log(`redis ${version} at ${redis.url}${redis.pid ? ` (spawned, pid ${redis.pid})` : ''}`);
  const redisUrl = `${redis.url.replace(/\/\d*$/, '')}/0`;

  log(`seeding ${options.keys.toLocaleString('en-US')} keys…`);
  const seeded = await seedKeys(
    redisUrl,
    { keys: options.keys, keysPerAccount: 10, rateLimitedKeys: 100, keep: Math.min(options.keys, ACTIVE_KEYS) },
    log,
  );
  log(
    `  ${seeded.keys.toLocaleString('en-US')} keys in ${seeded.accounts.toLocaleString('en-US')} accounts in ${seeded.seconds.toFixed(1)} s`,
  );
  const valid = activePool(seeded, ACTIVE_KEYS);
  const traffic = mixedTraffic(
    { valid, malformed: malformedKeys(400), unknown: unknownKeys(2000), rateLimited: seeded.rateLimited },
    Math.max(100_000, valid.length * 4),
  );

  const gatewayEnv = {
    REDIS_URL: redisUrl,
    CONFIG_FILE: writeGatewayConfig('soak-gateway-config.json'),
    ...GATEWAY_DEFAULT_ENV,
    ...options.gatewayEnv,
  };
  /** A gateway with a warm key cache, and the rate-limited keys' one allowed request spent. */
  const startWarmGateway = async (logName: string) => {
    const logFile = path.join(BENCH_DIR, logName);
    const gateway = await startGateway(gatewayEnv, logFile);
    cleanups.push(() => gateway.stop());
    log(`gateway pid ${gateway.pid} at ${gateway.grpcAddress} (log: ${path.relative(process.cwd(), logFile)})`);
    const driver = await H2Driver.connect(gateway.grpcAddress, CONNECTIONS);
    cleanups.push(async () => driver.close());
    log(`cache warm-up: ${valid.length.toLocaleString('en-US')} keys`);
    expectClean('cache warm-up', await driver.sendAll(uniformTraffic('valid', valid), 16));
    await driver.sendAll(uniformTraffic('valid', seeded.rateLimited), 16);
    return { gateway, driver };
  };

  let saturation: SoakReport['saturation'];
  let rate = options.rate;
  if (rate === undefined) {
    // On a gateway of its own, stopped afterwards: the soaked one must not
    // start with a heap grown by the saturation phase, or RSS growth would be
    // measured from an inflated start.
    const probe = await startWarmGateway('soak-saturation-gateway.log');
    log(`saturation: closed loop, ${CONCURRENCY} in flight, ${SATURATION_MS / 1000} s after ${SATURATION_WARMUP_MS / 1000} s warm-up`);
    const result = await probe.driver.closedLoop({
      traffic,
      concurrency: CONCURRENCY,
      warmupMs: SATURATION_WARMUP_MS,
      durationMs: SATURATION_MS,
      decodeEvery: DECODE_EVERY,
    });
    expectClean('saturation', result, true);
    saturation = {
      perSecond: result.perSecond,
      concurrency: CONCURRENCY,
      seconds: result.seconds,
      p99Ms: result.latency.p99Ms,
      errors: result.errors,
      unavailable: result.unavailable,
    };
    rate = result.perSecond / 2;
    log(`  ${fmtInt(result.perSecond)} decisions/s (p99 ${result.latency.p99Ms.toFixed(2)} ms): soaking at half, ${fmtInt(rate)}/s`);
    probe.driver.close();
    await probe.gateway.stop();
  }
  const { gateway, driver } = await startWarmGateway('soak-gateway.log');

  const durationMs = options.minutes * 60_000;
  const sampleMs = options.sampleSeconds * 1000;
  const windowCount = Math.ceil(durationMs / sampleMs - 1e-9);
  log(
    `soak: open loop at ${fmtInt(rate)}/s for ${options.minutes} min after ${options.warmupMs / 1000} s warm-up, ` +
      `${windowCount} windows of ${options.sampleSeconds} s`,
  );
  const windows = await soak(driver, gateway, stats, traffic, rate, options.warmupMs, durationMs, sampleMs);

  const verdicts = evaluate(windows);
  const report: SoakReport = {
    version: 1,
    date: new Date().toISOString(),
    command: `npm run soak${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`,
    machine,
    redis: { version, source: process.env.REDIS_URL ? 'REDIS_URL' : redis.pid ? 'spawned redis-server' : 'test Redis' },
    gatewayEnv: { ...gatewayEnv, REDIS_URL: '(the soak Redis)', CONFIG_FILE: 'limits 1e9/min and 1e9/day per key and per account' },
    keys: seeded.keys,
    accounts: seeded.accounts,
    activeKeys: valid.length,
    trafficMix: TRAFFIC_MIX,
    driver: { connections: CONNECTIONS, decodeEvery: DECODE_EVERY, maxInFlight: MAX_IN_FLIGHT, warmupSeconds: options.warmupMs / 1000 },
    ...(saturation ? { saturation } : {}),
    rate,
    rateSource: options.rate === undefined ? 'measured' : '--rate',
    minutes: options.minutes,
    sampleSeconds: options.sampleSeconds,
    windows,
    ...verdicts.figures,
    verdicts: verdicts.list,
    pass: verdicts.list.every((verdict) => verdict.pass),
    elapsedSeconds: (Date.now() - started) / 1000,
  };
  fs.mkdirSync(path.dirname(options.json), { recursive: true });
  fs.writeFileSync(options.json, `${JSON.stringify(report, null, 2)}\n`);
  printReport(report);
  log(`\nJSON written to ${path.relative(process.cwd(), options.json) || options.json}; ${report.elapsedSeconds.toFixed(0)} s in all`);
  return report.pass ? 0 : 1;
}

/** The open loop, uninterrupted, cut into windows; one line per window on stderr as it closes. */
async function soak(
  driver: H2Driver,
  gateway: ServerUnderTest,
  redis: Redis,
  traffic: Traffic,
  rate: number,
  warmupMs: number,
  durationMs: number,
  sampleMs: number,
): Promise<SoakWindow[]> {
  const recorder = new WindowedStats();
  const windows: SoakWindow[] = [];
  const windowCount = Math.ceil(durationMs / sampleMs - 1e-9);
  const measureFrom = performance.now() + warmupMs;
  const measureTo = measureFrom + durationMs;
  let cutAt = measureFrom;
  let cpuAt = 0;
  let droppedBefore = 0;
  let timer: NodeJS.Timeout | undefined;
  let pending = Promise.resolve();
  const lag = monitorEventLoopDelay({ resolution: 10 });

  const close = (endAt: number) => {
    // Synchronous part first: swap the recorder, read the gateway's CPU and RSS at the cut.
    const closed = recorder.cut();
    const cpu = cpuSecondsOf(gateway.pid);
    const rss = rssBytesOf(gateway.pid);
    const seconds = (endAt - cutAt) / 1000;
    const from = (cutAt - measureFrom) / 1000;
    const cpuPercent = ((cpu - cpuAt) / seconds) * 100;
    const dropped = recorder.overloaded - droppedBefore;
    droppedBefore = recorder.overloaded;
    cutAt = endAt;
    cpuAt = cpu;
    const result = closed.result(seconds);
    const driverLag = { p99Ms: lag.percentile(99) / 1e6, maxMs: lag.max / 1e6 };
    lag.reset();
    const index = windows.length + 1;
    pending = pending.then(async () => {
      const used = /used_memory:(\d+)/.exec(await redis.info('memory').catch(() => ''))?.[1];
      const window = toWindow(
        index,
        from,
        from + seconds,
        result,
        dropped,
        rss,
        cpuPercent,
        used ? Number(used) / MB : Number.NaN,
        driverLag,
      );
      windows.push(window);
      log(windowLine(window, windowCount));
    });
  };
  const scheduleCut = (k: number) => {
    if (k >= windowCount) return;
    timer = setTimeout(
      () => {
        close(performance.now());
        scheduleCut(k + 1);
      },
      Math.max(0, measureFrom + k * sampleMs - performance.now()),
    );
  };
  // The first window opens when the measurement does: read the gateway's CPU then.
  const opener = setTimeout(() => {
    cpuAt = cpuSecondsOf(gateway.pid);
    cutAt = performance.now();
    lag.enable();
    scheduleCut(1);
  }, warmupMs);

  await driver.openLoop({ traffic, rate, warmupMs, durationMs, decodeEvery: DECODE_EVERY, maxInFlight: MAX_IN_FLIGHT, stats: recorder });
  clearTimeout(opener);
  if (timer) clearTimeout(timer);
  // The last window: up to the end of the schedule (its last answers arrived while draining).
  close(Math.max(measureTo, cutAt + 1));
  lag.disable();
  await pending;
  return windows;
}

function toWindow(
  index: number,
  fromSeconds: number,
  toSeconds: number,
  result: PhaseResult,
  dropped: number,
  rssBytes: number,
  cpuPercent: number,
  redisUsedMb: number,
  driverLag: { p99Ms: number; maxMs: number },
): SoakWindow {
  return {
    index,
    fromSeconds,
    toSeconds,
    decisions: result.decisions,
    perSecond: result.perSecond,
    p50Ms: result.latency.p50Ms,
    p99Ms: result.latency.p99Ms,
    p999Ms: result.latency.p999Ms,
    maxMs: result.latency.maxMs,
    errors: result.errors,
    dropped,
    unavailable: result.unavailable,
    mismatches: result.mismatches,
    checked: Object.values(result.checked).reduce((sum, entry) => sum + entry.checked, 0),
    ...(result.firstError ? { firstError: result.firstError } : {}),
    rssMb: rssBytes / MB,
    cpuPercent,
    redisUsedMb,
    driverLagP99Ms: driverLag.p99Ms,
    driverLagMaxMs: driverLag.maxMs,
  };
}

function windowLine(window: SoakWindow, of: number): string {
  return (
    `  window ${window.index}/${of} [${window.fromSeconds.toFixed(0)}–${window.toSeconds.toFixed(0)} s]: ` +
    `${fmtInt(window.perSecond)}/s, p50 ${window.p50Ms.toFixed(2)} ms, p99 ${window.p99Ms.toFixed(2)} ms, p99.9 ${window.p999Ms.toFixed(2)} ms, ` +
    `${window.errors} failed, ${window.dropped} dropped, ${window.unavailable} 503s, ${window.mismatches} wrong of ${fmtInt(window.checked)} checked, ` +
    `RSS ${window.rssMb.toFixed(1)} MB, CPU ${window.cpuPercent.toFixed(0)} %, driver lag max ${window.driverLagMaxMs.toFixed(0)} ms` +
    (window.rssMb === 0 ? ' (the gateway process is gone)' : '') +
    (window.firstError ? ` (first error: ${window.firstError})` : '')
  );
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

function evaluate(windows: SoakWindow[]): { list: Verdict[]; figures: Pick<SoakReport, 'rssGrowth' | 'medianP99Ms' | 'maxP99Ms'> } {
  const first = windows[0]!;
  const last = windows.at(-1)!;
  const rssGrowth = first.rssMb > 0 ? (last.rssMb - first.rssMb) / first.rssMb : Number.NaN;
  const sum = (pick: (window: SoakWindow) => number) => windows.reduce((total, window) => total + pick(window), 0);
  const failed = sum((window) => window.errors);
  const dropped = sum((window) => window.dropped);
  const unavailable = sum((window) => window.unavailable);
  const mismatches = sum((window) => window.mismatches);
  const checked = sum((window) => window.checked);
  const decisions = sum((window) => window.decisions);
  const p99s = windows.map((window) => window.p99Ms);
  const medianP99Ms = median(p99s);
  const maxP99Ms = Math.max(...p99s);
  const worst = windows.find((window) => window.p99Ms === maxP99Ms)!;
  const list: Verdict[] = [
    {
      name: 'RSS growth',
      rule: `(RSS at the end of the last window − RSS at the end of window 1) / RSS at the end of window 1 < ${RSS_GROWTH_LIMIT * 100} %`,
      value: `${(rssGrowth * 100).toFixed(1)} % (${first.rssMb.toFixed(1)} MB → ${last.rssMb.toFixed(1)} MB)`,
      pass: rssGrowth < RSS_GROWTH_LIMIT && last.rssMb > 0,
    },
    {
      name: 'failed RPCs',
      rule: 'zero failed RPCs (past the 250 ms grpc-timeout or broken) and zero sends dropped for too many in flight',
      value: `${failed} failed, ${dropped} dropped of ${fmtInt(decisions + failed + dropped)} sent`,
      pass: failed === 0 && dropped === 0,
    },
    {
      name: '503s',
      rule: 'zero 503 store_unavailable answers',
      value: `${unavailable} of ${fmtInt(checked)} decoded`,
      pass: unavailable === 0,
    },
    {
      name: 'wrong answers',
      rule: `zero decoded answers with the wrong status for their request class (1 in ${DECODE_EVERY} decoded)`,
      value: `${mismatches} of ${fmtInt(checked)} decoded`,
      pass: mismatches === 0,
    },
    {
      name: 'p99 stable',
      rule: `highest window p99 ≤ ${P99_STABILITY_FACTOR} × median window p99`,
      value: `max ${maxP99Ms.toFixed(2)} ms (window ${worst.index}) vs median ${medianP99Ms.toFixed(2)} ms: ${(maxP99Ms / medianP99Ms).toFixed(2)} ×`,
      pass: maxP99Ms <= P99_STABILITY_FACTOR * medianP99Ms,
    },
  ];
  return { list, figures: { rssGrowth, medianP99Ms, maxP99Ms } };
}

function printReport(report: SoakReport): void {
  const { machine } = report;
  out('');
  out(
    `machine: ${machine.cpus} × ${machine.cpuModel}, ${machine.memTotalMb} MB, Linux ${machine.kernel}, node ${machine.node}, Redis ${report.redis.version} (${report.redis.source})`,
  );
  out(
    `soak: ${report.minutes} min open loop at ${fmtInt(report.rate)} decisions/s ` +
      (report.saturation
        ? `(half the gateway's ${fmtInt(report.saturation.perSecond)}/s saturation, closed loop, ${report.saturation.concurrency} in flight)`
        : '(--rate)') +
      `, after ${report.driver.warmupSeconds} s warm-up; ${report.driver.connections} HTTP/2 connections; ` +
      `mix ${Object.entries(report.trafficMix)
        .map(([name, share]) => `${name} ${share * 100}%`)
        .join(', ')}; ` +
      `${fmtInt(report.activeKeys)} active keys of ${fmtInt(report.keys)} in Redis; one gateway process`,
  );
  out(
    `gateway settings: ${Object.entries(report.gatewayEnv)
      .map(([name, value]) => `${name}=${value}`)
      .join(' ')}`,
  );
  out('');
  const rows: string[][] = [
    [
      'window',
      'decisions',
      'decisions/s',
      'p50 ms',
      'p99 ms',
      'p99.9 ms',
      'failed',
      '503s',
      'wrong',
      'RSS MB',
      'gateway CPU %',
      'Redis MB',
      'driver lag p99/max ms',
    ],
  ];
  for (const window of report.windows) {
    rows.push([
      `${window.index}: ${window.fromSeconds.toFixed(0)}–${window.toSeconds.toFixed(0)} s`,
      fmtInt(window.decisions),
      fmtInt(window.perSecond),
      window.p50Ms.toFixed(2),
      window.p99Ms.toFixed(2),
      window.p999Ms.toFixed(2),
      String(window.errors + window.dropped),
      String(window.unavailable),
      String(window.mismatches),
      window.rssMb.toFixed(1),
      window.cpuPercent.toFixed(0),
      Number.isNaN(window.redisUsedMb) ? '–' : window.redisUsedMb.toFixed(1),
      `${window.driverLagP99Ms.toFixed(0)} / ${window.driverLagMaxMs.toFixed(0)}`,
    ]);
  }
  for (const line of markdownTable(rows)) out(line);
  out('');
  out('verdicts:');
  for (const verdict of report.verdicts)
    out(`  ${verdict.pass ? 'PASS' : 'FAIL'}  ${verdict.name}: ${verdict.value} (rule: ${verdict.rule})`);
  out(
    `  (latency counts from each request's scheduled send time; "driver lag" is this load driver's own event-loop delay, which adds to it)`,
  );
  out('');
  if (report.pass) {
    out('soak PASSED');
  } else {
    out(
      `soak FAILED: ${report.verdicts
        .filter((verdict) => !verdict.pass)
        .map((verdict) => `${verdict.name} (${verdict.value})`)
        .join('; ')}`,
    );
    const firstError = report.windows.find((window) => window.firstError)?.firstError;
    if (firstError) out(`first failed RPC: ${firstError}`);
  }
}

function fmtInt(value: number): string {
  return Math.round(value).toLocaleString('en-US');
}

main().then(
  async (code) => {
    await stopAll();
    process.exit(code);
  },
  async (error: unknown) => {
    log(`soak failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    await stopAll();
    process.exit(1);
  },
);
