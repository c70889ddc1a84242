/**
 * `npm run bench`: gateway-authz against the ceiling of its own stack.
 *
 *   npm run bench                                # 100k keys, about 2 minutes
 *   npm run bench -- --keys 1000000              # 1M keys in Redis
 *   npm run bench -- --compare-key-counts        # a gateway on 10k keys and one on 1M, side by side
 *
 * Redis: REDIS_URL (must be empty, or pass --flush), else a redis-server
 * spawned on a free port (test/support/redis-server.ts). The baseline and
 * the gateway(s) run in child processes, all started up front; the load
 * driver (h2-driver.ts) runs here and drives them in alternating rounds, so
 * drift in a shared, noisy machine hits every contender alike.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import Redis from 'ioredis';
import { H2Driver, PhaseStats, type PhaseHooks, type PhaseResult } from './h2-driver';
import { cpuSecondsOf, machineInfo, rssBytesOf } from './proc-stats';
import { startGateway, startNoopServer, type ServerUnderTest } from './processes';
import { checkPathRoundTrips, clientCommandsDuring, commandDelta, commandStats, redisCpuSeconds, type CommandCounts } from './redis-stats';
import { evaluateTargets, printReport, type BenchReport, type GatewayRun, type ServerRun } from './report';
import { seedKeys, type SeededKeys } from './seed';
import { activePool, BENCH_DIR, envAssignments, expectClean, GATEWAY_DEFAULT_ENV, openDisposableRedis, writeGatewayConfig } from './setup';
import { malformedKeys, mixedTraffic, TRAFFIC_MIX, uniformTraffic, unknownKeys, type Traffic, type TrafficPools } from './traffic';

/** The gateway's default KEY_CACHE_MAX_ENTRIES: the cache fill never needs more keys than this. */
const KEY_CACHE_MAX_ENTRIES = 200_000;
const SMALL_KEY_COUNT = 10_000;

interface Options {
  keys: number;
  compareKeyCounts: boolean;
  rounds: number;
  roundMs: number;
  warmupMs: number;
  connections: number;
  concurrency: number;
  activeKeys: number;
  fillCache: boolean;
  flush: boolean;
  json: string;
  gatewayEnv: Record<string, string>;
  nodeArgs: string[];
  /** More gateways measured in the same rounds: GRPC_WORKERS=N (--workers), and A/B runs (--versus, --versus-env). */
  extra: { label: string; tag: string; distDir?: string; env: Record<string, string> }[];
}

