/**
 * What one allowed decision costs Redis, in instructions: redis-server runs
 * under valgrind's callgrind, which counts the instructions it executes
 * (user space: Lua, command handling, replies; not the kernel's socket
 * work). The count is the same for the same binary, script and data
 * whatever else the machine is doing, so a change to the authorize script
 * shows to a fraction of a percent, where Redis's CPU time on this shared
 * machine moves by ±10 % from run to run.
 *
 *   node .bench/build/test/bench/redis-callgrind.js [--dist DIR]… [--token-budgets] [--spent] [--holds [--postpaid]] [--restricted-keys] [--decisions N] [--in-flight N] [--cpu-time] [--keep-dump FILE]
 *
 * For each --dist (a build's directory, e.g. a copy of an earlier dist/;
 * default this one), in turn: a fresh redis-server under callgrind; 100
 * accounts of 10 keys seeded through that build's RedisStore (as the service
 * connects it: no clock override); 3,000 allowed decisions of warm-up; the
 * counters zeroed (callgrind_control -z); N decisions (default 3,000), 64 in
 * flight (--in-flight), over the keys in turn; the counters dumped. Prints instructions per
 * decision. The plan is the bench's (two windows per scope, limits far
 * above the load). --token-budgets: the plan also has the bench's token
 * budgets. --spent: every one of those buckets holds a spent value (30 s of
 * debt, with a fraction on two of them), as usage leaves them on an account
 * in use; without it they are absent, as in `npm run bench`, which meters no
 * usage.
 *
 * --holds: the accounts are prepaid, and each decision brings a credit hold
 * (src/accounts/credit-holds.ts) under a request id of its own that no answer
 * releases, so every decision is taken with the holds of the ones before it
 * in flight (60 per account by the end of the default run).
 *
 * --restricted-keys: every key carries the restrictions of `npm run bench -- --restricted-keys`
 * (RESTRICTIONS_ALLOWING_THE_TRAFFIC), and each decision sends what Check sends for such a key: what the store
 * answered the key's first decision (its `restrictions_changed`, in the warm-up), as decide() keeps it
 * (effectiveRestrictions). So it measures whatever a build confirms restrictions with, texts or stamps.
 *
 * --keep-dump FILE: the measured decisions' callgrind dump is copied to FILE
 * (with each --dist's index after the first), for `callgrind_annotate FILE`
 * to show which of Redis's functions the instructions went to.
 *
 * --postpaid: with --holds, the accounts are postpaid, as most are: each
 * decision brings a hold, which (without --token-budgets) holds nothing.
 *
 * --cpu-time: redis-server runs as itself, not under callgrind, and the
 * decisions are timed instead of counted: Redis's CPU per decision, user and
 * system apart (INFO cpu), and the decisions it took per read (INFO stats).
 * Run at --in-flight 1, 4, 16 and 64, it shows how Redis's CPU per decision
 * depends on how many commands reach it at once (redis-stats.ts, RedisWork).
 */
