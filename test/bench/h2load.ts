/**
 * The tail phase's driver: h2load (Debian's nghttp2-client), a C load
 * generator whose event loop does not pause for GC, so the latency it logs
 * is the server's. It sends one fixed body, so it drives one request class:
 * a valid key's CheckRequest (cached after the first Check, as valid keys
 * are in production). `--rps` holds a fixed rate per connection,
 * `--requests` fixes how many (h2load then waits for every answer: with
 * `--duration` it would drop the requests still in flight at the end, the
 * slowest ones), and `--log-file` writes every request's latency, so the
 * percentiles are exact.
 */
import { execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import { onCpus } from './cpu-affinity';
import { ENVOY_CHECK_TIMEOUT_MS } from './h2-driver';
import { CHECK_PATH } from './traffic';

export const H2LOAD_INSTALL_HINT =
  "the tail phase needs h2load: install Debian's nghttp2-client (apt-get install nghttp2-client), or put an h2load on PATH";

/** The h2load binary and its version; throws, saying how to install it, when there is none. */
export function findH2load(): { binary: string; version: string } {
  for (const binary of ['h2load', '/usr/bin/h2load']) {
    try {
      const version = execFileSync(binary, ['--version'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
      return { binary, version };
    } catch {
      /* try the next */
    }
  }
  throw new Error(`h2load not found: ${H2LOAD_INSTALL_HINT}`);
}

export interface H2loadRound {
  /** Latency of each request that started after the warm-up, in ms. */
  latenciesMs: number[];
  /** Of those, requests that failed (h2load logs status -1) or had an HTTP status other than 200. */
  failed: number;
  /** Seconds from the first measured request's start to the last one's: the rate h2load held is (latenciesMs.length − 1) / this. */
  startSpanSeconds: number;
  /** h2load's own summary line ("requests: … total, … started, … done, … succeeded, … failed, …"). */
  summary: string;
}

export interface H2loadOptions {
  binary: string;
  address: string;
  /** The gRPC length-prefixed CheckRequest sent as every request's body. */
  bodyFile: string;
  logFile: string;
  connections: number;
  /** Streams one connection may have open: high, so h2load never waits for an answer to keep its rate (no coordinated omission). */
  streamsPerConnection: number;
  /** Requests per second over all connections. */
  rate: number;
  warmupMs: number;
  durationMs: number;
  /**
   * Open the connections one a millisecond apart (`--rate 1 --rate-period 1ms`) rather than all at once. `--rps`
   * arms each connection's rate timer when it connects, and the timer fires every 10 ms (or 1 / rps if longer),
   * sending all that is due: connections opened together fire together, so the server gets rate / 100 requests at
   * once every 10 ms. Ten connections opened 1 ms apart send rate / 1000 requests each millisecond instead.
   */
  staggered?: boolean;
  /** The CPUs h2load runs on (taskset's list syntax; see cpu-affinity.ts); absent: any. */
  cpus?: string;
}

/** Connections that a staggered schedule spreads over h2load's 10 ms rate timer, one per millisecond. */
export const STAGGERED_CONNECTIONS = 10;

export function h2loadArguments(options: H2loadOptions): string[] {
  return [
    '--clients',
    String(options.connections),
    '--max-concurrent-streams',
    String(options.streamsPerConnection),
    ...(options.staggered ? ['--rate', '1', '--rate-period', '1ms'] : []),
    '--rps',
    (options.rate / options.connections).toFixed(3),
    '--requests',
    String(requestCount(options)),
    '--data',
    options.bodyFile,
    '--header',
    'content-type: application/grpc',
    '--header',
    'te: trailers',
    '--header',
    `grpc-timeout: ${ENVOY_CHECK_TIMEOUT_MS}m`,
    '--log-file',
    options.logFile,
    `http://${options.address}${CHECK_PATH}`,
  ];
}

/** Requests for warm-up + duration at the rate; at least one per connection, as h2load requires. */
function requestCount(options: H2loadOptions): number {
  return Math.max(options.connections, Math.round((options.rate * (options.warmupMs + options.durationMs)) / 1000));
}

/** Past this, h2load is stopped and the run fails: some answer never came. */
const STUCK_AFTER_MS = 30_000;

export async function runH2load(options: H2loadOptions): Promise<H2loadRound> {
  fs.rmSync(options.logFile, { force: true });
  const { command, args } = onCpus(options.cpus, options.binary, h2loadArguments(options));
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  const stuck = setTimeout(() => child.kill('SIGKILL'), options.warmupMs + options.durationMs + STUCK_AFTER_MS);
  const { code, signal } = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (exitCode, exitSignal) => resolve({ code: exitCode, signal: exitSignal }));
  }).finally(() => clearTimeout(stuck));
  if (signal === 'SIGKILL')
    throw new Error(`h2load still waited for answers ${STUCK_AFTER_MS / 1000} s after its last request: ${output.slice(-2000)}`);
  if (code !== 0) throw new Error(`h2load exited with ${code}${signal ? ` (${signal})` : ''}: ${output.slice(-2000)}`);
  const summary = /^requests: .*$/m.exec(output)?.[0] ?? '';
  return { ...parseH2loadLog(fs.readFileSync(options.logFile, 'utf8'), options.warmupMs), summary };
}

/**
 * h2load's --log-file: one line per finished request, tab-separated: start
 * time (µs since the epoch), HTTP status (-1 for a failed stream), µs until
 * the end of the response. Requests that started in the first `warmupMs`
 * (counted from the earliest start) are left out.
 */
export function parseH2loadLog(text: string, warmupMs: number): Omit<H2loadRound, 'summary'> {
  const rows: [number, number, number][] = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    const [start, status, latency] = line.split('\t').map(Number);
    if (!Number.isFinite(start) || !Number.isFinite(status) || !Number.isFinite(latency))
      throw new Error(`unexpected h2load log line: '${line}'`);
    rows.push([start!, status!, latency!]);
  }
  if (rows.length === 0) return { latenciesMs: [], failed: 0, startSpanSeconds: 0 };
  // Loops, not Math.min(...rows): a spread of some 100k arguments overflows the stack.
  let first = Infinity;
  for (const [start] of rows) first = Math.min(first, start);
  const from = first + warmupMs * 1000;
  const latenciesMs: number[] = [];
  let failed = 0;
  let earliest = Infinity;
  let latest = -Infinity;
  for (const [start, status, latency] of rows) {
    if (start < from) continue;
    latenciesMs.push(latency / 1000);
    if (status !== 200) failed += 1;
    earliest = Math.min(earliest, start);
    latest = Math.max(latest, start);
  }
  return { latenciesMs, failed, startSpanSeconds: latenciesMs.length > 1 ? (latest - earliest) / 1e6 : 0 };
}