function parseOptions(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      keys: { type: 'string' },
      'compare-key-counts': { type: 'boolean', default: false },
      rounds: { type: 'string', default: '12' },
      'round-seconds': { type: 'string', default: '1' },
      warmup: { type: 'string', default: '2' },
      connections: { type: 'string', default: '4' },
      concurrency: { type: 'string', default: '64' },
      'active-keys': { type: 'string', default: '10000' },
      'no-fill': { type: 'boolean', default: false },
      flush: { type: 'boolean', default: false },
      json: { type: 'string', default: path.join(BENCH_DIR, 'result.json') },
      env: { type: 'string', multiple: true, default: [] },
      'node-arg': { type: 'string', multiple: true, default: [] },
      workers: { type: 'string', default: '2' },
      versus: { type: 'string' },
      'versus-env': { type: 'string', multiple: true, default: [] },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(
      [
        'npm run bench -- [options]',
        '  --keys N                keys seeded in Redis (default 100000; 1000000 with --compare-key-counts)',
        `  --compare-key-counts    also run a gateway on a Redis holding ${SMALL_KEY_COUNT} keys, and compare throughput`,
        '  --rounds N              alternating rounds per phase (default 12)',
        '  --round-seconds S       measured seconds per contender per round (default 1)',
        '  --warmup S              warm-up before the first round (default 2; 0.3 s before later rounds)',
        '  --connections N         HTTP/2 connections, as Envoy would hold (default 4)',
        '  --concurrency N         streams in flight at saturation, over all connections (default 64)',
        '  --active-keys N         distinct valid keys in the traffic (default 10000)',
        '  --no-fill               skip the cache fill (one Check per seeded key, up to 200k) before the last RSS reading',
        '  --env NAME=VALUE        a setting for the gateway process (repeatable), e.g. --env DECISION_LOG_SAMPLE=1',
        '  --node-arg ARG          a node option for the gateway process (repeatable), e.g. --node-arg=--cpu-prof',
        '  --workers N             also run a gateway with GRPC_WORKERS=N (default 2; 0 or 1: do not)',
        '  --versus DIR            A/B: also run a gateway built into DIR (a copy of an earlier dist/), same rounds',
        '  --versus-env NAME=VALUE A/B: also run a gateway with this setting on top of --env (repeatable)',
        '  --flush                 FLUSHALL the Redis at REDIS_URL first (it must be disposable)',
        '  --json FILE             where to write the result (default .bench/result.json)',
        '',
      ].join('\n'),
    );
    process.exit(0);
  }
  const whole = (text: string, name: string, min = 1) => {
    const value = Number(text);
    if (!Number.isInteger(value) || value < min) throw new Error(`--${name} must be a whole number ≥ ${min}, got '${text}'`);
    return value;
  };
  const seconds = (text: string, name: string) => {
    const value = Number(text);
    if (!(value > 0)) throw new Error(`--${name} must be a positive number of seconds, got '${text}'`);
    return value * 1000;
  };
  const compareKeyCounts = values['compare-key-counts'];
  const gatewayEnv = envAssignments(values.env, 'env');
  const versusEnv = envAssignments(values['versus-env'], 'versus-env');
  return {
    keys: whole(values.keys ?? (compareKeyCounts ? '1000000' : '100000'), 'keys'),
    compareKeyCounts,
    rounds: whole(values.rounds, 'rounds'),
    roundMs: seconds(values['round-seconds'], 'round-seconds'),
    warmupMs: seconds(values.warmup, 'warmup'),
    connections: whole(values.connections, 'connections'),
    concurrency: whole(values.concurrency, 'concurrency'),
    activeKeys: whole(values['active-keys'], 'active-keys'),
    fillCache: !values['no-fill'],
    flush: values.flush,
    json: values.json,
    gatewayEnv,
    nodeArgs: values['node-arg'],
    extra: [
      ...(whole(values.workers, 'workers', 0) > 1
        ? [{ label: `gateway-authz, GRPC_WORKERS=${values.workers}`, tag: 'workers', env: { ...gatewayEnv, GRPC_WORKERS: values.workers } }]
        : []),
      ...(values.versus || Object.keys(versusEnv).length > 0
        ? [
            {
              label: `versus (${[
                values.versus ?? '',
                Object.entries(versusEnv)
                  .map(([n, v]) => `${n}=${v}`)
                  .join(' '),
              ]
                .filter(Boolean)
                .join(', ')})`,
              tag: 'versus',
              ...(values.versus ? { distDir: path.resolve(values.versus) } : {}),
              env: { ...gatewayEnv, ...versusEnv },
            },
          ]
        : []),
    ],
  };
}

const log = (text: string) => process.stderr.write(`${text}\n`);

/** One server being measured, and what has been measured of it so far. */
interface Contender {
  label: string;
  server: ServerUnderTest;
  traffic: Traffic;
  /** Only gateways: validate answers, count Redis commands, read /metrics. */
  gateway?: { seeded: SeededKeys; redisUrl: string; startFresh: () => Promise<ServerUnderTest> };
  saturation: PhaseStats;
  saturationSeconds: number;
  cpuSeconds: number;
  driverCpuMicros: number;
  /** Redis's CPU during the saturation windows (gateways only). */
  redisCpuSeconds: number;
  commands: CommandCounts;
  metrics: Record<string, number>;
  halfLoad: PhaseStats;
  halfLoadSeconds: number;
  /** Open loop at half the gateway's own saturation: what a Check costs in time when the gateway is not overloaded. */
  ownHalfLoad: PhaseStats;
  ownHalfLoadSeconds: number;
  roundRates: number[];
}