import { execFile, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { parseArgs } from 'node:util';
import Redis from 'ioredis';
import { generateCustomerKey } from '../../src/keys/customer-key';
import { NO_TOKEN_BUDGETS, type TokenBudgetPlan } from '../../src/accounts/limits/token-budgets';
import { BENCH_PLAN, BENCH_TOKEN_BUDGETS } from './bench-plan';
import { RESTRICTIONS_ALLOWING_THE_TRAFFIC } from './traffic';
import { packTokenBuckets } from '../../src/store/redis/redis-records';
import { insertKey } from '../support/pipeline-fixture-world';
import { findRedisServerBinary } from '../support/redis-server';
import { loadBuildModules, type CheckPathModules } from './build-modules';
import { redisWork, redisWorkDelta } from './redis-stats';

const execute = promisify(execFile);

type Modules = CheckPathModules &
  typeof import('../../src/check/pipeline/restriction-step') &
  typeof import('../../src/store/redis/redis-store') &
  typeof import('../../src/store/redis/redis-keys');

const ACCOUNTS = 100;
const KEYS_PER_ACCOUNT = 10;
const WARM_UP = 3000;
/** A hold the size of an answer's (a few cents, a few thousand tokens), and a balance that covers every hold of the run. */
const HOLD_MINOR_UNITS = 25;
const HOLD_TOKENS = 4_000;
const PREPAID_BALANCE = 1_000_000_000;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      dist: { type: 'string', multiple: true, default: [path.join(__dirname, '..', '..', 'src')] },
      'token-budgets': { type: 'boolean', default: false },
      spent: { type: 'boolean', default: false },
      holds: { type: 'boolean', default: false },
      postpaid: { type: 'boolean', default: false },
      'restricted-keys': { type: 'boolean', default: false },
      decisions: { type: 'string', default: '3000' },
      'in-flight': { type: 'string', default: '64' },
      'cpu-time': { type: 'boolean', default: false },
      'keep-dump': { type: 'string' },
    },
  });
  const inFlight = Number(values['in-flight']);
  if (!Number.isInteger(inFlight) || inFlight < 1) throw new Error('--in-flight must be a whole number from 1');
  const budgets = values['token-budgets'] ? BENCH_TOKEN_BUDGETS : NO_TOKEN_BUDGETS;
  if (values.spent && !values['token-budgets']) throw new Error('--spent needs --token-budgets');
  if (values.postpaid && !values.holds) throw new Error('--postpaid needs --holds');
  const decisions = Number(values.decisions);
  const binary = findRedisServerBinary(process.env.PATH, ['/usr/bin/redis-server', '/usr/local/bin/redis-server']);
  if (!binary) throw new Error('needs redis-server');
  for (const [i, dist] of values.dist.entries()) {
    const keepDump = values['keep-dump'] === undefined ? undefined : `${values['keep-dump']}${i === 0 ? '' : `.${i}`}`;
    const measured = await measure(path.resolve(dist), binary, {
      budgets,
      spent: values.spent,
      holds: values.holds,
      postpaid: values.postpaid,
      restrictedKeys: values['restricted-keys'],
      decisions,
      inFlight,
      cpuTime: values['cpu-time'],
      keepDump,
    });
    process.stdout.write(
      `${JSON.stringify({ dist, tokenBudgets: values['token-budgets'], spent: values.spent, holds: values.holds, postpaid: values.postpaid, restrictedKeys: values['restricted-keys'], decisions, inFlight, ...measured })}\n`,
    );
  }
}

interface Run {
  budgets: TokenBudgetPlan;
  spent: boolean;
  holds: boolean;
  postpaid: boolean;
  restrictedKeys: boolean;
  decisions: number;
  inFlight: number;
  cpuTime: boolean;
  keepDump: string | undefined;
}

