/**
 * What the gateway asks of Redis. Two views:
 *  - INFO commandstats deltas: every command Redis ran, including those the
 *    authorize script runs itself (HMGET, HSET): Redis's work. The
 *    replica's sample of Redis's clock (TIME, once a second) counts here too.
 *  - MONITOR, on short phases only (it slows Redis down): the commands that
 *    came from a client, i.e. the network round trips. Script-internal
 *    commands arrive with source "lua" and are left out.
 */
import { createHash } from 'node:crypto';
import Redis from 'ioredis';
import { REDIS_SCRIPTS } from '../../src/store/redis/scripts';

export type CommandCounts = Record<string, number>;

/** Commands the benchmark itself or the health probe sends; never counted against decisions. */
const NOT_DECISIONS = /^(info|config|monitor|ping|client|hello|select|flushall|flushdb|dbsize|script)/i;

export async function commandStats(redis: Redis): Promise<CommandCounts> {
  const info = await redis.info('commandstats');
  const counts: CommandCounts = {};
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) counts[match[1]!] = Number(match[2]);
  return counts;
}

const infoField = (info: string, name: string) => Number(new RegExp(`^${name}:(\\S+)`, 'm').exec(info)?.[1] ?? Number.NaN);

/** Redis's own CPU time so far (INFO cpu: main thread and I/O, user + system), in seconds. */
export async function redisCpuSeconds(redis: Redis): Promise<number> {
  const { userSeconds, systemSeconds } = await redisWork(redis);
  return userSeconds + systemSeconds;
}

/** Redis's CPU so far, user and system apart, and the reads it served. */
export interface RedisWork {
  userSeconds: number;
  systemSeconds: number;
  /**
   * Read events served (INFO stats total_reads_processed). Decisions per read
   * is how many commands Redis takes in one wake-up, and its CPU per decision
   * rises steeply as that falls, so a run's Redis CPU is read beside it.
   * Measured with `redis-callgrind.ts --cpu-time` at 1, 4, 16 and 64 in
   * flight (1, 4, 16 and 32–38 decisions a read): 29.5, 13.9, 11.1 and
   * 8.8 µs on a quiet machine, 55.2, 28.1, 18.9 and 19.1 µs with other jobs
   * running. System time falls from half of it to a tenth.
   */
  reads: number;
}

export async function redisWork(redis: Redis): Promise<RedisWork> {
  const [cpu, stats] = await Promise.all([redis.info('cpu'), redis.info('stats')]);
  return {
    userSeconds: infoField(cpu, 'used_cpu_user'),
    systemSeconds: infoField(cpu, 'used_cpu_sys'),
    reads: infoField(stats, 'total_reads_processed'),
  };
}

export function redisWorkDelta(before: RedisWork, after: RedisWork): RedisWork {
  return {
    userSeconds: after.userSeconds - before.userSeconds,
    systemSeconds: after.systemSeconds - before.systemSeconds,
    reads: after.reads - before.reads,
  };
}

export function commandDelta(before: CommandCounts, after: CommandCounts): CommandCounts {
  const delta: CommandCounts = {};
  for (const [command, calls] of Object.entries(after)) {
    if (NOT_DECISIONS.test(command)) continue;
    const diff = calls - (before[command] ?? 0);
    if (diff > 0) delta[command] = diff;
  }
  return delta;
}

const sha1 = (text: string) => createHash('sha1').update(text).digest('hex');
/** The authorize script is not among the admin scripts (scripts.ts): it is the EVALSHA that is none of them. */
const SCRIPT_NAMES: Record<string, string> = {
  [sha1(REDIS_SCRIPTS.gwaRecordLastUsed.lua)]: 'evalsha(last-used)',
  ...Object.fromEntries(
    Object.entries(REDIS_SCRIPTS)
      .filter(([name]) => name !== 'gwaRecordLastUsed')
      .map(([name, script]) => [sha1(script.lua), `evalsha(${name})`]),
  ),
};

/** Client commands seen by MONITOR while `during` runs, by command (EVALSHA named by script). */
export async function clientCommandsDuring(redisUrl: string, during: () => Promise<void>): Promise<CommandCounts> {
  // A connection of its own in monitor mode (Redis#monitor() would leave the client it was called on open).
  const watcher = new Redis(redisUrl, { disconnectTimeout: 50, monitor: true });
  let watcherError: Error | undefined;
  // ioredis can misread the first MONITOR lines of a busy Redis as replies
  // ("Command queue state error"): a measurement error, not a crash of the bench.
  watcher.on('error', (error: Error) => (watcherError ??= error));
  await new Promise<void>((resolve, reject) => {
    watcher.once('monitoring', () => resolve());
    watcher.once('end', () => reject(watcherError ?? new Error('MONITOR connection closed')));
  });
  const counts: CommandCounts = {};
  watcher.on('monitor', (_time: string, args: string[], source: string) => {
    if (source === 'lua') return;
    const command = String(args[0] ?? '').toLowerCase();
    if (NOT_DECISIONS.test(command)) return;
    const name = command === 'evalsha' ? (SCRIPT_NAMES[String(args[1])] ?? 'evalsha(authorize)') : command;
    counts[name] = (counts[name] ?? 0) + 1;
  });
  try {
    await during();
    // MONITOR lines trail the commands slightly.
    await new Promise((resolve) => setTimeout(resolve, 200));
  } finally {
    watcher.disconnect();
  }
  if (watcherError) throw new Error(`MONITOR failed, round trips not counted: ${watcherError.message}`);
  return counts;
}

/**
 * Round trips on the Check path: everything except the batched last-used
 * writes and the replica's once-a-second TIME sample of Redis's clock
 * (RedisClock), both off the hot path and whatever the traffic.
 */
export function checkPathRoundTrips(counts: CommandCounts): number {
  return Object.entries(counts)
    .filter(([name]) => name !== 'evalsha(last-used)' && name !== 'time')
    .reduce((sum, [, calls]) => sum + calls, 0);
}

/**
 * The part of INFO commandstats that the last-used batches ran
 * (gwaRecordLastUsed), derived from the commands only that script runs in
 * the bench (no decision runs a SET or an HINCRBY): per call its EVALSHA and
 * the batch marker's SET; per key an HMGET, an HSET (a key in a flush was
 * used since the previous one, so its time is later) and an HINCRBY per count
 * hash (two); per count hash one PEXPIRE. The rest is the Checks' own.
 */
export function lastUsedBatchCommands(counts: CommandCounts): number {
  const calls = counts.set ?? 0;
  const keys = (counts.hincrby ?? 0) / 2;
  return 2 * calls + 2 * keys + (counts.hincrby ?? 0) + (counts.pexpire ?? 0);
}
