/**
 * Where the real gateway process spends its CPU under the bench's mixed
 * traffic: a built gateway (`dist/`, as `npm run bench` starts it) against a
 * spawned redis-server, driven closed loop (saturation) or open loop (a fixed
 * rate) for a few seconds, optionally under `node --cpu-prof`; the profile is
 * summarised by area (transport, decode, pipeline, Redis client, …), self and
 * inclusive time.
 *
 *   npm run build && npm run build:bench
 *   node .bench/build/test/bench/cpu-profile.js                      # saturation, 5 s, profiled
 *   node .bench/build/test/bench/cpu-profile.js --rate 2000          # a fixed rate below saturation
 *   node .bench/build/test/bench/cpu-profile.js --no-profile --dist A --dist B --rounds 4   # A/B: CPU µs per decision, alternating
 *   node .bench/build/test/bench/cpu-profile.js --no-profile --dist dist --dist dist --b-env NODE_OPTIONS=… --rounds 4   # A/B of a setting
 *   node .bench/build/test/bench/cpu-profile.js --summarize file.cpuprofile
 *
 * Short runs on a shared machine: read CPU per decision (from /proc) rather
 * than decisions/s, alternate A and B, and note the load average it prints.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import Redis from 'ioredis';
import { H2Driver } from './h2-driver';
import { cpuSecondsOf, rssBytesOf } from './proc-stats';
import { REPO_ROOT, startGateway, type ServerUnderTest } from './processes';
import { redisCpuSeconds } from './redis-stats';
import { seedKeys } from './seed';
import { activePool, BENCH_DIR, envAssignments, expectClean, GATEWAY_DEFAULT_ENV, openDisposableRedis, writeGatewayConfig } from './setup';
import { malformedKeys, mixedTraffic, uniformTraffic, unknownKeys } from './traffic';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

/** Areas by script URL (built files under dist/, node internals, dependencies), first match wins. */
const AREAS: readonly (readonly [string, RegExp])[] = [
  ['transport', /\/dist\/grpc\/transport\/|node:internal\/http2|node:http2/],
  ['decode', /\/dist\/grpc\/(check-request-decoding|protobuf-reader)\.js/],
  ['build request', /\/dist\/grpc\/check-request\.js/],
  ['encode', /\/dist\/grpc\/check-response-encoding\.js|\/dist\/responses\//],
  ['Redis client', /\/dist\/store\/redis\/|node_modules\/ioredis\/|node_modules\/@ioredis\//],
  ['key cache', /\/dist\/store\/(cached-key-index|hash-slot-table)\.js/],
  ['last-used', /\/dist\/store\/last-used-recorder\.js/],
  ['metrics', /\/dist\/metrics\/|node_modules\/prom-client\//],
  ['logging', /\/dist\/logging\/|node_modules\/pino|node_modules\/sonic-boom|node_modules\/fast-redact|node_modules\/quick-format/],
  ['admission', /\/dist\/overload\//],
  ['check handler', /\/dist\/grpc\/check-handler\.js/],
  ['pipeline', /\/dist\/(pipeline|domain|routes|credentials|keys|limits)\//],
  ['store (other)', /\/dist\/store\//],
];

function areaOf(node: ProfileNode): string | undefined {
  const { url, functionName } = node.callFrame;
  if (functionName === '(garbage collector)') return 'GC';
  if (functionName === '(idle)') return 'idle';
  if (functionName === '(program)') return 'program (native, unattributed)';
  for (const [area, pattern] of AREAS) if (pattern.test(url)) return area;
  return undefined;
}

export interface ProfileSummary {
  totalMs: number;
  /** Each sample to the innermost frame with an area (node internals and dependencies without one count to their caller's). */
  selfByArea: Map<string, number>;
  /** Each sample to every area on its stack once. */
  inclusiveByArea: Map<string, number>;
  /** Self time per function (name, file:line). */
  selfByFunction: Map<string, number>;
}

export function summarizeProfile(profile: CpuProfile): ProfileSummary {
  const byId = new Map<number, ProfileNode>();
  const parent = new Map<number, number>();
  for (const node of profile.nodes) {
    byId.set(node.id, node);
    for (const child of node.children ?? []) parent.set(child, node.id);
  }
  const selfByArea = new Map<string, number>();
  const inclusiveByArea = new Map<string, number>();
  const selfByFunction = new Map<string, number>();
  const add = (map: Map<string, number>, key: string, ms: number) => map.set(key, (map.get(key) ?? 0) + ms);
  let totalMs = 0;
  for (let i = 0; i < profile.samples.length; i += 1) {
    // timeDeltas[i] is the time since the previous sample: the sample before this one ran for it.
    const ms = (profile.timeDeltas[i + 1] ?? 0) / 1000;
    const leaf = byId.get(profile.samples[i]!)!;
    totalMs += ms;
    const { functionName, url, lineNumber } = leaf.callFrame;
    add(selfByFunction, `${functionName || '(anonymous)'} ${url.replace(/^.*\/(dist|node_modules)\//, '$1/')}:${lineNumber + 1}`, ms);
    const seen = new Set<string>();
    let self: string | undefined;
    for (let id: number | undefined = leaf.id; id !== undefined; id = parent.get(id)) {
      const area = areaOf(byId.get(id)!);
      if (area === undefined) continue;
      self ??= area;
      seen.add(area);
    }
    add(selfByArea, self ?? 'node internals / other (no area on the stack)', ms);
    for (const area of seen) add(inclusiveByArea, area, ms);
  }
  return { totalMs, selfByArea, inclusiveByArea, selfByFunction };
}

function printSummary(summary: ProfileSummary, decisions: number | undefined, top: number): void {
  const busy = summary.totalMs - (summary.selfByArea.get('idle') ?? 0);
  const perDecision = (ms: number) => (decisions ? ` ${((ms * 1000) / decisions).toFixed(1).padStart(6)} µs/decision` : '');
  const line = (name: string, ms: number) =>
    `  ${name.padEnd(46)} ${ms.toFixed(0).padStart(7)} ms ${((100 * ms) / busy).toFixed(1).padStart(5)} %${perDecision(ms)}`;
  const sorted = (map: Map<string, number>) => [...map].sort((a, b) => b[1] - a[1]);
  console.log(`profile: ${summary.totalMs.toFixed(0)} ms sampled, ${busy.toFixed(0)} ms busy (not idle)`);
  console.log('self time by area (innermost frame with an area):');
  for (const [area, ms] of sorted(summary.selfByArea)) if (area !== 'idle') console.log(line(area, ms));
  console.log('inclusive time by area (on the stack):');
  for (const [area, ms] of sorted(summary.inclusiveByArea)) if (area !== 'idle') console.log(line(area, ms));
  console.log(`top ${top} functions by self time:`);
  for (const [name, ms] of sorted(summary.selfByFunction).slice(0, top)) if (!name.startsWith('(idle)')) console.log(line(name, ms));
}

interface SamplingHeapNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: SamplingHeapNode[];
}
interface SamplingHeapProfile {
  head: SamplingHeapNode;
}

/** Bytes allocated per decision, by allocating function (a sampling estimate, collected objects included). */
function printAllocations(profile: SamplingHeapProfile, decisions: number, top: number): void {
  const byFunction = new Map<string, number>();
  let total = 0;
  const visit = (node: SamplingHeapNode, caller: string) => {
    const { functionName, url, lineNumber } = node.callFrame;
    const name = `${functionName || '(anonymous)'} ${url.replace(/^.*\/(dist|node_modules)\//, '$1/')}:${lineNumber + 1}`;
    // Native allocations (no script) are counted to their JS caller.
    const key = url ? name : `${name} < ${caller}`;
    total += node.selfSize;
    if (node.selfSize > 0) byFunction.set(key, (byFunction.get(key) ?? 0) + node.selfSize);
    for (const child of node.children) visit(child, url ? name : caller);
  };
  visit(profile.head, '(root)');
  console.log(`allocations: ${(total / decisions).toFixed(0)} bytes per decision (sampled), top ${top} allocating functions:`);
  for (const [name, bytes] of [...byFunction].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    console.log(`  ${name.padEnd(80)} ${(bytes / decisions).toFixed(0).padStart(6)} B/decision`);
  }
}

/** CPU seconds (user, system) of one process's main thread and of its other threads (/proc/<pid>/task). */
function threadCpu(pid: number): Map<string, { user: number; system: number }> {
  const byName = new Map<string, { user: number; system: number }>();
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      // Node does not name its threads here (all "node"): the main thread is the one whose id is the process's.
      const name = Number(tid) === pid ? 'main thread' : 'other threads (V8 GC helpers, libuv pool, …)';
      const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const entry = byName.get(name) ?? { user: 0, system: 0 };
      // USER_HZ is 100 on Linux x86-64 and arm64.
      entry.user += Number(rest[11]) / 100;
      entry.system += Number(rest[12]) / 100;
      byName.set(name, entry);
    } catch {
      // The thread ended meanwhile.
    }
  }
  return byName;
}

function printThreadCpu(
  before: Map<string, { user: number; system: number }>,
  after: Map<string, { user: number; system: number }>,
  decisions: number,
): void {
  const rows = [...after].map(([name, { user, system }]) => {
    const start = before.get(name) ?? { user: 0, system: 0 };
    return { name, user: ((user - start.user) * 1e6) / decisions, system: ((system - start.system) * 1e6) / decisions };
  });
  console.log('CPU per thread (µs/decision, user + system):');
  for (const row of rows.sort((a, b) => b.user + b.system - (a.user + a.system))) {
    if (row.user + row.system < 0.05) continue;
    console.log(`  ${row.name.padEnd(24)} ${row.user.toFixed(1).padStart(6)} + ${row.system.toFixed(1).padStart(5)}`);
  }
}

function loadAverage(): string {
  return os
    .loadavg()
    .map((value) => value.toFixed(2))
    .join(' ');
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      keys: { type: 'string', default: '20000' },
      'active-keys': { type: 'string', default: '10000' },
      seconds: { type: 'string', default: '5' },
      warmup: { type: 'string', default: '2' },
      rate: { type: 'string' },
      rounds: { type: 'string', default: '1' },
      dist: { type: 'string', multiple: true, default: [] },
      profile: { type: 'boolean', default: true },
      'no-profile': { type: 'boolean', default: false },
      allocations: { type: 'boolean', default: false },
      interval: { type: 'string', default: '250' },
      top: { type: 'string', default: '40' },
      env: { type: 'string', multiple: true, default: [] },
      'b-env': { type: 'string', multiple: true, default: [] },
      'b-node-arg': { type: 'string', multiple: true, default: [] },
      summarize: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    console.log(fs.readFileSync(__filename, 'utf8').split('*/')[0]);
    return;
  }
  if (values.summarize) {
    printSummary(summarizeProfile(JSON.parse(fs.readFileSync(values.summarize, 'utf8')) as CpuProfile), undefined, Number(values.top));
    return;
  }
  const profiling = values.profile && !values['no-profile'];
  const dists = values.dist.length > 0 ? values.dist.map((dir) => path.resolve(dir)) : [path.join(REPO_ROOT, 'dist')];
  const seconds = Number(values.seconds);
  const rate = values.rate === undefined ? undefined : Number(values.rate);
  const extraEnv = envAssignments(values.env, 'env');
  // --b-env, --b-node-arg: settings and node flags for the second --dist only (it may be the same directory): an A/B of a setting.
  const bEnv = envAssignments(values['b-env'], 'b-env');

  const redis = await openDisposableRedis(false, 'CPU profile');
  const stats = new Redis(redis.url);
  try {
    const seeded = await seedKeys(
      redis.url,
      { keys: Number(values.keys), keysPerAccount: 10, rateLimitedKeys: 100, keep: Number(values['active-keys']) },
      () => undefined,
    );
    const pools = {
      valid: activePool(seeded, Number(values['active-keys'])),
      malformed: malformedKeys(200),
      unknown: unknownKeys(200),
      rateLimited: seeded.rateLimited,
    };
    const traffic = mixedTraffic(pools, Math.max(100_000, pools.valid.length * 4));
    const results = new Map<string, number[]>();
    for (let round = 0; round < Number(values.rounds); round += 1) {
      for (const [index, dist] of dists.entries()) {
        const label =
          dists.length > 1
            ? `${String.fromCharCode(65 + index)} (${path.relative(REPO_ROOT, dist) || dist}${index === 1 ? [...values['b-env'], ...values['b-node-arg']].map((entry) => ` ${entry}`).join('') : ''})`
            : 'gateway';
        const profileFile = path.join(BENCH_DIR, 'cpu-prof', `${new Date().toISOString().replace(/[:.]/g, '-')}-${index}.cpuprofile`);
        const allocationFile = profileFile.replace(/\.cpuprofile$/, '.heapprofile');
        fs.mkdirSync(path.dirname(profileFile), { recursive: true });
        const nodeArgs = [
          ...(profiling ? ['--require', path.join(__dirname, 'cpu-profile-preload.js')] : []),
          ...(index === 1 ? values['b-node-arg'] : []),
        ];
        const gateway: ServerUnderTest = await startGateway(
          {
            REDIS_URL: redis.url,
            CONFIG_FILE: writeGatewayConfig('gateway-config.json'),
            ...GATEWAY_DEFAULT_ENV,
            ...(profiling ? { CPU_PROFILE_FILE: profileFile, CPU_PROFILE_INTERVAL_US: values.interval } : {}),
            ...(profiling && values.allocations ? { ALLOCATION_PROFILE_FILE: allocationFile } : {}),
            ...extraEnv,
            ...(index === 1 ? bEnv : {}),
          },
          path.join(BENCH_DIR, `cpu-profile-gateway-${index}.log`),
          nodeArgs,
          dist,
        );
        const driver = await H2Driver.connect(gateway.grpcAddress, 4);
        let cpuStart = 0;
        let threadsBefore = new Map<string, { user: number; system: number }>();
        let threadsAfter = threadsBefore;
        let redisStart = 0;
        let cpu = 0;
        let redisCpu = 0;
        try {
          expectClean('warm-up (valid keys)', await driver.sendAll(uniformTraffic('valid', pools.valid), 32), true);
          await driver.sendAll(uniformTraffic('valid', seeded.rateLimited), 16);
          const hooks = {
            atStart: async () => {
              if (profiling) process.kill(gateway.pid, 'SIGUSR2');
              redisStart = await redisCpuSeconds(stats);
              cpuStart = cpuSecondsOf(gateway.pid);
              threadsBefore = threadCpu(gateway.pid);
            },
            atEnd: async () => {
              cpu = cpuSecondsOf(gateway.pid) - cpuStart;
              threadsAfter = threadCpu(gateway.pid);
              if (profiling) process.kill(gateway.pid, 'SIGUSR2');
              redisCpu = (await redisCpuSeconds(stats)) - redisStart;
            },
          };
          const result =
            rate === undefined
              ? await driver.closedLoop({
                  traffic,
                  concurrency: 64,
                  warmupMs: Number(values.warmup) * 1000,
                  durationMs: seconds * 1000,
                  decodeEvery: 16,
                  hooks,
                })
              : await (async () => {
                  await new Promise((resolve) => setTimeout(resolve, 0));
                  const phase = driver.openLoop({
                    traffic,
                    rate,
                    warmupMs: Number(values.warmup) * 1000,
                    durationMs: seconds * 1000,
                    decodeEvery: 16,
                    maxInFlight: 10_000,
                  });
                  setTimeout(() => void hooks.atStart(), Number(values.warmup) * 1000);
                  setTimeout(() => void hooks.atEnd(), (Number(values.warmup) + seconds) * 1000);
                  return phase;
                })();
          expectClean('measured phase', result, true);
          const decisions = result.decisions;
          const perDecision = (cpu * 1e6) / decisions;
          (results.get(label) ?? results.set(label, []).get(label)!).push(perDecision);
          console.log(
            `${label}: ${rate === undefined ? 'saturation' : `${rate}/s`}: ${Math.round(result.perSecond)} decisions/s, ` +
              `server CPU ${perDecision.toFixed(1)} µs/decision, Redis ${((redisCpu * 1e6) / decisions).toFixed(1)} µs/decision, ` +
              `p50 ${result.latency.p50Ms.toFixed(2)} ms, RSS ${(rssBytesOf(gateway.pid) / 2 ** 20).toFixed(0)} MB, load average ${loadAverage()}`,
          );
          printThreadCpu(threadsBefore, threadsAfter, decisions);
          if (profiling) {
            for (let waited = 0; !fs.existsSync(profileFile) && waited < 10_000; waited += 100)
              await new Promise((resolve) => setTimeout(resolve, 100));
            const summary = summarizeProfile(JSON.parse(fs.readFileSync(profileFile, 'utf8')) as CpuProfile);
            console.log(`profile ${profileFile} (the measured window only; the profiler's own cost is in the CPU figure above)`);
            printSummary(summary, decisions, Number(values.top));
            if (values.allocations) {
              for (let waited = 0; !fs.existsSync(allocationFile) && waited < 10_000; waited += 100)
                await new Promise((resolve) => setTimeout(resolve, 100));
              printAllocations(JSON.parse(fs.readFileSync(allocationFile, 'utf8')) as SamplingHeapProfile, decisions, Number(values.top));
            }
          }
        } finally {
          driver.close();
          await gateway.stop();
        }
      }
    }
    if (dists.length > 1 || Number(values.rounds) > 1) {
      for (const [label, figures] of results) {
        const sorted = [...figures].sort((a, b) => a - b);
        console.log(
          `${label}: server CPU µs/decision ${figures.map((f) => f.toFixed(1)).join(', ')}; median ${sorted[Math.floor(sorted.length / 2)]!.toFixed(1)}`,
        );
      }
    }
  } finally {
    stats.disconnect();
    await redis.stop();
  }
}

if (require.main === module) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
