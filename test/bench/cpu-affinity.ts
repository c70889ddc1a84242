/**
 * The tail phase's CPUs: the server under test alone on one CPU, and
 * everything else the phase runs (h2load, Redis, the idle servers, the bench
 * itself) on the others. On a 2-core machine these otherwise share the
 * server's core, and the scheduler then holds the server off its core for a
 * time slice while h2load or Redis runs: measured with h2load's connections
 * opened 1 ms apart, the p99 inside the gateway was 8.3 ms with everything
 * sharing both cores, and 2.9 ms with the gateway alone on one. Sharing, the
 * gateway waited 100-400 ms in the run queue in each 1.2 s in which it ran
 * 400-900 ms (/proc/<pid>/schedstat). A load generator kept off the server's cores is
 * what latency benchmarks ask for; every contender gets the same split.
 *
 * `taskset` (util-linux, on every Debian) sets the affinity of a running
 * process's threads, and starts a command on given CPUs.
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import { processTree } from './proc-stats';

export interface CpuSplit {
  /** The CPU of the server under test (taskset's list syntax). */
  server: string;
  /** The CPUs of the driver, Redis and whatever else runs. */
  others: string;
  /** Every CPU: what each process gets back after the phase. */
  all: string;
}

/** The split for `cpus` CPUs; none on a single CPU, where there is nothing to keep apart. */
export function tailCpuSplit(cpus: number): CpuSplit | undefined {
  if (!Number.isInteger(cpus) || cpus < 2) return undefined;
  const last = cpus - 1;
  return { server: '0', others: last === 1 ? '1' : `1-${last}`, all: `0-${last}` };
}

/** taskset's arguments that set the affinity of every thread of `pid`. */
export function tasksetArguments(pid: number, cpus: string): string[] {
  return ['--all-tasks', '--cpu-list', '--pid', cpus, String(pid)];
}

/** Runs `command` on `cpus`: the command line to spawn instead. */
export function onCpus(cpus: string | undefined, command: string, args: string[]): { command: string; args: string[] } {
  return cpus === undefined ? { command, args } : { command: 'taskset', args: ['--cpu-list', cpus, command, ...args] };
}

/** Sets the affinity of `root` and of every process under it (node:cluster workers), all their threads. Throws when taskset fails. */
export function pinProcessTree(root: number, cpus: string): void {
  for (const pid of processTree(root)) {
    try {
      execFileSync('taskset', tasksetArguments(pid, cpus), { stdio: ['ignore', 'ignore', 'pipe'] });
    } catch (error) {
      const detail = (error as { stderr?: Buffer }).stderr?.toString().trim() || (error as Error).message;
      throw new Error(`could not set the CPUs of pid ${pid} to ${cpus} with taskset (util-linux): ${detail}`);
    }
  }
}

/** The CPUs `pid`'s main thread may run on, as the kernel reports them (/proc/<pid>/status). */
export function allowedCpusOf(pid: number): string {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const line = /^Cpus_allowed_list:\s*(\S+)$/m.exec(status);
  if (!line) throw new Error(`no Cpus_allowed_list in /proc/${pid}/status`);
  return line[1]!;
}

/**
 * The tail phase's split over a run of several servers: every process in
 * `pids` (the bench itself, Redis, the servers; whatever they start later
 * inherits) kept off the server CPU, and each server given it for its own
 * phases only (`onServerCpu`). `release` gives every process every CPU back.
 * Without a split (one CPU), nothing moves.
 */
export function serverCpuPlan(split: CpuSplit | undefined, pids: readonly number[]) {
  if (split) for (const pid of pids) pinProcessTree(pid, split.others);
  return {
    async onServerCpu<T>(pid: number, work: () => Promise<T>): Promise<T> {
      if (split) pinProcessTree(pid, split.server);
      try {
        return await work();
      } finally {
        if (split) pinProcessTree(pid, split.others);
      }
    },
    /** A process started after the plan (a restarted server): off the server CPU too. */
    adopt(pid: number): void {
      if (split) pinProcessTree(pid, split.others);
    },
    release(): void {
      if (split) for (const pid of pids) pinProcessTree(pid, split.all);
    },
  };
}

/**
 * The attack phase's measured parts (the server under test, the normal client, Redis) run at this niceness: on a
 * shared machine, whatever else runs there (a build, a test run, the attacker itself at +10) then takes only what they
 * leave. Unraised, a stall of the normal client's own event loop (seen: 45 ms in the 2 s after an attack) read as the
 * server's latency. Both contenders get the same.
 */
export const MEASURED_NICENESS = -10;

/**
 * Sets the niceness of every thread of `root` and of the processes under it (Linux's niceness is per thread; threads
 * made later inherit their maker's). Returns the reason when it could not (raising needs root or CAP_SYS_NICE).
 */
export function setNicenessOfTree(root: number, niceness: number): string | undefined {
  for (const pid of processTree(root)) {
    let threads: string[];
    try {
      threads = fs.readdirSync(`/proc/${pid}/task`);
    } catch {
      continue; // gone meanwhile
    }
    for (const tid of threads) {
      try {
        os.setPriority(Number(tid), niceness);
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code === 'ESRCH') continue;
        return `could not set the niceness of pid ${pid} to ${niceness}: ${(error as Error).message}`;
      }
    }
  }
  return undefined;
}
