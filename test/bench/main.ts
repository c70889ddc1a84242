/**
 * `npm run bench`: gateway-authz against the ceiling of its own stack, and
 * issue 14's targets, all measured in one run.
 *
 *   npm run bench                                # 200k keys, about 3 minutes
 *   npm run bench -- --keys 1000000              # 1M keys in Redis
 *   npm run bench -- --compare-key-counts        # a gateway on 10k keys and one on 1M, side by side
 *   npm run bench -- --rounds 2 --round-seconds 0.5 --keys 20000 --overload-seconds 1   # a quick look (figures meaningless)
 *   npm run bench -- --attacks                   # only the HTTP/2 attacks (attacks.ts), about 4 minutes
 *
 * Redis: REDIS_URL (must be empty, or pass --flush), else a redis-server
 * spawned on a free port (test/support/redis-server.ts). The no-op servers
 * and the gateway(s) run in child processes, all started up front. Phases:
 *  1. saturation, closed loop, mixed traffic (the Node driver, h2-driver.ts,
 *     here), in alternating rounds so drift on a shared, noisy machine hits
 *     every server alike: decisions/s, CPU of server and Redis, Redis commands;
 *  2. the tail: h2load at half the gateway's saturation, one valid key, the
 *     same rate against the no-op grpc-js server, alternating rounds; the
 *     gateway's own Check latency histogram read around each round;
 *  3. per gateway, a fresh process: the key cache filled (one Check per key,
 *     up to 200k), RSS after ¼ load, then open loop at 1.5 × and 3 × its
 *     saturation (mixed traffic), RSS sampled throughout, each phase between
 *     two closed loops as phase 1 runs them (its goodput's yardstick);
 *  4. the usage processor (ext_proc) on a gateway process of its own:
 *     CPU per metered streamed answer and memory per open stream
 *     (ext-proc-cpu.ts, at a smaller volume; --no-ext-proc skips it).
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import Redis from 'ioredis';
import { loadSettings } from '../../src/platform/settings';
import { ENVOY_CHECK_TIMEOUT_MS, H2Driver, PhaseStats, summarize, type PhaseHooks, type PhaseResult } from './h2-driver';
import { ATTACK_VECTORS, type AttackVector } from './attack-vectors';
import { ATTACK_CONNECTIONS, DEFAULT_ATTACK_MS, NORMAL_RATE, runAttackPhase, selectVectors } from './attacks';
import { serverCpuPlan, tailCpuSplit } from './cpu-affinity';
import { extAuthzCircuitBreaker, type CircuitBreakerLimits } from './envoy-circuit-breaker';
import { measureExtProcCpu } from './ext-proc-cpu';
import { findH2load, runH2load, STAGGERED_CONNECTIONS } from './h2load';
import { cpuSecondsOf, machineInfo, rssBytesOf, sampleMaxRss, waitUntilIdle } from './proc-stats';
import { startNoopServer, startOtlpSink, type OtlpSink, type ServerUnderTest } from './processes';
import {
  checkPathRoundTrips,
  clientCommandsDuring,
  commandDelta,
  commandStats,
  redisWork,
  redisWorkDelta,
  type CommandCounts,
  type RedisWork,
} from './redis-stats';
import {
  evaluateTargets,
  KEY_CACHE_MAX_ENTRIES,
  printReport,
  saturationBesideMean,
  type BenchReport,
  type FlushIntervalCommands,
  type GatewayRun,
  type OverloadRun,
  type ServerRun,
  type TailRun,
} from './report';
import { seedKeys, type SeededKeys, type SeedOptions } from './seed';
import {
  addHistograms,
  formatBucket,
  counterDelta,
  histogramDelta,
  histogramQuantile,
  scrapeMetrics,
  type Histogram,
  type MetricsSnapshot,
} from './server-metrics';
import { activePool, BENCH_DIR, envAssignments, expectClean, openDisposableRedis, startBenchGateway, writeGatewayConfig } from './setup';
import {
  envoyShapedRequest,
  frameOf,
  malformedKeys,
  mixedTraffic,
  RESTRICTIONS_ALLOWING_THE_TRAFFIC,
  TRAFFIC_MIX,
  uniformTraffic,
  unknownKeys,
  type Traffic,
  type TrafficPools,
} from './traffic';

const SMALL_KEY_COUNT = 10_000;
/**
 * --restricted-keys seeds its keys in a database of their own (--compare-key-counts uses 1): the shipped gateway's
 * database holds the same keys as without the flag, and each gateway looks its keys up among as many.
 */
const RESTRICTED_KEYS_DB = 2;
/** --credit-holds seeds its prepaid accounts and their keys in a database of their own, as --restricted-keys does. */
const CREDIT_HOLDS_DB = 3;
/**
 * --credit-holds: each account's balance. The bench meters no answer, so no hold is ever released (each lapses 720 s
 * after its Check): the balance covers every hold the run places (the tail's key alone brings hundreds of thousands).
 */
const CREDIT_HOLDS_BALANCE = 1e15;
/** The transport a no-op Check server is asked for besides grpc-js: the one the service ships (issue 14), when noop-server.ts has it. */
const SHIPPED_TRANSPORT = 'h2';
/** Multiples of the gateway's own saturation the overload phases offer. */
const OVERLOAD_MULTIPLES = [1.5, 3] as const;
const OVERLOAD_WARMUP_MS = 1_000;
/** The closed-loop saturation measured beside each overload phase, on its process (saturationBeside). */
const SATURATION_BESIDE_MS = 2_000;
const SATURATION_BESIDE_WARMUP_MS = 500;
/** h2load streams per connection: far more than the rate needs, so it never waits for an answer before sending (a stall is measured, not hidden). */
const TAIL_STREAMS_PER_CONNECTION = 256;
/**
 * --tracing's root sampling ratio: issue 37's p99 targets hold "at 1 %
 * sampling". The bench's Checks carry no trace context, so every one is a
 * root and the ratio is what is sampled; unsampled ones pay the sampler.
 */
const DEFAULT_TRACING_RATIO = 0.01;

/** The processor phase's volume: about 10 s on the 2-core machine (ext-proc-cpu.ts alone defaults to 5,000 and 4,000). */
const EXT_PROC_ANSWERS = 2_000;
const EXT_PROC_HELD_STREAMS = 2_000;