async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2));
  fs.mkdirSync(BENCH_DIR, { recursive: true });
  const started = Date.now();
  const machine = machineInfo();
  log(`gateway-authz bench on ${machine.cpus} × ${machine.cpuModel}, node ${machine.node}`);

  const redis = await openDisposableRedis(options.flush, 'bench');
  const stats = new Redis(redis.url, { disconnectTimeout: 50 });
  const servers: ServerUnderTest[] = [];
  try {
    const version = /redis_version:(\S+)/.exec(await stats.info('server'))?.[1] ?? 'unknown';
    log(`redis ${version} at ${redis.url}${redis.pid ? ` (spawned, pid ${redis.pid})` : ''}`);

    // Fixed pools for the non-valid classes; the valid pool comes from each seed.
    const malformed = malformedKeys(400);
    const unknown = unknownKeys(2000);

    // Seed: the main key count in db 0 and, to compare key counts, 10k keys in db 1.
    const databases: { db: number; keys: number }[] = [{ db: 0, keys: options.keys }];
    if (options.compareKeyCounts) databases.unshift({ db: 1, keys: SMALL_KEY_COUNT });
    const gateways: Contender[] = [];
    for (const { db, keys } of databases) {
      const redisUrl = `${redis.url.replace(/\/\d*$/, '')}/${db}`;
      const seeded = await seed(redisUrl, stats, options, keys);
      const traffic = buildTraffic(seeded, options, malformed, unknown);
      const server = await startGatewayFor(redisUrl, keys, options);
      servers.push(server);
      const label = options.compareKeyCounts
        ? `gateway-authz, ${keys >= 1_000_000 ? `${keys / 1_000_000}M` : `${keys / 1000}k`} keys`
        : 'gateway-authz';
      gateways.push(
        contender(label, server, traffic, {
          seeded,
          redisUrl,
          startFresh: () => startGatewayFor(redisUrl, keys, options, options.gatewayEnv, undefined, 'rss'),
        }),
      );
    }
    const main = gateways.at(-1)!;
    const versus: Contender[] = [];
    const extraEnv = new Map<Contender, Record<string, string>>();
    for (const extra of options.extra) {
      const server = await startGatewayFor(main.gateway!.redisUrl, main.gateway!.seeded.keys, options, extra.env, extra.distDir, extra.tag);
      servers.push(server);
      const entry = contender(extra.label, server, main.traffic, {
        ...main.gateway!,
        startFresh: () =>
          startGatewayFor(main.gateway!.redisUrl, main.gateway!.seeded.keys, options, extra.env, extra.distDir, `${extra.tag}-rss`),
      });
      versus.push(entry);
      extraEnv.set(entry, extra.env);
    }

    // Warm each gateway's key cache, spend the rate-limited keys' one allowed request, count round trips.
    const roundTrips = new Map<Contender, GatewayRun['roundTrips']>();
    for (const gateway of [...gateways, ...versus]) roundTrips.set(gateway, await prepareGateway(gateway, options));

    const baselineServer = await startNoopServer();
    servers.push(baselineServer);
    const baseline = contender('baseline (no-op grpc-js)', baselineServer, main.traffic);
    const contenders = [baseline, ...gateways, ...versus];

    // Saturation: closed loop, alternating rounds.
    log(`saturation: ${options.rounds} rounds × ${options.roundMs / 1000} s each, ${options.concurrency} in flight`);
    for (let round = 0; round < options.rounds; round += 1) {
      for (const entry of contenders) await saturationRound(entry, stats, options, round === 0 ? options.warmupMs : 300);
      log(`  round ${round + 1}: ${contenders.map((entry) => `${entry.label} ${Math.round(entry.roundRates.at(-1)!)}/s`).join(', ')}`);
    }
    const halfLoadRate = rate(baseline) / 2;

    // Latency at half the baseline's saturation: open loop, alternating rounds.
    log(`latency: open loop at ${Math.round(halfLoadRate)}/s, ${options.rounds} rounds × ${options.roundMs / 1000} s each`);
    for (let round = 0; round < options.rounds; round += 1) {
      for (const entry of contenders) await halfLoadRound(entry, halfLoadRate, options, round === 0 ? options.warmupMs : 300);
    }
    // Half the baseline's rate can exceed the gateway's own saturation; this phase shows the time a Check takes below it.
    const ownHalfLoadRate = rate(main) / 2;
    log(
      `latency: open loop at ${Math.round(ownHalfLoadRate)}/s (half the gateway's saturation), ${options.rounds} rounds × ${options.roundMs / 1000} s each`,
    );
    for (let round = 0; round < options.rounds; round += 1) {
      for (const entry of contenders) await halfLoadRound(entry, ownHalfLoadRate, options, round === 0 ? options.warmupMs : 300, 'own');
    }

    const baselineRun = toServerRun(baseline, halfLoadRate, ownHalfLoadRate);
    await baselineServer.stop();

    const runs: GatewayRun[] = [];
    const versusRuns: GatewayRun[] = [];
    for (const gateway of [...gateways, ...versus]) {
      const rssSteadyMb = rssBytesOf(gateway.server.pid) / 2 ** 20;
      const rssCacheFull = options.fillCache ? await fillCache(gateway, options) : undefined;
      const seeded = gateway.gateway!.seeded;
      (versus.includes(gateway) ? versusRuns : runs).push({
        ...toServerRun(gateway, halfLoadRate, ownHalfLoadRate),
        keys: seeded.keys,
        accounts: seeded.accounts,
        seedSeconds: seeded.seconds,
        gatewayEnv: { ...(extraEnv.get(gateway) ?? options.gatewayEnv) },
        roundTrips: roundTrips.get(gateway)!,
        rssSteadyMb,
        ...(rssCacheFull ? { rssCacheFull } : {}),
      });
    }

    const gateway = runs.at(-1)!;
    const report: BenchReport = {
      version: 1,
      date: new Date().toISOString(),
      command: `npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`,
      machine,
      driver: {
        name: 'node-raw-http2',
        why:
          'built-in driver (test/bench/h2-driver.ts over raw-h2-connection.ts): HTTP/2 framing on the socket, pre-encoded requests. ' +
          'h2load is not used even when installed: it sends one request body for every request, so it can neither mix the traffic classes nor run an open loop',
        connections: options.connections,
        concurrency: options.concurrency,
        rounds: options.rounds,
        roundSeconds: options.roundMs / 1000,
        warmupSeconds: options.warmupMs / 1000,
        trafficMix: TRAFFIC_MIX,
        activeKeys: Math.min(options.activeKeys, gateway.keys),
      },
      redis: { version, source: process.env.REDIS_URL ? 'REDIS_URL' : redis.pid ? 'spawned redis-server' : 'test Redis' },
      baseline: baselineRun,
      gateway,
      ...(runs.length > 1 ? { keyCountComparison: { small: runs[0]!, large: runs[1]! } } : {}),
      ...(versusRuns.length > 0 ? { versus: versusRuns } : {}),
      halfLoadRate,
      ownHalfLoadRate,
      targets: [],
      elapsedSeconds: 0,
    };
    report.targets = evaluateTargets(report);
    report.elapsedSeconds = (Date.now() - started) / 1000;
    fs.mkdirSync(path.dirname(options.json), { recursive: true });
    fs.writeFileSync(options.json, `${JSON.stringify(report, null, 2)}\n`);
    printReport(report, (text) => process.stdout.write(`${text}\n`));
    log(`\nJSON written to ${path.relative(process.cwd(), options.json) || options.json}; ${report.elapsedSeconds.toFixed(0)} s in all`);
  } finally {
    for (const server of servers) await server.stop();
    stats.disconnect();
    await redis.stop();
  }
}