async function measure(dist: string, binary: string, run: Run): Promise<Record<string, number>> {
  const { budgets, spent, holds, postpaid, decisions, inFlight } = run;
  const m = loadBuildModules<Modules>(dist, [
    'store/redis/redis-store.js',
    'store/redis/redis-keys.js',
    'check/pipeline/restriction-step.js',
  ]);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'redis-callgrind-'));
  const port = 20_000 + Math.floor(Math.random() * 20_000);
  const serverArgs = ['--port', String(port), '--save', '', '--appendonly', 'no', '--dir', dir];
  const server = run.cpuTime
    ? spawn(binary, serverArgs, { stdio: 'ignore' })
    : spawn('valgrind', ['--tool=callgrind', `--callgrind-out-file=${dir}/callgrind.out`, binary, ...serverArgs], { stdio: 'ignore' });
  const url = `redis://127.0.0.1:${port}`;
  const probe = new Redis(url, { lazyConnect: true, retryStrategy: () => null, disconnectTimeout: 50 });
  // Refused until redis-server (under valgrind, slowly) listens: the loop below retries.
  probe.on('error', () => undefined);
  try {
    for (let attempt = 0; ; attempt += 1) {
      try {
        await probe.connect();
        break;
      } catch (error) {
        if (attempt > 100) throw error;
        await sleep(200);
      }
    }
    const store = await m.RedisStore.connect({ url, commandTimeoutMs: 60_000, adminCommandTimeoutMs: 60_000 });
    try {
      const ids = await seed(m, store, probe, budgets, spent, holds && !postpaid, run.restrictedKeys);
      // By key id: what the store last answered about its restrictions, sent with each decision as Check does.
      const sent = new Map<string, ReturnType<Modules['effectiveRestrictions']>>();
      let requests = 0;
      const holdOf = () => ({ hold: { requestId: `bench-${(requests += 1)}`, minorUnits: HOLD_MINOR_UNITS, tokens: HOLD_TOKENS } });
      const authorize = async (count: number) => {
        let next = 0;
        await Promise.all(
          Array.from({ length: inFlight }, async () => {
            while (next < count) {
              const key = ids[next++ % ids.length]!;
              const decide = () =>
                store.authorize({
                  ...key,
                  defaultPlan: BENCH_PLAN,
                  defaultTokenBudgets: budgets,
                  ...(holds ? holdOf() : {}),
                  ...(sent.has(key.keyId) ? { restrictions: sent.get(key.keyId)! } : {}),
                });
              let outcome = await decide();
              if (outcome.kind === 'restrictions_changed') {
                sent.set(key.keyId, m.effectiveRestrictions(outcome.keyText, outcome.accountText));
                outcome = await decide();
              }
              if (outcome.kind !== 'allow') throw new Error(`expected allow, got ${outcome.kind}`);
            }
          }),
        );
      };
      await authorize(WARM_UP);
      if (run.cpuTime) {
        const before = await redisWork(probe);
        await authorize(decisions);
        const work = redisWorkDelta(before, await redisWork(probe));
        return {
          userUsPerDecision: (work.userSeconds * 1e6) / decisions,
          systemUsPerDecision: (work.systemSeconds * 1e6) / decisions,
          decisionsPerRead: decisions / work.reads,
        };
      }
      await execute('callgrind_control', ['-z', String(server.pid)]);
      await authorize(decisions);
      await execute('callgrind_control', ['-d', String(server.pid)]);
    } finally {
      await store.close();
    }
    const dump = fs.readdirSync(dir).find((name) => /^callgrind\.out\.\d+$/.test(name));
    if (!dump) throw new Error(`callgrind wrote no dump in ${dir}`);
    if (run.keepDump !== undefined) fs.copyFileSync(path.join(dir, dump), run.keepDump);
    const summary = /^(?:summary|totals): (\d+)/m.exec(fs.readFileSync(path.join(dir, dump), 'utf8'));
    if (!summary) throw new Error(`no instruction total in ${dump}`);
    return { instructionsPerDecision: Math.round(Number(summary[1]) / decisions) };
  } finally {
    await probe.shutdown('NOSAVE').catch(() => undefined);
    probe.disconnect();
    await new Promise((resolve) => (server.exitCode === null ? server.once('exit', resolve) : resolve(undefined)));
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** The accounts and keys, and with --spent every token bucket of the plan spent into. */
async function seed(
  m: Modules,
  store: import('../../src/store/redis/redis-store').RedisStore,
  redis: Redis,
  budgets: TokenBudgetPlan,
  spent: boolean,
  prepaid: boolean,
  restricted: boolean,
): Promise<{ accountId: string; keyId: string }[]> {
  const createdAt = new Date().toISOString();
  const ids: { accountId: string; keyId: string }[] = [];
  const [seconds] = await redis.time();
  const tatUs = (Number(seconds) + 30) * 1_000_000;
  for (let a = 0; a < ACCOUNTS; a += 1) {
    const accountId = `acct-${a}`;
    await store.createAccount({
      id: accountId,
      name: accountId,
      status: 'active',
      createdAt,
      ...(prepaid ? { creditBalance: PREPAID_BALANCE } : {}),
    });
    for (let k = 0; k < KEYS_PER_ACCOUNT; k += 1) {
      const keyId = `key_${a}_${k}`;
      await insertKey(store, generateCustomerKey('live'), {
        id: keyId,
        accountId,
        name: keyId,
        createdAt,
        ...(restricted ? { restrictions: RESTRICTIONS_ALLOWING_THE_TRAFFIC } : {}),
      });
      ids.push({ accountId, keyId });
      if (spent) {
        const spentInto = (of: TokenBudgetPlan['key'], fraction: number) =>
          packTokenBuckets(of.map((budget, i) => ({ windowSeconds: budget.windowSeconds, tatUs, fraction: i === 0 ? fraction : 0 })));
        const fields = [
          [m.redisKeys.keyTokenBucketField(keyId), spentInto(budgets.key, 7)],
          [m.redisKeys.accountTokenBucketField(), spentInto(budgets.account, 3)],
        ];
        await redis.hset(m.redisKeys.account(accountId), ...fields.flat());
      }
    }
  }
  return ids;
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
