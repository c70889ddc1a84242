/**
 * CPU time and resident memory of a process and its descendants, from
 * /proc (Linux only). The gateway runs in a child process, so its CPU is not
 * mixed with the load driver's.
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';

let clockTicks: number | undefined;

/** Clock ticks per second (USER_HZ), for the utime/stime fields of /proc/<pid>/stat. */
function ticksPerSecond(): number {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

interface StatFields {
  ppid: number;
  /** user + system CPU time, in seconds */
  cpuSeconds: number;
}

function readStat(pid: number): StatFields | undefined {
  let text: string;
  try {
    text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // The command name (field 2) is in parentheses and may contain spaces.
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // rest[0] is field 3 (state): ppid is field 4, utime 14, stime 15.
  const ppid = Number(rest[1]);
  const utime = Number(rest[11]);
  const stime = Number(rest[12]);
  return { ppid, cpuSeconds: (utime + stime) / ticksPerSecond() };
}

/** The process and every descendant (node:cluster workers included). */
export function processTree(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = readStat(Number(entry));
    if (!stat) continue;
    const list = children.get(stat.ppid) ?? [];
    list.push(Number(entry));
    children.set(stat.ppid, list);
  }
  const tree: number[] = [];
  const queue = [root];
  while (queue.length > 0) {
    const pid = queue.shift()!;
    tree.push(pid);
    queue.push(...(children.get(pid) ?? []));
  }
  return tree;
}

/** Total CPU seconds (user + system) used so far by the process tree. */
export function cpuSecondsOf(root: number): number {
  return processTree(root).reduce((sum, pid) => sum + (readStat(pid)?.cpuSeconds ?? 0), 0);
}

/** Resident set size in bytes (VmRSS) of the process tree. */
export function rssBytesOf(root: number): number {
  return rssBytesOfPids(processTree(root));
}

function rssBytesOfPids(pids: readonly number[]): number {
  let total = 0;
  for (const pid of pids) {
    try {
      const match = /^VmRSS:\s+(\d+)\s+kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
      if (match) total += Number(match[1]) * 1024;
    } catch {
      /* gone */
    }
  }
  return total;
}

/**
 * Samples the RSS of the process tree every `everyMs` and keeps the largest.
 * The tree is listed once, at the start: walking all of /proc at each sample
 * would steal the load driver's time during the phase it measures.
 */
export function sampleMaxRss(root: number, everyMs = 200): { stop(): number; sinceLast(): number } {
  const pids = processTree(root);
  let max = rssBytesOfPids(pids);
  // The largest sample since the last sinceLast(): which phase raised it.
  let window = max;
  const timer = setInterval(() => {
    const now = rssBytesOfPids(pids);
    max = Math.max(max, now);
    window = Math.max(window, now);
  }, everyMs);
  return {
    stop: () => {
      clearInterval(timer);
      return Math.max(max, rssBytesOfPids(pids));
    },
    sinceLast: () => {
      const now = rssBytesOfPids(pids);
      const largest = Math.max(window, now);
      window = now;
      return largest;
    },
  };
}

/**
 * Waits until the process tree uses under `share` of one core over `stepMs`,
 * at most `maxMs`: a server that is still working off a queue from one phase
 * would otherwise carry it into the next. Returns whether it got idle.
 */
export async function waitUntilIdle(root: number, maxMs = 10_000, stepMs = 250, share = 0.1): Promise<boolean> {
  const deadline = Date.now() + maxMs;
  let before = cpuSecondsOf(root);
  while (Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, stepMs));
    const now = cpuSecondsOf(root);
    if (now - before < (share * stepMs) / 1000) return true;
    before = now;
  }
  return false;
}

export interface MachineInfo {
  cpus: number;
  cpuModel: string;
  node: string;
  kernel: string;
  memTotalMb: number;
}

export function machineInfo(): MachineInfo {
  const cpuinfo = safeRead('/proc/cpuinfo');
  const meminfo = safeRead('/proc/meminfo');
  let cpus = 0;
  try {
    cpus = Number(execFileSync('nproc', { encoding: 'utf8' }).trim());
  } catch {
    cpus = (cpuinfo.match(/^processor\s*:/gm) ?? []).length;
  }
  return {
    cpus,
    cpuModel: /^model name\s*:\s*(.+)$/m.exec(cpuinfo)?.[1]?.trim() ?? 'unknown',
    node: process.version,
    kernel: safeRead('/proc/sys/kernel/osrelease').trim(),
    memTotalMb: Math.round(Number(/^MemTotal:\s+(\d+)/m.exec(meminfo)?.[1] ?? 0) / 1024),
  };
}

function safeRead(file: string): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}