function contender(label: string, server: ServerUnderTest, traffic: Traffic, gateway?: Contender['gateway']): Contender {
  return {
    label,
    server,
    traffic,
    ...(gateway ? { gateway } : {}),
    saturation: new PhaseStats(),
    saturationSeconds: 0,
    cpuSeconds: 0,
    driverCpuMicros: 0,
    redisCpuSeconds: 0,
    commands: {},
    metrics: {},
    halfLoad: new PhaseStats(),
    halfLoadSeconds: 0,
    ownHalfLoad: new PhaseStats(),
    ownHalfLoadSeconds: 0,
    roundRates: [],
  };
}

function rate(entry: Contender): number {
  return entry.saturation.result(entry.saturationSeconds).perSecond;
}

async function seed(redisUrl: string, stats: Redis, options: Options, keys: number): Promise<SeededKeys> {
  log(`seeding ${keys.toLocaleString('en-US')} keys…`);
  const seeded = await seedKeys(
    redisUrl,
    {
      keys,
      keysPerAccount: 10,
      rateLimitedKeys: 100,
      keep: Math.min(keys, options.fillCache ? KEY_CACHE_MAX_ENTRIES : options.activeKeys),
    },
    log,
  );
  const used = /used_memory:(\d+)/.exec(await stats.info('memory'))?.[1];
  log(
    `  ${seeded.keys.toLocaleString('en-US')} keys in ${seeded.accounts.toLocaleString('en-US')} accounts in ${seeded.seconds.toFixed(1)} s` +
      (used ? ` (Redis now uses ${(Number(used) / 2 ** 20).toFixed(0)} MB)` : ''),
  );
  return seeded;
}

