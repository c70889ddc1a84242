/**
 * The Check path's Redis call alone, in process, against a real
 * redis-server: what one decision costs the Node process (the store call,
 * its deadline and the metrics timer around it) and what it costs Redis,
 * without gRPC or the load driver sharing the measurement.
 *
 *   node .bench/build/test/bench/redis-check-path.js [--dist DIR]… [--authorizes N] [--in-flight C]
 *        [--mix-seconds S] [--mix-rate R] [--flush-ms MS] [--token-budgets] [--restricted-keys]
 *
 * --restricted-keys: every key carries the restrictions of `npm run bench -- --restricted-keys`
 * (RESTRICTIONS_ALLOWING_THE_TRAFFIC), and each decision sends what Check sends for such a key once its restrictions
 * are cached: what it decided on after the store answered its first decision (`restrictions_changed`), as decide() keeps it.
 *
 * --token-budgets: the default plan also has token budgets (two per scope,
 * never exhausted), as `npm run bench -- --token-budgets` configures them.
 *
 * Phase 1, authorize: N allowed decisions per contender, C in flight, in
 * alternating rounds. Node CPU (process.cpuUsage), Redis CPU (the
 * redis-server process's utime + stime from /proc) and Redis commands
 * (INFO commandstats, in-script ones included) per decision.
 * Phase 2, mix: the bench's traffic mix (90 % valid cached keys, 5 %
 * malformed, 3 % unknown, 2 % rate-limited; 10,000 distinct valid keys) at a
 * fixed rate, through the key cache and the last-used recorder as the app
 * wires them: Redis commands and Redis CPU per decision, last-used batches
 * included. Skipped when --mix-seconds is 0.
 *
 * --dist loads the service from another build (e.g. a copy of an earlier
 * dist/), so a change is measured before and after on the same Redis. Each
 * contender seeds its own accounts and keys through its own store.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import Redis from 'ioredis';
import pino from 'pino';
import { generateCustomerKey, hashCustomerKey } from '../../src/keys/customer-key';
import type { RatePlan } from '../../src/accounts/limits/rate-limits';
import { NO_TOKEN_BUDGETS } from '../../src/accounts/limits/token-budgets';
import { BENCH_PLAN, BENCH_TOKEN_BUDGETS } from './bench-plan';
import { RESTRICTIONS_ALLOWING_THE_TRAFFIC } from './traffic';
import { insertKey } from '../support/pipeline-fixture-world';
import { startTestRedis } from '../support/redis-server';
import { commandDelta, commandStats, type CommandCounts } from './redis-stats';
import { loadBuildModules, type CheckPathModules } from './build-modules';

type Modules = CheckPathModules &
  typeof import('../../src/check/pipeline/restriction-step') &
  typeof import('../../src/store/redis/redis-store');

function load(dist: string): Modules {
  return loadBuildModules<Modules>(dist, ['store/redis/redis-store.js', 'check/pipeline/restriction-step.js']);
}

let budgets = NO_TOKEN_BUDGETS;
let restrictedKeys = false;

const KEYS = 10_000;
const KEYS_PER_ACCOUNT = 10;
const RATE_LIMITED_KEYS = 100;
const UNKNOWN_KEYS = 200;

interface Ids {
  keyId: string;
  accountId: string;
}

interface Contender {
  label: string;
  m: Modules;
  store: import('../../src/store/redis/redis-store').RedisStore;
  authorize: (ids: Ids) => Promise<unknown>;
  valid: { hash: string; ids: Ids }[];
  limited: { hash: string; ids: Ids }[];
  unknown: string[];
  decisions: number;
  nodeCpuUs: number;
  redisCpuUs: number;
  commands: CommandCounts;
}

const cpuTicksPerSecond = 100;

function redisCpuUs(pid: number): number {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  // utime and stime are fields 14 and 15 of /proc/<pid>/stat; after "pid (comm) " they are the 12th and 13th.
  return ((Number(fields[11]) + Number(fields[12])) * 1e6) / cpuTicksPerSecond;
}

function nodeCpuUs(): number {
  const usage = process.cpuUsage();
  return usage.user + usage.system;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      dist: { type: 'string', multiple: true, default: [path.join(__dirname, '..', '..', 'src')] },
      authorizes: { type: 'string', default: '50000' },
      'in-flight': { type: 'string', default: '64' },
      rounds: { type: 'string', default: '10' },
      'mix-seconds': { type: 'string', default: '20' },
      'mix-rate': { type: 'string', default: '4400' },
      'flush-ms': { type: 'string', default: '' },
      'token-budgets': { type: 'boolean', default: false },
      'restricted-keys': { type: 'boolean', default: false },
    },
  });
  if (values['token-budgets']) budgets = BENCH_TOKEN_BUDGETS;
  restrictedKeys = values['restricted-keys'];
  const authorizes = Number(values.authorizes);
  const inFlight = Number(values['in-flight']);
  const rounds = Number(values.rounds);
  const redis = await startTestRedis();
  if (redis.pid === undefined) throw new Error('needs a locally spawned redis-server (its CPU time is read from /proc)');
  const stats = new Redis(redis.url, { disconnectTimeout: 50 });
  const contenders: Contender[] = [];
  try {
    for (const [index, dist] of values.dist.entries()) contenders.push(await contenderFor(`c${index}`, path.resolve(dist), redis.url));
    const out = (line: object) => process.stdout.write(`${JSON.stringify(line)}\n`);

    // Warm-up: JIT, script load.
    for (const entry of contenders) await closedLoop(entry, 5000, inFlight);
    const perRound = Math.ceil(authorizes / rounds);
    for (let round = 0; round < rounds; round += 1) {
      for (const entry of contenders) {
        const commandsBefore = await commandStats(stats);
        const redisBefore = redisCpuUs(redis.pid);
        const nodeBefore = nodeCpuUs();
        await closedLoop(entry, perRound, inFlight);
        entry.nodeCpuUs += nodeCpuUs() - nodeBefore;
        entry.redisCpuUs += redisCpuUs(redis.pid) - redisBefore;
        entry.decisions += perRound;
        addCounts(entry.commands, commandDelta(commandsBefore, await commandStats(stats)));
      }
    }
    for (const entry of contenders) {
      out({
        phase: 'authorize',
        dist: values.dist[contenders.indexOf(entry)],
        decisions: entry.decisions,
        nodeCpuUsPerDecision: round2(entry.nodeCpuUs / entry.decisions),
        redisCpuUsPerDecision: round2(entry.redisCpuUs / entry.decisions),
        commandsPerDecision: perDecision(entry.commands, entry.decisions),
      });
    }

    const mixSeconds = Number(values['mix-seconds']);
    if (mixSeconds > 0) {
      for (const entry of contenders) {
        const result = await mixPhase(entry, redis.pid, stats, mixSeconds, Number(values['mix-rate']), values['flush-ms']);
        out({ phase: 'mix', dist: values.dist[contenders.indexOf(entry)], ...result });
      }
    }
  } finally {
    for (const entry of contenders) await entry.store.close();
    stats.disconnect();
    await redis.stop();
  }
}

async function contenderFor(label: string, dist: string, url: string): Promise<Contender> {
  const m = load(dist);
  const store = await m.RedisStore.connect({ url, commandTimeoutMs: 1000 });
  const metrics = new m.Metrics();
  const checkPath = metrics.instrumentCheckPath(store, store);
  const createdAt = new Date().toISOString();
  const accounts = Math.ceil(KEYS / KEYS_PER_ACCOUNT);
  await inChunks(accounts, (i) =>
    store.createAccount({ id: `${label}-acct-${i}`, name: `account ${i}`, status: 'active', createdAt }).then(() => undefined),
  );
  const newKey = async (accountId: string, keyId: string, limits?: RatePlan['key']) => {
    const plaintext = generateCustomerKey('live');
    await insertKey(store, plaintext, {
      id: keyId,
      accountId,
      name: keyId,
      createdAt,
      ...(limits ? { limits } : {}),
      ...(restrictedKeys ? { restrictions: RESTRICTIONS_ALLOWING_THE_TRAFFIC } : {}),
    });
    return { hash: hashCustomerKey(plaintext), ids: { keyId, accountId } };
  };
  const valid = await inChunks(KEYS, (i) => newKey(`${label}-acct-${i % accounts}`, `key_${label}_${i}`));
  // All rate-limited keys live in one account: its active-key cap must hold them.
  await store.createAccount({ id: `${label}-limited`, name: 'limited', status: 'active', createdAt, maxActiveKeys: RATE_LIMITED_KEYS });
  const limited = await inChunks(RATE_LIMITED_KEYS, (i) =>
    newKey(`${label}-limited`, `key_${label}_limited${i}`, [{ limit: 1, windowSeconds: 86_400 }]),
  );
  const unknown = Array.from({ length: UNKNOWN_KEYS }, () => hashCustomerKey(generateCustomerKey('live')));
  // By key id: what the store last answered about its restrictions, sent with each decision as Check does.
  const sent = new Map<string, ReturnType<Modules['effectiveRestrictions']>>();
  return {
    label,
    m,
    store,
    authorize: async (ids) => {
      const decide = () =>
        checkPath.authorizer.authorize({
          ...ids,
          defaultPlan: BENCH_PLAN,
          defaultTokenBudgets: budgets,
          ...(sent.has(ids.keyId) ? { restrictions: sent.get(ids.keyId)! } : {}),
        });
      const outcome = await decide();
      if (outcome.kind !== 'restrictions_changed') return outcome;
      sent.set(ids.keyId, m.effectiveRestrictions(outcome.keyText, outcome.accountText));
      return decide();
    },
    valid,
    limited,
    unknown,
    decisions: 0,
    nodeCpuUs: 0,
    redisCpuUs: 0,
    commands: {},
  };
}

async function inChunks<T>(count: number, make: (index: number) => Promise<T>): Promise<T[]> {
  const made: T[] = [];
  for (let first = 0; first < count; first += 200) {
    made.push(...(await Promise.all(Array.from({ length: Math.min(200, count - first) }, (_, i) => make(first + i)))));
  }
  return made;
}

/** `count` allowed decisions, `inFlight` at a time, over the valid keys in turn. */
async function closedLoop(entry: Contender, count: number, inFlight: number): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const key = entry.valid[next++ % entry.valid.length]!;
      const outcome = (await entry.authorize(key.ids)) as { kind: string };
      if (outcome.kind !== 'allow') throw new Error(`expected allow, got ${outcome.kind}`);
    }
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
}