interface Options {
  keys: number;
  compareKeyCounts: boolean;
  rounds: number;
  roundMs: number;
  warmupMs: number;
  /** Measured seconds of each overload phase (after OVERLOAD_WARMUP_MS). */
  overloadMs: number;
  /** --overload-only RATE: only a fresh gateway's overload phases, at multiples of this rate taken as its saturation. */
  overloadOnlyRate: number | undefined;
  /** --envoy-max-requests N: the modelled Envoy circuit breaker's max_requests instead of envoy.yaml's (trying other bounds). */
  envoyMaxRequests: number | undefined;
  connections: number;
  concurrency: number;
  activeKeys: number;
  fillCache: boolean;
  /** --attacks: only the HTTP/2 attack phase (attacks.ts), these vectors for this long each. */
  attacks: { attackMs: number; vectors: AttackVector[] } | undefined;
  /** Measured answers of the processor phase; 0: --no-ext-proc. */
  extProcAnswers: number;
  flush: boolean;
  json: string;
  gatewayEnv: Record<string, string>;
  nodeArgs: string[];
  /** --tracing: also run a gateway exporting spans (to otlp-sink.ts) with parent-based sampling at this root ratio. */
  tracingRatio: number | undefined;
  /** --restricted-keys: also a gateway whose traffic uses as many keys, each with restrictions that allow it. */
  restrictedKeys: boolean;
  /** --credit-holds: also a gateway whose accounts are prepaid, so each metered Check places a credit hold. */
  creditHolds: boolean;
  /** More gateways measured in the same rounds: GRPC_WORKERS=N (--workers), and A/B runs (--versus, --versus-env). */
  extra: { label: string; tag: string; distDir?: string; env: Record<string, string>; nodeArgs?: string[] }[];
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
      'overload-seconds': { type: 'string', default: '5' },
      'overload-only': { type: 'string' },
      'envoy-max-requests': { type: 'string' },
      connections: { type: 'string', default: '4' },
      concurrency: { type: 'string', default: '64' },
      'active-keys': { type: 'string', default: '10000' },
      'no-fill': { type: 'boolean', default: false },
      'no-ext-proc': { type: 'boolean', default: false },
      'ext-proc-answers': { type: 'string', default: String(EXT_PROC_ANSWERS) },
      attacks: { type: 'boolean', default: false },
      'attack-seconds': { type: 'string', default: String(DEFAULT_ATTACK_MS / 1000) },
      'attack-vectors': { type: 'string', default: '' },
      flush: { type: 'boolean', default: false },
      json: { type: 'string' },
      env: { type: 'string', multiple: true, default: [] },
      'node-arg': { type: 'string', multiple: true, default: [] },
      workers: { type: 'string', default: '0' },
      versus: { type: 'string' },
      'token-budgets': { type: 'boolean', default: false },
      'restricted-keys': { type: 'boolean', default: false },
      'credit-holds': { type: 'boolean', default: false },
      'versus-env': { type: 'string', multiple: true, default: [] },
      'versus-node-arg': { type: 'string', multiple: true, default: [] },
      tracing: { type: 'boolean', default: false },
      'tracing-ratio': { type: 'string', default: String(DEFAULT_TRACING_RATIO) },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(
      [
        'npm run bench -- [options]',
        `  --keys N                keys seeded in Redis (default ${KEY_CACHE_MAX_ENTRIES}, the key cache's bound; 1000000 with --compare-key-counts)`,
        `  --compare-key-counts    also run a gateway on a Redis holding ${SMALL_KEY_COUNT} keys, and compare throughput`,
        '  --rounds N              alternating rounds of the saturation and the tail phases (default 12)',
        '  --round-seconds S       measured seconds per server per round (default 1)',
        '  --warmup S              warm-up before the first round (default 2; 0.3 s before later rounds)',
        `  --overload-seconds S    measured seconds of each overload phase (${OVERLOAD_MULTIPLES.join(' and ')} × saturation; default 5, after ${OVERLOAD_WARMUP_MS / 1000} s)`,
        '  --overload-only RATE    only the overload phases, on a fresh gateway, taking RATE decisions/s as its saturation',
        '                          (a short look while developing: no saturation or tail phase, no targets list)',
        "  --envoy-max-requests N  the overload phases' Envoy circuit breaker: max_requests N instead of envoy.yaml's",
        '  --connections N         HTTP/2 connections, as Envoy would hold (default 4)',
        '  --concurrency N         streams in flight at saturation, over all connections (default 64)',
        '  --active-keys N         distinct valid keys in the traffic (default 10000)',
        '  --no-fill               skip the cache fill (one Check per seeded key, up to 200k) before the RSS readings and overload',
        '  --no-ext-proc           skip the usage processor phase (ext_proc CPU per metered answer, memory per open stream)',
        `  --ext-proc-answers N    measured answers of that phase (default ${EXT_PROC_ANSWERS}, after 300 of warm-up)`,
        '  --env NAME=VALUE        a setting for the gateway process (repeatable), e.g. --env DECISION_LOG_SAMPLE=1',
        '  --node-arg ARG          a node option for the gateway process (repeatable), e.g. --node-arg=--cpu-prof',
        '  --workers N             also run a gateway with GRPC_WORKERS=N (default 0: do not)',
        '  --versus DIR            A/B: also run a gateway built into DIR (a copy of an earlier dist/), same rounds',
        '  --versus-env NAME=VALUE A/B: also run a gateway with this setting on top of --env (repeatable)',
        '  --versus-node-arg ARG   A/B: also run a gateway with this node option after --node-arg (repeatable), e.g. --versus-node-arg=--memory-reducer',
        '  --token-budgets         A/B: also run a gateway whose default plan has token budgets (2 per scope), same rounds',
        '  --tracing               A/B: also run a gateway exporting OpenTelemetry spans over OTLP/HTTP to a sink process',
        `                          (otlp-sink.ts), parent-based sampling with root ratio --tracing-ratio (default ${DEFAULT_TRACING_RATIO})`,
        '  --tracing-ratio R       the root sampling ratio of --tracing, from 0 to 1 (the traffic carries no trace context)',
        '  --restricted-keys       A/B: also run a gateway whose traffic uses keys with restrictions (endpoints, source addresses)',
        '                          that allow it, seeded apart (as many keys, same mix), same rounds, tail and fresh-process phases',
        '  --credit-holds          A/B: also run a gateway whose accounts are prepaid, so every metered Check places a credit hold',
        '                          (none released: the bench meters no answer), seeded apart as --restricted-keys is',
        `  --attacks               only the HTTP/2 attacks (no Check-path phase): each vector from ${ATTACK_CONNECTIONS} connections against the`,
        `                          gateway and the no-op grpc-js server, a normal client at ${NORMAL_RATE} Checks/s before, during and after`,
        "                          it; issue 33's targets; --env and --node-arg apply to the gateway",
        `  --attack-seconds S      seconds of each attack (default ${DEFAULT_ATTACK_MS / 1000}; less for a quick look)`,
        `  --attack-vectors A,B    only these vectors: ${ATTACK_VECTORS.map((vector) => vector.id).join(', ')}`,
        '  --flush                 FLUSHALL the Redis at REDIS_URL first (it must be disposable)',
        '  --json FILE             where to write the result (default .bench/result.json; .bench/attacks.json with --attacks)',
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
  const ratio = (text: string, name: string) => {
    const value = Number(text);
    if (!(value >= 0 && value <= 1)) throw new Error(`--${name} must be a number from 0 to 1, got '${text}'`);
    return value;
  };
  const compareKeyCounts = values['compare-key-counts'];
  const gatewayEnv = envAssignments(values.env, 'env');
  const versusEnv = envAssignments(values['versus-env'], 'versus-env');
  return {
    keys: whole(values.keys ?? (compareKeyCounts ? '1000000' : String(KEY_CACHE_MAX_ENTRIES)), 'keys'),
    compareKeyCounts,
    rounds: whole(values.rounds, 'rounds'),
    roundMs: seconds(values['round-seconds'], 'round-seconds'),
    warmupMs: seconds(values.warmup, 'warmup'),
    overloadMs: seconds(values['overload-seconds'], 'overload-seconds'),
    overloadOnlyRate: values['overload-only'] === undefined ? undefined : whole(values['overload-only'], 'overload-only'),
    envoyMaxRequests: values['envoy-max-requests'] === undefined ? undefined : whole(values['envoy-max-requests'], 'envoy-max-requests'),
    connections: whole(values.connections, 'connections'),
    concurrency: whole(values.concurrency, 'concurrency'),
    activeKeys: whole(values['active-keys'], 'active-keys'),
    fillCache: !values['no-fill'],
    extProcAnswers: values['no-ext-proc'] ? 0 : whole(values['ext-proc-answers'], 'ext-proc-answers'),
    attacks: values.attacks
      ? {
          attackMs: seconds(values['attack-seconds'], 'attack-seconds'),
          vectors: selectVectors(values['attack-vectors'].split(',').filter(Boolean)),
        }
      : undefined,
    restrictedKeys: values['restricted-keys'],
    creditHolds: values['credit-holds'],
    flush: values.flush,
    tracingRatio: values.tracing ? ratio(values['tracing-ratio'], 'tracing-ratio') : undefined,
    json: values.json ?? path.join(BENCH_DIR, values.attacks ? 'attacks.json' : 'result.json'),
    gatewayEnv,
    nodeArgs: values['node-arg'],
    extra: [
      ...(whole(values.workers, 'workers', 0) > 1
        ? [{ label: `gateway-authz, GRPC_WORKERS=${values.workers}`, tag: 'workers', env: { ...gatewayEnv, GRPC_WORKERS: values.workers } }]
        : []),
      ...(values['token-budgets']
        ? [
            {
              label: 'gateway-authz, token budgets in the default plan',
              tag: 'budgets',
              // After startGatewayFor's own CONFIG_FILE, so this one wins.
              env: { ...gatewayEnv, CONFIG_FILE: writeGatewayConfig('gateway-config-budgets.json', { tokenBudgets: true }) },
            },
          ]
        : []),
      ...(values.versus || Object.keys(versusEnv).length > 0 || values['versus-node-arg'].length > 0
        ? [
            {
              label: `versus (${[
                values.versus ?? '',
                Object.entries(versusEnv)
                  .map(([n, v]) => `${n}=${v}`)
                  .join(' '),
                values['versus-node-arg'].join(' '),
              ]
                .filter(Boolean)
                .join(', ')})`,
              tag: 'versus',
              ...(values.versus ? { distDir: path.resolve(values.versus) } : {}),
              env: { ...gatewayEnv, ...versusEnv },
              nodeArgs: values['versus-node-arg'],
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
  gateway?: {
    seeded: SeededKeys;
    redisUrl: string;
    env: Record<string, string>;
    startFresh: () => Promise<ServerUnderTest>;
    /** When its process was asked to start and when it was ready: its last-used timer started in between. */
    startedBetweenMs: readonly [number, number];
  };
  /** The tail phase's request body: a valid key's CheckRequest, length-prefixed (a file, for h2load). */
  tailBody: string;
  saturation: PhaseStats;
  saturationSeconds: number;
  cpuSeconds: number;
  driverCpuMicros: number;
  /** Redis's CPU and reads during the saturation windows (gateways only). */
  redis: RedisWork;
  commands: CommandCounts;
  /** Gateways: the commands of one whole last-used flush interval at saturation (flushIntervalCommands). */
  flushInterval?: FlushIntervalCommands;
  metrics: Record<string, number>;
  tail: TailRecord;
  /** The same rounds with h2load's connections opened 1 ms apart (H2loadOptions.staggered): the ones the tail targets judge. */
  staggeredTail: TailRecord;
  roundRates: number[];
}

async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2));
  if (options.attacks) {
    await runAttackPhase({
      ...options.attacks,
      flush: options.flush,
      json: options.json,
      gatewayEnv: options.gatewayEnv,
      nodeArgs: options.nodeArgs,
    });
    return;
  }
  // Before anything long: the tail phase cannot run without it.
  const h2load = findH2load();
  fs.mkdirSync(BENCH_DIR, { recursive: true });
  const started = Date.now();
  const machine = machineInfo();
  log(`gateway-authz bench on ${machine.cpus} × ${machine.cpuModel}, node ${machine.node}, ${h2load.version}`);

  const redis = await openDisposableRedis(options.flush, 'bench');
  const stats = new Redis(redis.url, { disconnectTimeout: 50 });
  const servers: ServerUnderTest[] = [];
  let otlpSink: OtlpSink | undefined;
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
      const askedAtMs = Date.now();
      const server = await startGatewayFor(redisUrl, keys, options);
      const startedBetweenMs = [askedAtMs, Date.now()] as const;
      servers.push(server);
      const label = options.compareKeyCounts
        ? `gateway-authz, ${keys >= 1_000_000 ? `${keys / 1_000_000}M` : `${keys / 1000}k`} keys`
        : 'gateway-authz';
      gateways.push(
        contender(label, server, traffic, writeTailBody(seeded, options, `db${db}`), {
          seeded,
          redisUrl,
          env: options.gatewayEnv,
          startFresh: () => startGatewayFor(redisUrl, keys, options, options.gatewayEnv, undefined, 'fresh'),
          startedBetweenMs,
        }),
      );
    }
    const main = gateways.at(-1)!;
    if (options.overloadOnlyRate !== undefined) {
      await overloadOnly(main, options.overloadOnlyRate, options);
      return;
    }
    const versus: Contender[] = [];
    const extraEnv = new Map<Contender, Record<string, string>>();
    if (options.tracingRatio !== undefined) {
      otlpSink = await startOtlpSink();
      options.extra.push({
        label: `tracing (OTLP/HTTP to a sink, parentbased_traceidratio ${options.tracingRatio})`,
        tag: 'tracing',
        env: { ...options.gatewayEnv, ...tracingEnv(otlpSink.endpoint, options.tracingRatio) },
      });
    }
    for (const extra of options.extra) {
      const askedAtMs = Date.now();
      const server = await startGatewayFor(
        main.gateway!.redisUrl,
        main.gateway!.seeded.keys,
        options,
        extra.env,
        extra.distDir,
        extra.tag,
        extra.nodeArgs,
      );
      servers.push(server);
      const entry = contender(extra.label, server, main.traffic, main.tailBody, {
        ...main.gateway!,
        env: extra.env,
        startedBetweenMs: [askedAtMs, Date.now()],
        startFresh: () =>
          startGatewayFor(
            main.gateway!.redisUrl,
            main.gateway!.seeded.keys,
            options,
            extra.env,
            extra.distDir,
            `${extra.tag}-fresh`,
            extra.nodeArgs,
          ),
      });
      versus.push(entry);
      extraEnv.set(entry, extra.env);
    }
    // A gateway with keys of its own, seeded apart in a database of its own, with its own traffic and tail body: every
    // phase it runs sends its own keys only.
    const seededApart = async (
      label: string,
      tag: string,
      db: number,
      apart: Pick<SeedOptions, 'restrictions' | 'creditBalance'>,
      env = options.gatewayEnv,
    ) => {
      const redisUrl = `${redis.url.replace(/\/\d*$/, '')}/${db}`;
      const seeded = await seed(redisUrl, stats, options, options.keys, apart);
      const askedAtMs = Date.now();
      const server = await startGatewayFor(redisUrl, options.keys, options, env, undefined, tag);
      servers.push(server);
      const entry = contender(label, server, buildTraffic(seeded, options, malformed, unknown), writeTailBody(seeded, options, tag), {
        seeded,
        redisUrl,
        env,
        startFresh: () => startGatewayFor(redisUrl, options.keys, options, env, undefined, `${tag}-fresh`),
        startedBetweenMs: [askedAtMs, Date.now()],
      });
      versus.push(entry);
      extraEnv.set(entry, env);
    };
    if (options.restrictedKeys) {
      await seededApart('gateway-authz, restricted keys', 'restricted', RESTRICTED_KEYS_DB, {
        restrictions: RESTRICTIONS_ALLOWING_THE_TRAFFIC,
      });
    }
    if (options.creditHolds) {
      // Priced, so each hold has money in it; every model at one price, so the traffic's Checks are priced as before.
      await seededApart(
        'gateway-authz, credit holds',
        'credit-holds',
        CREDIT_HOLDS_DB,
        { creditBalance: CREDIT_HOLDS_BALANCE },
        {
          ...options.gatewayEnv,
          CONFIG_FILE: writeGatewayConfig('gateway-config-credit-holds.json', { pricing: true }),
        },
      );
    }

    // Warm each gateway's key cache, spend the rate-limited keys' one allowed request, count round trips.
    const roundTrips = new Map<Contender, GatewayRun['roundTrips']>();
    for (const gateway of [...gateways, ...versus]) roundTrips.set(gateway, await prepareGateway(gateway, options));
    await waitForPendingFlushes([...gateways, ...versus], stats);

    const baselineServer = (await startNoopServer('grpc-js'))!;
    servers.push(baselineServer);
    const baseline = contender('no-op grpc-js', baselineServer, main.traffic, main.tailBody);
    const shippedServer = await startNoopServer(SHIPPED_TRANSPORT);
    if (shippedServer) servers.push(shippedServer);
    const shippedNoop = shippedServer
      ? contender(`no-op ${SHIPPED_TRANSPORT} (shipped transport)`, shippedServer, main.traffic, main.tailBody)
      : undefined;
    log(
      shippedNoop
        ? `no-op Check servers: grpc-js (the target's yardstick) and ${SHIPPED_TRANSPORT} (the shipped transport)`
        : `no-op Check server: grpc-js (noop-server.ts has no --transport ${SHIPPED_TRANSPORT}: grpc-js is the shipped transport in this build)`,
    );
    const contenders = [baseline, ...(shippedNoop ? [shippedNoop] : []), ...gateways, ...versus];

    // 1. Saturation: closed loop, alternating rounds.
    log(`saturation: ${options.rounds} rounds × ${options.roundMs / 1000} s each, ${options.concurrency} in flight`);
    for (let round = 0; round < options.rounds; round += 1) {
      for (const entry of contenders) await saturationRound(entry, stats, options, round === 0 ? options.warmupMs : 300);
      log(`  round ${round + 1}: ${contenders.map((entry) => `${entry.label} ${Math.round(entry.roundRates.at(-1)!)}/s`).join(', ')}`);
    }

    // 1b. Commands per decision over one whole last-used flush interval at saturation, each gateway alone.
    log('commands over one last-used flush interval at saturation, each gateway alone');
    await waitForPendingFlushes([...gateways, ...versus], stats);
    for (const gateway of [...gateways, ...versus]) gateway.flushInterval = await flushIntervalCommands(gateway, stats, options);

    // 2. The tail: h2load at half the gateway's own saturation, the same rate against the no-op grpc-js server.
    const tailRate = rate(main) / 2;
    const tailContenders = [baseline, ...gateways, ...versus];
    log(`tail: h2load at ${Math.round(tailRate)}/s, one valid key, ${options.rounds} rounds × ${options.roundMs / 1000} s each`);
    const cpus = tailCpuSplit(os.availableParallelism());
    const tailCpus = cpus ? { server: cpus.server, others: cpus.others, redisPinned: redis.pid !== undefined } : undefined;
    log(
      cpus
        ? `  the server under test alone on CPU ${cpus.server}; h2load, ${redis.pid ? 'Redis, ' : ''}the other servers and the bench on CPU ${cpus.others}` +
            (redis.pid ? '' : " (Redis is not the bench's own process: not moved)")
        : '  one CPU: every process shares it',
    );
    // Everything off the server CPU first; each server gets it for its own rounds only (onServerCpu).
    const cpuPlan = serverCpuPlan(cpus, [process.pid, ...(redis.pid ? [redis.pid] : []), ...contenders.map((entry) => entry.server.pid)]);
    const onServerCpu = (entry: Contender, rounds: () => Promise<void>): Promise<void> => cpuPlan.onServerCpu(entry.server.pid, rounds);
    // A warm-up each first, not counted (its figures are printed): the first gateway has had no traffic for 30 s or more by
    // now (the other's one-flush-interval phase), and a replica's first second after such a pause is not the steady state
    // this phase measures (it stalled 90-120 ms in two runs: bigger scavenges at first, and stalls with no GC). And the
    // saturation phases leave the old generation full of their garbage: in three runs of four, a mark-compact ran in the
    // first counted round or the one after it (its p99 31-48 ms), and the next one 20-odd rounds later, as in steady state.
    // 5 s let that first one run before the count. The gateway's histogram is read around each round, so it and h2load's
    // log still count the same Checks.
    for (const entry of tailContenders)
      await onServerCpu(entry, () => tailRound(entry, h2load.binary, tailRate, options, stats, true, cpus?.others, TAIL_WARMUP_MS));
    // CPU the processes not under test spent during each server's rounds (the bench's own included): idle is not always idle.
    const bystanders = new Map<Contender, Map<string, number>>(tailContenders.map((entry) => [entry, new Map()]));
    for (let round = 0; round < options.rounds; round += 1) {
      for (const entry of tailContenders) {
        const others = contenders.filter((other) => other !== entry);
        const before = others.map((other) => cpuSecondsOf(other.server.pid));
        const benchBefore = process.cpuUsage();
        await onServerCpu(entry, async () => {
          await tailRound(entry, h2load.binary, tailRate, options, stats, false, cpus?.others);
          await tailRound(entry, h2load.binary, tailRate, options, stats, true, cpus?.others);
        });
        const spent = bystanders.get(entry)!;
        others.forEach((other, i) => spent.set(other.label, (spent.get(other.label) ?? 0) + cpuSecondsOf(other.server.pid) - before[i]!));
        const bench = process.cpuUsage(benchBefore);
        spent.set('the bench process', (spent.get('the bench process') ?? 0) + (bench.user + bench.system) / 1e6);
      }
    }
    for (const [entry, spent] of bystanders) {
      const list = [...spent].map(([label, seconds]) => `${label} ${seconds.toFixed(2)} s`).join(', ');
      log(`  during ${entry.label}'s tail rounds, CPU of the others: ${list}`);
    }
    // The later phases (and the processes the bench starts for them, which inherit its CPUs) run on every CPU again.
    cpuPlan.release();

    const baselineRun = toServerRun(baseline, tailRate);
    const shippedRun = shippedNoop ? { ...toServerRun(shippedNoop, tailRate), transport: SHIPPED_TRANSPORT } : undefined;
    await baselineServer.stop();
    await shippedServer?.stop();

    // The timed processes are done: their RSS now, then they stop and free the cores for the fresh ones.
    const rssSteady = new Map<Contender, number>();
    const timedRuns = new Map<Contender, ServerRun>();
    for (const gateway of [...gateways, ...versus]) {
      rssSteady.set(gateway, rssBytesOf(gateway.server.pid) / 2 ** 20);
      timedRuns.set(gateway, toServerRun(gateway, tailRate));
      await gateway.server.stop();
    }

    // 3. Per gateway, a fresh process: cache fill, RSS, then past saturation.
    const runs: GatewayRun[] = [];
    const versusRuns: GatewayRun[] = [];
    for (const gateway of [...gateways, ...versus]) {
      const { fresh, overload } = await freshProcessPhases(gateway, options);
      const seeded = gateway.gateway!.seeded;
      (versus.includes(gateway) ? versusRuns : runs).push({
        ...timedRuns.get(gateway)!,
        keys: seeded.keys,
        accounts: seeded.accounts,
        seedSeconds: seeded.seconds,
        gatewayEnv: { ...(extraEnv.get(gateway) ?? options.gatewayEnv) },
        roundTrips: roundTrips.get(gateway)!,
        rssSteadyMb: rssSteady.get(gateway)!,
        fresh,
        overload,
      });
    }

    // 4. The usage processor, on a gateway of its own, once every other gateway has stopped.
    let extProc: BenchReport['extProc'];
    if (options.extProcAnswers > 0) {
      log(`usage processor (ext_proc): ${options.extProcAnswers} streamed answers, memory with ${EXT_PROC_HELD_STREAMS} streams held open`);
      extProc = await measureExtProcCpu({ answers: options.extProcAnswers, concurrency: 64, heldStreams: EXT_PROC_HELD_STREAMS });
      log(
        `  ${(extProc.cpuMsPerAnswer * 1000).toFixed(0)} µs CPU per metered answer, ${extProc.meteredWithUsage} of ${extProc.answers} metered`,
      );
    }

    const gateway = runs.at(-1)!;
    const report: BenchReport = {
      version: 2,
      date: new Date().toISOString(),
      command: `npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`,
      machine,
      driver: {
        name: 'node-raw-http2',
        why:
          'built-in driver (test/bench/h2-driver.ts over raw-h2-connection.ts): HTTP/2 framing on the socket, pre-encoded requests, ' +
          'mixed request classes, closed loop (saturation) and open loop (overload). The tail is measured with h2load instead: ' +
          'the Node driver shares the cores and its own event loop lags, which it would count as latency',
        connections: options.connections,
        concurrency: options.concurrency,
        rounds: options.rounds,
        roundSeconds: options.roundMs / 1000,
        warmupSeconds: options.warmupMs / 1000,
        trafficMix: TRAFFIC_MIX,
        activeKeys: Math.min(options.activeKeys, gateway.keys),
      },
      tailDriver: {
        name: 'h2load',
        version: h2load.version,
        connections: options.connections,
        streamsPerConnection: TAIL_STREAMS_PER_CONNECTION,
        request: `one valid key's CheckRequest (cached after its first Check), grpc-timeout ${ENVOY_CHECK_TIMEOUT_MS}m`,
        warmupSeconds: TAIL_WARMUP_MS / 1000,
        ...(tailCpus ? { cpus: tailCpus } : {}),
      },
      redis: { version, source: process.env.REDIS_URL ? 'REDIS_URL' : redis.pid ? 'spawned redis-server' : 'test Redis' },
      baseline: baselineRun,
      ...(shippedRun ? { shippedNoop: shippedRun } : {}),
      gateway,
      ...(runs.length > 1 ? { keyCountComparison: { small: runs[0]!, large: runs[1]! } } : {}),
      ...(versusRuns.length > 0 ? { versus: versusRuns } : {}),
      tailRate,
      answerWithinMs: ENVOY_CHECK_TIMEOUT_MS,
      ...(extProc ? { extProc } : {}),
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
    if (otlpSink) {
      const received = await otlpSink.stop();
      log(`OTLP sink: ${received.exports} exports, ${(received.bytes / 1024).toFixed(0)} KiB of spans`);
    }
    stats.disconnect();
    await redis.stop();
  }
}

/** The standard OTEL_* settings of the --tracing gateway. */
function tracingEnv(endpoint: string, ratio: number): Record<string, string> {
  return {
    OTEL_TRACES_EXPORTER: 'otlp',
    OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
    OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
    OTEL_TRACES_SAMPLER_ARG: String(ratio),
  };
}

function contender(label: string, server: ServerUnderTest, traffic: Traffic, tailBody: string, gateway?: Contender['gateway']): Contender {
  return {
    label,
    server,
    traffic,
    ...(gateway ? { gateway } : {}),
    tailBody,
    saturation: new PhaseStats(),
    saturationSeconds: 0,
    cpuSeconds: 0,
    driverCpuMicros: 0,
    redis: { userSeconds: 0, systemSeconds: 0, reads: 0 },
    commands: {},
    metrics: {},
    tail: emptyTailRecord(),
    staggeredTail: emptyTailRecord(),
    roundRates: [],
  };
}

function rate(entry: Contender): number {
  return entry.saturation.result(entry.saturationSeconds).perSecond;
}

async function seed(
  redisUrl: string,
  stats: Redis,
  options: Options,
  keys: number,
  { restrictions, creditBalance }: Pick<SeedOptions, 'restrictions' | 'creditBalance'> = {},
): Promise<SeededKeys> {
  log(
    `seeding ${keys.toLocaleString('en-US')} keys` +
      `${restrictions ? ` with restrictions ${JSON.stringify(restrictions)}` : ''}` +
      `${creditBalance !== undefined ? ` in prepaid accounts (balance ${creditBalance.toLocaleString('en-US')} each)` : ''}…`,
  );
  const seeded = await seedKeys(
    redisUrl,
    {
      keys,
      keysPerAccount: 10,
      rateLimitedKeys: 100,
      keep: Math.min(keys, options.fillCache ? KEY_CACHE_MAX_ENTRIES : options.activeKeys),
      ...(restrictions ? { restrictions } : {}),
      ...(creditBalance !== undefined ? { creditBalance } : {}),
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

/** h2load's request body: one valid key's Envoy-shaped CheckRequest as a gRPC length-prefixed message, in a file. */
function writeTailBody(seeded: SeededKeys, options: Options, name: string): string {
  const file = path.join(BENCH_DIR, `h2load-body-${name}.bin`);
  fs.writeFileSync(file, frameOf(envoyShapedRequest(activePool(seeded, options.activeKeys)[0]!, 0)));
  return file;
}

function startGatewayFor(
  redisUrl: string,
  keys: number,
  options: Options,
  env = options.gatewayEnv,
  distDir?: string,
  tag = '',
  extraNodeArgs: readonly string[] = [],
): Promise<ServerUnderTest> {
  return startBenchGateway(redisUrl, `gateway-${keys}${tag ? `-${tag}` : ''}.log`, env, [...options.nodeArgs, ...extraNodeArgs], distDir);
}

async function prepareGateway(gateway: Contender, options: Options): Promise<GatewayRun['roundTrips']> {
  const { seeded, redisUrl } = gateway.gateway!;
  log(`${gateway.label}: cache warm-up and round-trip accounting`);
  const driver = await H2Driver.connect(gateway.server.grpcAddress, options.connections);
  try {
    const valid = activePool(seeded, options.activeKeys);
    // A 503 (Redis deadline) on a busy machine leaves that key to be cached at its next Check; a wrong answer stops the run.
    const warmUp = await driver.sendAll(uniformTraffic('valid', valid), 16);
    expectClean('cache warm-up', warmUp, true);
    if (warmUp.unavailable + warmUp.errors > 0)
      log(`  note: ${warmUp.unavailable} 503s and ${warmUp.errors} failed RPCs in the warm-up: the machine is busy`);
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
 * The uses noted so far (after a warm-up, thousands of keys at once) are
 * written at each gateway's next last-used flush, a timer of
 * LAST_USED_FLUSH_MS from its process start. Wait until that flush has been
 * written, so that no later window counts it: the saturation rounds then
 * count only the flushes of their own traffic. The next tick is known to
 * within the process's start-up (nextFlushTick); then wait until the batch
 * script's HINCRBYs (no decision runs one) have stopped for a second.
 */
async function waitForPendingFlushes(gateways: Contender[], stats: Redis): Promise<void> {
  const nowMs = Date.now();
  const flushedByMs = Math.max(nowMs, ...gateways.map((gateway) => nextFlushTick(gateway, nowMs).latestMs));
  log(`waiting ${((flushedByMs - nowMs) / 1000).toFixed(1)} s for the uses noted so far to be flushed, so no later window counts them`);
  await sleep(flushedByMs - nowMs + 200);
  await untilBatchesQuiet(stats);
}

/** When a gateway's next last-used flush tick at or after `atMs` fires: between its process's start request and its readiness, plus whole intervals. */
function nextFlushTick(gateway: Contender, atMs: number): { earliestMs: number; latestMs: number; intervalMs: number } {
  const [askedAtMs, readyAtMs] = gateway.gateway!.startedBetweenMs;
  const intervalMs = lastUsedFlushMs(gateway.gateway!.env);
  const ticks = Math.ceil((atMs - askedAtMs) / intervalMs);
  return { earliestMs: askedAtMs + ticks * intervalMs, latestMs: readyAtMs + ticks * intervalMs, intervalMs };
}

/** Until the batch script's HINCRBYs (no decision runs one) have stopped for a second: a flush in progress has ended. */
async function untilBatchesQuiet(stats: Redis): Promise<void> {
  const hincrbys = async () => (await commandStats(stats)).hincrby ?? 0;
  for (let last = await hincrbys(), quietSinceMs = Date.now(); Date.now() - quietSinceMs < 1000;) {
    await sleep(100);
    const now = await hincrbys();
    if (now !== last) [last, quietSinceMs] = [now, Date.now()];
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

/**
 * Redis commands per decision as a gateway at saturation runs them: the
 * Checks' own and their share of the last-used batches. The saturation
 * rounds cannot say the second: a gateway has traffic there one round in
 * every few, so each 30 s flush carries a fraction of the decisions a busy
 * replica's would, for about as many keys, and its commands per decision
 * come out several times too high. Here the gateway alone gets the mix,
 * closed loop, from just after one flush tick to just before the next (the
 * ticks known to within the process's start-up); then that next flush, which
 * writes exactly the uses of this traffic, is counted with it. Nothing else
 * is pending anywhere (waitForPendingFlushes ran before).
 */
async function flushIntervalCommands(gateway: Contender, stats: Redis, options: Options): Promise<FlushIntervalCommands> {
  const previous = nextFlushTick(gateway, Date.now());
  await sleep(previous.latestMs + 200 - Date.now());
  const next = nextFlushTick(gateway, Date.now());
  const durationMs = next.earliestMs - 300 - Date.now();
  if (durationMs < next.intervalMs / 2)
    throw new Error(`${gateway.label}: the start-up span leaves too little of a flush interval to measure`);
  const before = await commandStats(stats);
  const driver = await H2Driver.connect(gateway.server.grpcAddress, options.connections);
  let result: PhaseResult;
  try {
    result = await driver.closedLoop({
      traffic: gateway.traffic,
      concurrency: options.concurrency,
      warmupMs: 0,
      durationMs,
      decodeEvery: 16,
    });
  } finally {
    driver.close();
  }
  expectClean(`${gateway.label}: one flush interval`, result, true);
  await sleep(next.latestMs + 200 - Date.now());
  await untilBatchesQuiet(stats);
  const commands = commandDelta(before, await commandStats(stats));
  const total = Object.values(commands).reduce((sum, calls) => sum + calls, 0);
  log(
    `  ${gateway.label}: ${result.decisions} decisions in ${result.seconds.toFixed(1)} s, ${(total / result.decisions).toFixed(2)} commands each, flush included`,
  );
  return { windowSeconds: result.seconds, decisions: result.decisions, commands, perDecision: total / result.decisions };
}

/** The gateway's LAST_USED_FLUSH_MS, as its settings read it (the default unless --env sets it). */
function lastUsedFlushMs(env: Record<string, string>): number {
  const loaded = loadSettings({ CONFIG_FILE: '', ...(env.LAST_USED_FLUSH_MS ? { LAST_USED_FLUSH_MS: env.LAST_USED_FLUSH_MS } : {}) });
  if (!loaded.ok) throw new Error(loaded.problems.join('; '));
  return loaded.settings.lastUsedFlushMs;
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
  let metricsBefore: MetricsSnapshot = { counters: {} };
  let redisStart: RedisWork = { userSeconds: 0, systemSeconds: 0, reads: 0 };
  const { gateway } = entry;
  const hooks: PhaseHooks = {
    atStart: async () => {
      if (gateway) {
        commandsBefore = await commandStats(stats);
        metricsBefore = await scrapeMetrics(entry.server.adminUrl!);
        redisStart = await redisWork(stats);
      }
      cpuStart = cpuSecondsOf(entry.server.pid);
      driverStart = process.cpuUsage();
    },
    atEnd: async () => {
      entry.cpuSeconds += cpuSecondsOf(entry.server.pid) - cpuStart;
      const driverCpu = process.cpuUsage(driverStart);
      entry.driverCpuMicros += driverCpu.user + driverCpu.system;
      if (gateway) {
        const redis = redisWorkDelta(redisStart, await redisWork(stats));
        entry.redis.userSeconds += redis.userSeconds;
        entry.redis.systemSeconds += redis.systemSeconds;
        entry.redis.reads += redis.reads;
        for (const [command, calls] of Object.entries(commandDelta(commandsBefore, await commandStats(stats)))) {
          entry.commands[command] = (entry.commands[command] ?? 0) + calls;
        }
        for (const [name, delta] of Object.entries(counterDelta(metricsBefore, await scrapeMetrics(entry.server.adminUrl!))))
          entry.metrics[name] = (entry.metrics[name] ?? 0) + delta;
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

/** The tail phase's warm-up per server, at its rate, before the counted rounds. */
const TAIL_WARMUP_MS = 5000;

/**
 * One round of the tail phase: h2load at `rate` against one server. For a
 * gateway, its /metrics is read before and after (outside h2load's run, so
 * the scrape's own cost is not in the tail), and every Check of the round
 * must have been allowed.
 */
async function tailRound(
  entry: Contender,
  binary: string,
  rate: number,
  options: Options,
  redis: Redis,
  staggered: boolean,
  driverCpus: string | undefined,
  /** A warm-up: run and printed as any round, counted nowhere, `durationMs` long. */
  warmupMs?: number,
): Promise<void> {
  // A warm-up's figures go to a record no one reads.
  const record = warmupMs !== undefined ? emptyTailRecord() : staggered ? entry.staggeredTail : entry.tail;
  const before = entry.gateway ? await scrapeMetrics(entry.server.adminUrl!) : undefined;
  // Redis's own stalls over 5 ms in this round. The bench's Redis is disposable (spawned, or an empty REDIS_URL); one that
  // refuses CONFIG or LATENCY just reports no events.
  const latencyMonitor = entry.gateway
    ? await redis.config('SET', 'latency-monitor-threshold', '5').then(
        () => redis.latency('RESET').then(() => true),
        () => false,
      )
    : false;
  const round = await runH2load({
    ...tailH2loadOptions(entry, binary, rate, options, staggered, driverCpus),
    ...(warmupMs !== undefined ? { durationMs: warmupMs } : {}),
  });
  for (const latency of round.latenciesMs) record.latenciesMs.push(latency);
  record.failed += round.failed;
  record.startSpanSeconds += round.startSpanSeconds;
  if (round.latenciesMs.length === 0) throw new Error(`tail phase, ${entry.label}: h2load logged no request (${round.summary})`);
  if (before) {
    const after = await scrapeMetrics(entry.server.adminUrl!);
    const counters = counterDelta(before, after);
    const refused = Object.entries(counters).filter(
      ([name]) => name.startsWith('reason.') && name !== 'reason.allowed' && name !== 'reason.store_unavailable',
    );
    if (refused.length > 0)
      throw new Error(`tail phase, ${entry.label}: the valid key was refused: ${JSON.stringify(Object.fromEntries(refused))}`);
    for (const [name, delta] of Object.entries(counters)) record.counters[name] = (record.counters[name] ?? 0) + delta;
    // Per round: whether the sheds (and the slow Checks) come in every round or in a few, and what stalled then.
    const p99 = summarize(round.latenciesMs).p99Ms;
    const gc = Object.entries(counters)
      .filter(([name]) => name.startsWith('gc.') && name.endsWith('.count'))
      .map(([name, count]) => `${name.slice(3, -6)} ${count} (${(counters[`${name.slice(0, -6)}.ms`] ?? 0).toFixed(1)} ms)`);
    const redisStalls = latencyMonitor
      ? ((await redis.latency('LATEST')) as [string, number, number, number][]).map(
          ([event, , latest, max]) => `${event} ${latest}/${max} ms`,
        )
      : [];
    const roundHistogram = histogramDelta(before.checkLatency, after.checkLatency);
    const inside = roundHistogram ? `, inside ${formatBucket(histogramQuantile(roundHistogram, 0.99))}` : '';
    const which = warmupMs !== undefined ? ` warm-up of ${warmupMs / 1000} s (not counted)` : ` round${staggered ? ' (staggered)' : ''}`;
    log(
      `  ${entry.label}, tail${which}: p99 ${p99.toFixed(2)} ms${inside}, shed ${counters['shed.over_capacity'] ?? 0}, ` +
        `store_unavailable ${counters['reason.store_unavailable'] ?? 0}; loop delay max ${after.loopDelayMaxMs?.toFixed(1) ?? '?'} ms; ` +
        `GC ${gc.join(', ') || 'none'}; Redis latency events ${redisStalls.join(', ') || 'none'}`,
    );
    record.histogram = addHistograms(record.histogram, roundHistogram);
  }
}

function tailH2loadOptions(
  entry: Contender,
  binary: string,
  rate: number,
  options: Options,
  staggered: boolean,
  driverCpus: string | undefined,
): Parameters<typeof runH2load>[0] {
  return {
    binary,
    address: entry.server.grpcAddress,
    bodyFile: entry.tailBody,
    logFile: path.join(BENCH_DIR, 'h2load.log'),
    connections: staggered ? STAGGERED_CONNECTIONS : options.connections,
    streamsPerConnection: TAIL_STREAMS_PER_CONNECTION,
    rate,
    warmupMs: 0,
    durationMs: options.roundMs,
    staggered,
    ...(driverCpus === undefined ? {} : { cpus: driverCpus }),
  };
}

/** What the tail rounds of one schedule gathered for one server. */
interface TailRecord {
  latenciesMs: number[];
  failed: number;
  startSpanSeconds: number;
  histogram?: Histogram;
  counters: Record<string, number>;
}

const emptyTailRecord = (): TailRecord => ({ latenciesMs: [], failed: 0, startSpanSeconds: 0, counters: {} });

function tailRunOf(record: TailRecord, tailRate: number, isGateway: boolean): TailRun | undefined {
  if (record.latenciesMs.length === 0) return undefined;
  const { histogram } = record;
  return {
    rate: tailRate,
    requests: record.latenciesMs.length,
    heldPerSecond: record.latenciesMs.length / record.startSpanSeconds,
    failed: record.failed,
    latency: summarize(record.latenciesMs),
    ...(isGateway
      ? {
          server: {
            count: histogram?.cumulative.at(-1) ?? 0,
            ...(histogram
              ? {
                  p50: histogramQuantile(histogram, 0.5),
                  p99: histogramQuantile(histogram, 0.99),
                  p999: histogramQuantile(histogram, 0.999),
                }
              : {}),
            counters: record.counters,
          },
        }
      : {}),
  };
}

function toServerRun(entry: Contender, tailRate: number): ServerRun {
  const saturation = entry.saturation.result(entry.saturationSeconds);
  if (entry.gateway) expectClean(`${entry.label}, saturation`, saturation, true);
  const commandTotal = Object.values(entry.commands).reduce((sum, calls) => sum + calls, 0);
  const tail = tailRunOf(entry.tail, tailRate, entry.gateway !== undefined);
  const staggeredTail = tailRunOf(entry.staggeredTail, tailRate, entry.gateway !== undefined);
  return {
    label: entry.label,
    saturation,
    roundRates: entry.roundRates,
    cpuUsPerDecision: (entry.cpuSeconds * 1e6) / saturation.decisions,
    driverCpuUsPerDecision: entry.driverCpuMicros / saturation.decisions,
    ...(tail ? { tail } : {}),
    ...(staggeredTail ? { staggeredTail } : {}),
    rssMb: rssBytesOf(entry.server.pid) / 2 ** 20,
    ...(entry.gateway
      ? {
          redisCpuUsPerDecision: ((entry.redis.userSeconds + entry.redis.systemSeconds) * 1e6) / saturation.decisions,
          redisWork: {
            userUsPerDecision: (entry.redis.userSeconds * 1e6) / saturation.decisions,
            systemUsPerDecision: (entry.redis.systemSeconds * 1e6) / saturation.decisions,
            decisionsPerRead: saturation.decisions / entry.redis.reads,
          },
          ...(entry.flushInterval ? { flushIntervalCommands: entry.flushInterval } : {}),
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
 * RSS with the key cache as full as production could make it, and the
 * overload phases, on a FRESH gateway process with the same settings (the
 * timed one has been through saturation, and V8 keeps a heap that load grew):
 * one Check for each seeded key (up to the cache's default bound), 5 s of
 * the mix at a quarter of the gateway's saturation, the RSS reading, then
 * open loop at each OVERLOAD_MULTIPLES × the gateway's saturation with RSS
 * sampled all along (the largest sample is RSS under load).
 */
async function freshProcessPhases(
  gateway: Contender,
  options: Options,
  saturation = rate(gateway),
): Promise<Pick<GatewayRun, 'fresh' | 'overload'>> {
  const { seeded, startFresh } = gateway.gateway!;
  const server = await startFresh();
  try {
    const driver = await H2Driver.connect(server.grpcAddress, options.connections);
    const cachedKeys = options.fillCache ? Math.min(seeded.kept.length, KEY_CACHE_MAX_ENTRIES) : 0;
    let freshReading: Omit<GatewayRun['fresh'], 'rssUnderLoadMb' | 'cachedKeys'> = {};
    try {
      if (options.fillCache) {
        log(`${gateway.label}: a fresh process; cache fill, one Check for each of ${cachedKeys.toLocaleString('en-US')} keys`);
        for (let first = 0; first < cachedKeys; first += 20_000) {
          const chunk = seeded.kept.slice(first, Math.min(cachedKeys, first + 20_000));
          // Only for the RSS reading: a Check past its deadline on a busy machine does not matter here, a wrong answer does.
          expectClean('cache fill', await driver.sendAll(uniformTraffic('valid', chunk), 32), true);
        }
        const steadyRate = saturation / 4;
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
        freshReading = { rssMb: rssBytesOf(server.pid) / 2 ** 20, heapUsedMb: heapUsed / 2 ** 20, steadyRate };
      } else {
        log(`${gateway.label}: a fresh process (no cache fill)`);
      }
    } finally {
      driver.close();
    }

    const rss = sampleMaxRss(server.pid);
    const overload: OverloadRun[] = [];
    const breaker = envoyCircuitBreakerFor(gateway.gateway!.env, options);
    let saturationBefore = await saturationBeside(server, gateway.traffic, options);
    for (const multiple of OVERLOAD_MULTIPLES) {
      // Each rate twice: behind Envoy's circuit breaker as envoy.yaml sets it (the figures the targets read), and raw.
      for (const circuitBreaker of [breaker, undefined]) {
        const offered = multiple * saturation;
        // What one phase queued must not spill into the next.
        if (!(await waitUntilIdle(server.pid))) log(`  note: the gateway was still busy 10 s after the previous phase`);
        log(
          `${gateway.label}: open loop at ${multiple} × saturation, ${Math.round(offered)}/s, ${options.overloadMs / 1000} s, ` +
            (circuitBreaker
              ? `behind Envoy's circuit breaker (max_requests ${circuitBreaker.maxRequests}, max_pending_requests ${circuitBreaker.maxPendingRequests})`
              : 'raw (no Envoy bound)'),
        );
        rss.sinceLast();
        const measured = await overloadPhase(server, gateway.traffic, multiple, offered, options, breaker.maxConnections, circuitBreaker);
        const rssMaxMb = rss.sinceLast() / 2 ** 20;
        // Where RSS went, for the log: the V8 heap by space, and memory outside it (buffers, the key cache's typed arrays).
        try {
          const text = await (await fetch(`${server.adminUrl}/metrics`)).text();
          const read = (name: string) =>
            (Number(new RegExp(`^gateway_authz_${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN) / 2 ** 20).toFixed(0);
          const spaces = [...text.matchAll(/^gateway_authz_nodejs_heap_space_size_total_bytes\{space="(\w+)"\} (\S+)$/gm)]
            .map((m) => `${m[1]} ${(Number(m[2]) / 2 ** 20).toFixed(0)}`)
            .join(', ');
          log(
            `  after the phase: RSS ${(rssBytesOf(server.pid) / 2 ** 20).toFixed(0)} MB (up to ${rssMaxMb.toFixed(0)}), heap total ${read('nodejs_heap_size_total_bytes')} used ${read('nodejs_heap_size_used_bytes')}, external ${read('nodejs_external_memory_bytes')} MB; spaces: ${spaces}`,
          );
        } catch (error) {
          log(`  after the phase: no metrics (${error instanceof Error ? error.message : String(error)})`);
        }
        const saturationAfter = await saturationBeside(server, gateway.traffic, options);
        const phase: OverloadRun = { ...measured, rssMaxMb, saturationBeside: { before: saturationBefore, after: saturationAfter } };
        saturationBefore = saturationAfter;
        overload.push(phase);
        log(
          `  sent ${Math.round(phase.sentPerSecond)}/s, goodput ${Math.round(phase.goodputPerSecond)}/s, ` +
            `${phase.refusedByEnvoy} refused by Envoy, ${phase.late} late, ${phase.unanswered} unanswered; ` +
            `saturation beside it ${Math.round(phase.saturationBeside.before)}/s before, ${Math.round(phase.saturationBeside.after)}/s after`,
        );
      }
    }
    return { fresh: { cachedKeys, ...freshReading, rssUnderLoadMb: rss.stop() / 2 ** 20 }, overload };
  } finally {
    await server.stop();
  }
}

/**
 * envoy.yaml's ext_authz circuit breaker, for this gateway: max_requests is
 * MAX_CHECKS_IN_FLIGHT × GRPC_WORKERS per replica (test/deploy checks that),
 * so it is scaled by the gateway's GRPC_WORKERS; --envoy-max-requests replaces it.
 */
function envoyCircuitBreakerFor(env: Record<string, string>, options: Options): CircuitBreakerLimits {
  const shipped = extAuthzCircuitBreaker();
  const workers = Math.max(1, Number(env.GRPC_WORKERS ?? '1'));
  return { ...shipped, maxRequests: options.envoyMaxRequests ?? shipped.maxRequests * workers };
}

/**
 * Saturation as phase 1 measures it (closed loop, the mix, the same connections and streams in flight), on the
 * overload phases' own process, just before and just after each of them. Goodput is judged against it: on the shared
 * cores the machine's speed drifts by a factor of two over the bench's minutes (the rounds' rates show it), and a 5 s
 * phase held against the mean of rounds run minutes earlier measures the drift as much as the overload.
 */
async function saturationBeside(server: ServerUnderTest, traffic: Traffic, options: Options): Promise<number> {
  await waitUntilIdle(server.pid);
  const driver = await H2Driver.connect(server.grpcAddress, options.connections);
  try {
    const result = await driver.closedLoop({
      traffic,
      concurrency: options.concurrency,
      warmupMs: SATURATION_BESIDE_WARMUP_MS,
      durationMs: SATURATION_BESIDE_MS,
      decodeEvery: 16,
    });
    expectClean('saturation beside the overload phases', result, true);
    return result.perSecond;
  } finally {
    driver.close();
  }
}

/** One overload phase on its own connections (as a fresh set of Envoys would open), the gateway's /metrics read around it. */
async function overloadPhase(
  server: ServerUnderTest,
  traffic: Traffic,
  multiple: number,
  offered: number,
  options: Options,
  maxConnections: number,
  circuitBreaker: CircuitBreakerLimits | undefined,
): Promise<Omit<OverloadRun, 'saturationBeside'>> {
  // Envoy's pool: a connection more whenever the open ones are at the server's SETTINGS_MAX_CONCURRENT_STREAMS, up to
  // envoy.yaml's max_connections; with the circuit breaker, Envoy's refusals past max_requests and max_pending_requests.
  const driver = await H2Driver.connect(server.grpcAddress, options.connections, maxConnections, circuitBreaker);
  try {
    const before = await scrapeMetrics(server.adminUrl!);
    const cpuBefore = cpuSecondsOf(server.pid);
    const result = await driver.overloadLoop({
      traffic,
      rate: offered,
      warmupMs: OVERLOAD_WARMUP_MS,
      durationMs: options.overloadMs,
      answerWithinMs: ENVOY_CHECK_TIMEOUT_MS,
    });
    if (result.mismatches > 0)
      throw new Error(`overload at ${multiple} × saturation: ${result.mismatches} wrong answers (${result.firstError})`);
    const connections = driver.connectionCount;
    driver.close();
    // Let what is still queued drain before the read, so the counters cover the phase's Checks.
    await waitUntilIdle(server.pid);
    const serverCpuSeconds = cpuSecondsOf(server.pid) - cpuBefore;
    const after = await scrapeMetrics(server.adminUrl!);
    const histogram = histogramDelta(before.checkLatency, after.checkLatency);
    const serverP99 = histogram ? histogramQuantile(histogram, 0.99) : undefined;
    return {
      ...result,
      multiple,
      ...(circuitBreaker ? { envoyCircuitBreaker: circuitBreaker } : {}),
      serverCpuSeconds,
      connections,
      counters: counterDelta(before, after),
      ...(serverP99 ? { serverP99 } : {}),
    };
  } finally {
    driver.close();
  }
}

/** --overload-only: the fresh process's phases alone, printed as they are (a development tool: no targets are judged). */
async function overloadOnly(gateway: Contender, saturation: number, options: Options): Promise<void> {
  // The rate-limited keys' one allowed request is spent (state in Redis, so for the fresh process too); nothing else is timed here.
  const driver = await H2Driver.connect(gateway.server.grpcAddress, options.connections);
  try {
    // One at a time: none is shed, whatever MAX_CHECKS_IN_FLIGHT the run sets. A 503 here (a loaded machine) would
    // leave a key its allowance and turn a later Check into a "wrong" allow: stop now instead.
    expectClean('spending the rate-limited keys', await driver.sendAll(uniformTraffic('valid', gateway.gateway!.seeded.rateLimited), 1));
    // The rate these ratios mean something against: saturation as the full bench measures it, one short round, now.
    const closed = await driver.closedLoop({
      traffic: gateway.traffic,
      concurrency: options.concurrency,
      warmupMs: 1000,
      durationMs: 3000,
      decodeEvery: 16,
    });
    process.stdout.write(
      `saturation now (closed loop, ${options.concurrency} in flight, 3 s, the warm process): ${Math.round(closed.perSecond)}/s; ` +
        `overload phases offered at multiples of ${saturation}/s\n`,
    );
  } finally {
    driver.close();
  }
  await gateway.server.stop();
  const { fresh, overload } = await freshProcessPhases(gateway, options, saturation);
  process.stdout.write(
    `RSS MB: fresh ${fresh.rssMb === undefined ? '– (no cache fill)' : fresh.rssMb.toFixed(0)}, ` +
      `under load ${fresh.rssUnderLoadMb.toFixed(0)} (the largest sample of the phases below), ${fresh.cachedKeys.toLocaleString('en-US')} keys cached\n`,
  );
  for (const phase of overload) {
    const shed = Object.entries(phase.counters).filter(([name]) => name.startsWith('shed.'));
    const bound = phase.envoyCircuitBreaker;
    process.stdout.write(
      `${phase.multiple} × ${saturation}/s, ${bound ? `Envoy max_requests ${bound.maxRequests} / max_pending_requests ${bound.maxPendingRequests}` : 'raw (no Envoy bound)'}: sent ${Math.round(phase.sentPerSecond)}/s (driver lag p99 ${phase.scheduleLagMs.p99.toFixed(0)} ms), ` +
        `goodput ${Math.round(phase.goodputPerSecond)}/s = ${(phase.goodputPerSecond / saturation).toFixed(2)} × ; ` +
        `${(phase.goodputPerSecond / saturationBesideMean(phase)).toFixed(2)} × the saturation beside it (${Math.round(phase.saturationBeside.before)}/s before, ${Math.round(phase.saturationBeside.after)}/s after); ` +
        `decided ${phase.decided} (503 ${phase.storeUnavailable}), refused by Envoy ${phase.refusedByEnvoy}, gRPC errors from the gateway ${phase.grpcErrors}, late ${phase.late}, unanswered ${phase.unanswered} of ${phase.sent}; ` +
        `all answers p50/p99/max ${phase.latency.p50Ms.toFixed(1)}/${phase.latency.p99Ms.toFixed(1)}/${phase.latency.maxMs.toFixed(1)} ms; ` +
        `${phase.connections} connections; RSS up to ${phase.rssMaxMb?.toFixed(0) ?? '–'} MB; decided p99 ${phase.decidedLatency.p99Ms.toFixed(1)} ms (inside the server: ${phase.serverP99 ? formatBucket(phase.serverP99) : '–'} ms); server CPU ${phase.serverCpuSeconds.toFixed(2)} s; server counters ${JSON.stringify(Object.fromEntries(shed))}` +
        `${phase.firstError ? `; first error: ${phase.firstError}` : ''}\n`,
    );
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    log(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.exit(1);
  },
);