function buildTraffic(seeded: SeededKeys, options: Options, malformed: string[], unknown: string[]): Traffic {
  const pools: TrafficPools = { valid: activePool(seeded, options.activeKeys), malformed, unknown, rateLimited: seeded.rateLimited };
  return mixedTraffic(pools, Math.max(100_000, pools.valid.length * 4));
}

function startGatewayFor(
  redisUrl: string,
  keys: number,
  options: Options,
  env = options.gatewayEnv,
  distDir?: string,
  tag = '',
): Promise<ServerUnderTest> {
  return startGateway(
    { REDIS_URL: redisUrl, CONFIG_FILE: writeGatewayConfig('gateway-config.json'), ...GATEWAY_DEFAULT_ENV, ...env },
    path.join(BENCH_DIR, `gateway-${keys}${tag ? `-${tag}` : ''}.log`),
    options.nodeArgs,
    distDir,
  );
}

async function prepareGateway(gateway: Contender, options: Options): Promise<GatewayRun['roundTrips']> {
  const { seeded, redisUrl } = gateway.gateway!;
  log(`${gateway.label}: cache warm-up and round-trip accounting`);
  const driver = await H2Driver.connect(gateway.server.grpcAddress, options.connections);
  try {
    const valid = activePool(seeded, options.activeKeys);
    expectClean('cache warm-up', await driver.sendAll(uniformTraffic('valid', valid), 16));
    // Spends each rate-limited key's one allowed request (already spent when another gateway shares the Redis).
    await driver.sendAll(uniformTraffic('valid', seeded.rateLimited), 16);
    const accounting = await roundTripAccounting(driver, redisUrl, valid, seeded.rateLimited, gateway.traffic);
    log(
      `  round trips per decision: ${Object.entries(accounting)
        .map(([name, entry]) => `${name} ${entry.perDecision.toFixed(2)}`)
        .join(', ')}`,
    );
    return accounting;
  } finally {
    driver.close();
  }
}

/**
 * Short phases under MONITOR: client commands (round trips) per decision
 * for each request class, and for the mix. Valid keys are warm in the cache.
 */
async function roundTripAccounting(
  driver: H2Driver,
  redisUrl: string,
  valid: string[],
  rateLimited: string[],
  mix: Traffic,
): Promise<GatewayRun['roundTrips']> {
  // Factories: a repeated phase needs unknown keys never seen before (the first try's are in the negative cache).
  const phases: [string, () => Traffic][] = [
    ['valid (cached)', () => uniformTraffic('valid', valid.slice(0, 2000))],
    ['malformed', () => uniformTraffic('malformed', malformedKeys(400))],
    ['unknown (first sight)', () => uniformTraffic('unknown', unknownKeys(400))],
    ['rate-limited', () => uniformTraffic('rate_limited', rateLimited)],
    ['mix', () => ({ frames: mix.frames.slice(0, 3000), classes: mix.classes.slice(0, 3000) })],
  ];
  const result: GatewayRun['roundTrips'] = {};
  for (const [name, traffic] of phases) {
    let phase: PhaseResult | undefined;
    const commands = await withMonitorRetries(name, () =>
      clientCommandsDuring(redisUrl, async () => {
        phase = await driver.sendAll(traffic(), 8);
      }),
    );
    // MONITOR slows Redis down; a Check that passed the 50 ms Redis deadline
    // under it (503) still sent its one command, so it counts the same.
    expectClean(`round-trip accounting (${name})`, phase!, true);
    if (phase!.unavailable > 0)
      log(`  note: ${phase!.unavailable} of ${phase!.decisions} Checks answered 503 while MONITOR slowed Redis (${name})`);
    result[name] = { decisions: phase!.decisions, commands, perDecision: checkPathRoundTrips(commands) / phase!.decisions };
  }
  return result;
}