/** The bench's traffic mix at a fixed rate, through the key cache and the last-used recorder. */
async function mixPhase(
  entry: Contender,
  redisPid: number,
  stats: Redis,
  seconds: number,
  rate: number,
  flushMsOption: string,
): Promise<object> {
  const { m } = entry;
  const metrics = new m.Metrics();
  const checkPath = metrics.instrumentCheckPath(entry.store, entry.store);
  const keyIndex = new m.CachedKeyIndex(checkPath.keyIndex, { maxEntries: 200_000, negativeTtlMs: 2000, maxNegativeEntries: 100_000 });
  const logger = m.createLogger('warn', pino.destination({ dest: '/dev/null', sync: true }));
  const flushMs = flushMsOption ? Number(flushMsOption) : defaultFlushMs(m);
  const recorder = new m.LastUsedRecorder(entry.store, { now: () => Date.now() }, logger, flushMs);
  // Warm the key cache for the valid keys, as a running replica has.
  for (const key of [...entry.valid, ...entry.limited]) await keyIndex.resolveKeyHash(key.hash);
  // Let the last-used writes of earlier phases settle, then count from a clean start.
  await new Promise((resolve) => setTimeout(resolve, 200));
  recorder.start();
  const commandsBefore = await commandStats(stats);
  const redisBefore = redisCpuUs(redisPid);
  const nodeBefore = nodeCpuUs();
  const started = performance.now();
  let decisions = 0;
  let failures = 0;
  let firstFailure: string | undefined;
  const classes = { valid: 0, malformed: 0, unknown: 0, rate_limited: 0 };
  const decide = async (draw: number, index: number) => {
    if (draw < 0.9) {
      classes.valid += 1;
      const key = entry.valid[index % entry.valid.length]!;
      const ids = await keyIndex.resolveKeyHash(key.hash);
      if (!ids) throw new Error('a valid key did not resolve');
      const outcome = (await checkPath.authorizer.authorize({ ...ids, defaultPlan: BENCH_PLAN, defaultTokenBudgets: budgets })) as {
        kind: string;
      };
      if (outcome.kind !== 'allow') throw new Error(`valid key: ${outcome.kind}`);
      recorder.note(ids);
    } else if (draw < 0.95) {
      classes.malformed += 1;
    } else if (draw < 0.98) {
      classes.unknown += 1;
      if ((await keyIndex.resolveKeyHash(entry.unknown[index % entry.unknown.length]!)) !== null) throw new Error('unknown resolved');
    } else {
      classes.rate_limited += 1;
      const key = entry.limited[index % entry.limited.length]!;
      const ids = await keyIndex.resolveKeyHash(key.hash);
      if (!ids) throw new Error('a rate-limited key did not resolve');
      const outcome = (await checkPath.authorizer.authorize({ ...ids, defaultPlan: BENCH_PLAN, defaultTokenBudgets: budgets })) as {
        kind: string;
      };
      if (outcome.kind === 'allow') recorder.note(ids);
    }
  };
  // A fixed rate: each millisecond tick sends what is due.
  // xorshift32: the same sequence of requests for every contender.
  let random = 2463534242;
  const nextDraw = () => {
    random ^= random << 13;
    random ^= random >>> 17;
    random ^= random << 5;
    return (random >>> 0) / 4294967296;
  };
  const pending = new Set<Promise<void>>();
  const total = Math.round(seconds * rate);
  await new Promise<void>((resolve) => {
    const tick = () => {
      const due = Math.min(total, Math.round(((performance.now() - started) / 1000) * rate));
      while (decisions < due) {
        const index = Math.floor(nextDraw() * 1e9);
        const promise: Promise<void> = decide(nextDraw(), index).then(
          () => void pending.delete(promise),
          (error: unknown) => {
            failures += 1;
            firstFailure ??= error instanceof Error ? error.message : String(error);
            pending.delete(promise);
          },
        );
        pending.add(promise);
        decisions += 1;
      }
      if (decisions >= total) resolve();
      else setTimeout(tick, 1);
    };
    tick();
  });
  await Promise.all(pending);
  const elapsedS = (performance.now() - started) / 1000;
  const node = nodeCpuUs() - nodeBefore;
  // Only whole flush intervals count: the last one is written now (as at shutdown) only when the phase ended on one.
  await recorder.stop();
  const redisCpu = redisCpuUs(redisPid) - redisBefore;
  const commands = commandDelta(commandsBefore, await commandStats(stats));
  return {
    seconds: round2(elapsedS),
    decisions,
    failures,
    ...(firstFailure !== undefined ? { firstFailure } : {}),
    classes,
    flushMs,
    nodeCpuUsPerDecision: round2(node / decisions),
    redisCpuUsPerDecision: round2(redisCpu / decisions),
    commandsPerDecision: perDecision(commands, decisions),
  };
}

/** LAST_USED_FLUSH_MS's default in that build. */
function defaultFlushMs(m: Modules): number {
  const loaded = m.loadSettings({ CONFIG_FILE: '' });
  if (!loaded.ok) throw new Error(loaded.problems.join('; '));
  return loaded.settings.lastUsedFlushMs;
}

function addCounts(into: CommandCounts, more: CommandCounts): void {
  for (const [command, calls] of Object.entries(more)) into[command] = (into[command] ?? 0) + calls;
}

function perDecision(commands: CommandCounts, decisions: number): Record<string, number> {
  const all = Object.values(commands).reduce((sum, calls) => sum + calls, 0);
  const out: Record<string, number> = { total: round2(all / decisions) };
  for (const [command, calls] of Object.entries(commands).sort(([, a], [, b]) => b - a)) out[command] = round2(calls / decisions);
  return out;
}

const round2 = (value: number) => Math.round(value * 100) / 100;

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