/**
 * ioredis now and then misreads a line of a busy MONITOR stream ("Command
 * queue state error"): that phase's count is lost, not wrong. Repeat it.
 */
async function withMonitorRetries(name: string, count: () => Promise<CommandCounts>, tries = 3): Promise<CommandCounts> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await count();
    } catch (error) {
      if (attempt >= tries || !(error instanceof Error) || !error.message.startsWith('MONITOR failed')) throw error;
      log(`  note: ${error.message.split(':')[0]} during '${name}'; counting it again`);
    }
  }
}

async function saturationRound(entry: Contender, stats: Redis, options: Options, warmupMs: number): Promise<void> {
  const driver = await H2Driver.connect(entry.server.grpcAddress, options.connections);
  let cpuStart = 0;
  let driverStart = process.cpuUsage();
  let commandsBefore: CommandCounts = {};
  let metricsBefore: Record<string, number> = {};
  let redisCpuStart = 0;
  const { gateway } = entry;
  const hooks: PhaseHooks = {
    atStart: async () => {
      if (gateway) {
        commandsBefore = await commandStats(stats);
        metricsBefore = await scrapeMetrics(entry.server.adminUrl!);
        redisCpuStart = await redisCpuSeconds(stats);
      }
      cpuStart = cpuSecondsOf(entry.server.pid);
      driverStart = process.cpuUsage();
    },
    atEnd: async () => {
      entry.cpuSeconds += cpuSecondsOf(entry.server.pid) - cpuStart;
      const driverCpu = process.cpuUsage(driverStart);
      entry.driverCpuMicros += driverCpu.user + driverCpu.system;
      if (gateway) {
        entry.redisCpuSeconds += (await redisCpuSeconds(stats)) - redisCpuStart;
        for (const [command, calls] of Object.entries(commandDelta(commandsBefore, await commandStats(stats)))) {
          entry.commands[command] = (entry.commands[command] ?? 0) + calls;
        }
        const after = await scrapeMetrics(entry.server.adminUrl!);
        for (const [name, value] of Object.entries(after))
          entry.metrics[name] = (entry.metrics[name] ?? 0) + value - (metricsBefore[name] ?? 0);
      }
    },
  };
  try {
    const before = entry.saturation.count;
    const result = await driver.closedLoop({
      traffic: entry.traffic,
      concurrency: options.concurrency,
      warmupMs,
      durationMs: options.roundMs,
      decodeEvery: gateway ? 16 : Number.POSITIVE_INFINITY,
      hooks,
      stats: entry.saturation,
    });
    entry.saturationSeconds += result.seconds;
    entry.roundRates.push((entry.saturation.count - before) / result.seconds);
  } finally {
    driver.close();
  }
}

async function halfLoadRound(
  entry: Contender,
  rate: number,
  options: Options,
  warmupMs: number,
  which: 'baseline' | 'own' = 'baseline',
): Promise<void> {
  const driver = await H2Driver.connect(entry.server.grpcAddress, options.connections);
  try {
    const result = await driver.openLoop({
      traffic: entry.traffic,
      rate,
      warmupMs,
      durationMs: options.roundMs,
      decodeEvery: entry.gateway ? 16 : Number.POSITIVE_INFINITY,
      maxInFlight: 10_000,
      stats: which === 'own' ? entry.ownHalfLoad : entry.halfLoad,
    });
    if (which === 'own') entry.ownHalfLoadSeconds += result.seconds;
    else entry.halfLoadSeconds += result.seconds;
  } finally {
    driver.close();
  }
}

function toServerRun(entry: Contender, halfLoadRate: number, ownHalfLoadRate: number): ServerRun {
  const saturation = entry.saturation.result(entry.saturationSeconds);
  const halfLoad = entry.halfLoad.result(entry.halfLoadSeconds);
  const ownHalfLoad = entry.ownHalfLoad.result(entry.ownHalfLoadSeconds);
  if (entry.gateway) {
    expectClean(`${entry.label}, saturation`, saturation, true);
    expectClean(`${entry.label}, half load`, halfLoad, true);
    expectClean(`${entry.label}, half its own saturation`, ownHalfLoad, true);
  }
  const commandTotal = Object.values(entry.commands).reduce((sum, calls) => sum + calls, 0);
  return {
    label: entry.label,
    saturation,
    roundRates: entry.roundRates,
    cpuUsPerDecision: (entry.cpuSeconds * 1e6) / saturation.decisions,
    driverCpuUsPerDecision: entry.driverCpuMicros / saturation.decisions,
    halfLoad: { ...halfLoad, rate: halfLoadRate },
    ownHalfLoad: { ...ownHalfLoad, rate: ownHalfLoadRate },
    rssMb: rssBytesOf(entry.server.pid) / 2 ** 20,
    ...(entry.gateway
      ? {
          redisCpuUsPerDecision: (entry.redisCpuSeconds * 1e6) / saturation.decisions,
          redisCommands: {
            perDecision: commandTotal / saturation.decisions,
            byCommand: Object.fromEntries(
              Object.entries(entry.commands).map(([command, calls]) => [command, calls / saturation.decisions]),
            ),
          },
          metrics: entry.metrics,
        }
      : {}),
  };
}

/**
 * RSS with the key cache as full as production could make it, read from a
 * FRESH gateway process with the same settings: the one that ran the timed
 * phases was driven past its saturation (the open loop at half the
 * baseline's rate can exceed it), and V8 keeps the heap that overload grew.
 * One Check for each seeded key (up to the cache's default bound), then 5 s
 * of the mixed traffic at a quarter of the gateway's saturation rate.
 */
async function fillCache(gateway: Contender, options: Options): Promise<GatewayRun['rssCacheFull']> {
  const { seeded, startFresh } = gateway.gateway!;
  const count = Math.min(seeded.kept.length, KEY_CACHE_MAX_ENTRIES);
  log(`${gateway.label}: a fresh process; cache fill, one Check for each of ${count.toLocaleString('en-US')} keys`);
  const server = await startFresh();
  const driver = await H2Driver.connect(server.grpcAddress, options.connections);
  try {
    for (let first = 0; first < count; first += 20_000) {
      const chunk = seeded.kept.slice(first, Math.min(count, first + 20_000));
      // Only for the RSS reading: a Check past its deadline on a busy machine does not matter here, a wrong answer does.
      expectClean('cache fill', await driver.sendAll(uniformTraffic('valid', chunk), 32), true);
    }
    const steadyRate = rate(gateway) / 4;
    await driver.openLoop({
      traffic: gateway.traffic,
      rate: steadyRate,
      warmupMs: 0,
      durationMs: 5000,
      decodeEvery: 16,
      maxInFlight: 10_000,
      stats: new PhaseStats(),
    });
    await new Promise((resolve) => setTimeout(resolve, 1000));
    // The live JS heap next to RSS: how much of RSS is data, and how much is heap V8 has not handed back.
    const metrics = await (await fetch(`${server.adminUrl}/metrics`)).text();
    const heapUsed = Number(/^gateway_authz_nodejs_heap_size_used_bytes (\S+)$/m.exec(metrics)?.[1] ?? NaN);
    return { cachedKeys: count, rssMb: rssBytesOf(server.pid) / 2 ** 20, heapUsedMb: heapUsed / 2 ** 20, steadyRate };
  } finally {
    driver.close();
    await server.stop();
  }
}

/** The few counters of /metrics the report shows (key cache outcomes, store errors, decisions by reason). */
async function scrapeMetrics(adminUrl: string): Promise<Record<string, number>> {
  try {
    const text = await (await fetch(`${adminUrl}/metrics`)).text();
    const out: Record<string, number> = {};
    for (const match of text.matchAll(/^gateway_authz_key_cache_lookups_total\{outcome="([^"]+)"\} (\S+)$/gm))
      out[`keyCache.${match[1]}`] = Number(match[2]);
    for (const match of text.matchAll(/^gateway_authz_store_errors_total\{operation="([^"]+)"\} (\S+)$/gm))
      out[`storeErrors.${match[1]}`] = Number(match[2]);
    for (const match of text.matchAll(/^gateway_authz_decisions_total\{[^}]*reason="([^"]+)"[^}]*\} (\S+)$/gm)) {
      out[`reason.${match[1]}`] = (out[`reason.${match[1]}`] ?? 0) + Number(match[2]);
    }
    return out;
  } catch {
    return {};
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    log(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.exit(1);
  },
);
