/** The two servers under test, each in a child process of its own. */
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { freePort } from '../support/free-port';

export const REPO_ROOT = findRepoRoot();

function findRepoRoot(): string {
  let dir = __dirname;
  for (let i = 0; i < 8; i += 1) {
    if (fs.existsSync(path.join(dir, 'package.json')) && fs.existsSync(path.join(dir, 'proto'))) return dir;
    dir = path.dirname(dir);
  }
  throw new Error(`cannot find the repository root above ${__dirname}`);
}

export { freePort };

export interface ServerUnderTest {
  name: string;
  pid: number;
  grpcAddress: string;
  adminUrl?: string;
  stop(): Promise<void>;
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const force = setTimeout(() => child.kill('SIGKILL'), 15_000);
    child.once('exit', () => {
      clearTimeout(force);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/** noop-server.ts's exit code for a transport it does not have. */
const UNKNOWN_TRANSPORT_EXIT = 2;

/**
 * The no-op Check server (noop-server.ts, compiled next to this file) on
 * `transport`; undefined when this build's noop-server.ts does not have that
 * transport (it exits with UNKNOWN_TRANSPORT_EXIT).
 */
export async function startNoopServer(transport = 'grpc-js'): Promise<ServerUnderTest | undefined> {
  const child = spawn(process.execPath, [path.join(__dirname, 'noop-server.js'), '--transport', transport], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  live.add(child);
  let output = '';
  let errors = '';
  child.stderr.on('data', (chunk) => (errors += chunk));
  const port = await new Promise<number | undefined>((resolve, reject) => {
    const deadline = setTimeout(() => reject(new Error(`noop server (${transport}) did not start: ${errors}`)), 15_000);
    child.stdout.on('data', (chunk) => {
      output += chunk;
      const match = /\{"port":(\d+)/.exec(output);
      if (match) {
        clearTimeout(deadline);
        resolve(Number(match[1]));
      }
    });
    child.once('exit', (code) => {
      clearTimeout(deadline);
      live.delete(child);
      if (code === UNKNOWN_TRANSPORT_EXIT) resolve(undefined);
      else reject(new Error(`noop server (${transport}) exited with ${code}: ${errors}`));
    });
  });
  if (port === undefined) return undefined;
  return {
    name: `no-op ${transport}`,
    pid: child.pid!,
    grpcAddress: `127.0.0.1:${port}`,
    stop: async () => {
      await stopChild(child);
      live.delete(child);
    },
  };
}

export interface OtlpSink {
  /** For OTEL_EXPORTER_OTLP_ENDPOINT. */
  endpoint: string;
  /** Stops it; resolves with what it received. */
  stop(): Promise<{ exports: number; bytes: number }>;
}

/** otlp-sink.ts (compiled next to this file) in a process of its own: it takes the export traffic of `--tracing`. */
export async function startOtlpSink(): Promise<OtlpSink> {
  const child = spawn(process.execPath, [path.join(__dirname, 'otlp-sink.js')], { stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(child);
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  const port = await new Promise<number>((resolve, reject) => {
    const deadline = setTimeout(() => reject(new Error('the OTLP sink did not start')), 15_000);
    const onData = () => {
      const match = /\{"port":(\d+)/.exec(output);
      if (!match) return;
      clearTimeout(deadline);
      child.stdout.off('data', onData);
      resolve(Number(match[1]));
    };
    child.stdout.on('data', onData);
    child.once('exit', (code) => reject(new Error(`the OTLP sink exited with ${code}`)));
  });
  return {
    endpoint: `http://127.0.0.1:${port}`,
    async stop() {
      await stopChild(child);
      live.delete(child);
      const match = /\{"exports":(\d+),"bytes":(\d+)\}/.exec(output);
      return { exports: Number(match?.[1] ?? 0), bytes: Number(match?.[2] ?? 0) };
    },
  };
}

/**
 * V8 flags the service starts with (Dockerfile CMD, `npm start`): Node refuses
 * them in NODE_OPTIONS. Chosen on Node 20 (V8 11.3) as below; measured again
 * on Node 24 in docs/operations/runtime.md ("The V8 flags on Node 24").
 * - `--heap-growing-percent=75`: the heap grows to 1.75 × what the last
 *   mark-compact left live before the next one starts, not the ~1.4 × V8
 *   picks for a small heap: with ~25 MB live, each Check's few hundred
 *   promoted bytes triggered a mark-compact every ~1.4 s at 8,500 Checks/s,
 *   and the stalls around each (10-20 ms of marking steps and pause) were the
 *   Check path's p99. It was 100 until `--single-threaded-gc`: with all of the
 *   GC on the main thread, RSS under load read 191–196 MB in two full runs
 *   (`npm run bench`, target 200), and 75 brought it to 181–185 MB, with more
 *   mark-compacts, each a short hold now (below).
 * - `--single-threaded-gc` (shipped on Node 20, dropped on Node 24, whose
 *   V8 took 12–115 ms per mark-compact with it against about 10 ms without,
 *   and more RSS; docs/operations/runtime.md): the main thread did all of the GC's work, in
 *   the small steps of incremental marking and lazy sweeping, and no helper
 *   thread runs. A sidecar has a core or two, shared with Redis or Envoy;
 *   helper threads then take the core from the main thread in time slices,
 *   and the main thread waits for them. Scavenges alone on the main thread
 *   (`--no-parallel-scavenge`, which this implies) took a third less in a
 *   burst of Checks (median 1.6 → 1.0 ms). Around a mark-compact, with the
 *   gateway alone on one core at 12,500 Checks/s (test/bench/gc-profile.ts,
 *   48 s, 10 connections opened 1 ms apart), the concurrent marker and
 *   sweeper held the event loop 25–35 ms at a time (its worst 1 s rounds:
 *   p99 45 and 19 ms in two runs); all on the main thread, the longest hold
 *   was 11 ms (worst rounds 5.8 and 6.7 ms), though mark-compacts ran
 *   3 times in 48 s instead of once.
 * - `--no-memory-reducer`: no memory-reducing GCs while the process is
 *   quiet. Such a GC drops the maps V8 otherwise keeps for optimized code,
 *   so the Check path's optimized code went with them (about 70 functions,
 *   "weak objects" in `--trace-deopt`), and the first traffic after a quiet
 *   spell ran unoptimized while four compile threads took the core: the
 *   bench's first gateway held its loop 46–121 ms and shed 1,700–5,800
 *   Checks in its warm-up, in every run on record. With the flag, in a short
 *   bench run: 7.3 ms, 3 shed, no such deoptimization. A quiet replica keeps
 *   the heap it had under load instead of shrinking it.
 * - `--max-semi-space-size=8`: a young generation of 2 × 8 MB. Node 24's V8
 *   grows each semi-space to 64 MB under load, which held 311 MB of RSS with
 *   200,000 keys cached where Node 20 held 182; at 8 MB, 197–211 MB, with the
 *   tail inside the server at 1–4 ms in two full A/B runs, and the CPU per
 *   decision 11 % above V8's own size in one and level with 16 MB in the
 *   other (at 4 MB the p99 went to 25–50 ms; docs/operations/runtime.md).
 */
export const SHIPPED_NODE_ARGS: readonly string[] = Object.freeze([
  '--heap-growing-percent=75',
  '--no-memory-reducer',
  '--max-semi-space-size=8',
]);

/**
 * `node <SHIPPED_NODE_ARGS> dist/cli/main.js serve`, as in production. Ready when /readyz says
 * so (health turns SERVING once Redis answered). Its stdout (the logs) goes
 * to a file, as a container runtime would take it.
 */
export async function startGateway(
  env: Record<string, string>,
  logFile: string,
  nodeArgs: readonly string[] = [],
  distDir = path.join(REPO_ROOT, 'dist'),
): Promise<ServerUnderTest> {
  const [grpcPort, adminPort, customerPort] = [await freePort(), await freePort(), await freePort()];
  const out = fs.openSync(logFile, 'w');
  // The shipped flags first: a flag given again in nodeArgs wins (V8 takes the last).
  const child = spawn(process.execPath, [...SHIPPED_NODE_ARGS, ...nodeArgs, path.join(distDir, 'cli', 'main.js'), 'serve'], {
    env: {
      PATH: process.env.PATH ?? '',
      GRPC_PORT: String(grpcPort),
      ADMIN_PORT: String(adminPort),
      CUSTOMER_PORT: String(customerPort),
      ...env,
    },
    stdio: ['ignore', out, 'pipe'],
  });
  fs.closeSync(out);
  live.add(child);
  let errors = '';
  child.stderr!.on('data', (chunk) => (errors += chunk));
  const adminUrl = `http://127.0.0.1:${adminPort}`;
  const deadline = Date.now() + 20_000;
  // With GRPC_WORKERS, every worker logs that it listens; wait for all of them (the bench logs at info).
  const workers = Number(env.GRPC_WORKERS ?? '1');
  const listening = () => (fs.readFileSync(logFile, 'utf8').match(/"msg":"gateway-authz listening"/g) ?? []).length;
  for (;;) {
    if (child.exitCode !== null) {
      throw new Error(`gateway exited with ${child.exitCode}: ${errors}${fs.readFileSync(logFile, 'utf8').slice(-2000)}`);
    }
    try {
      if ((await fetch(`${adminUrl}/readyz`)).status === 200 && (workers <= 1 || listening() >= workers)) break;
    } catch {
      /* not listening yet */
    }
    if (Date.now() > deadline) {
      await stopChild(child);
      throw new Error(`gateway not ready within 20 s: ${errors}${fs.readFileSync(logFile, 'utf8').slice(-2000)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return {
    name: 'gateway',
    pid: child.pid!,
    grpcAddress: `127.0.0.1:${grpcPort}`,
    adminUrl,
    stop: async () => {
      await stopChild(child);
      live.delete(child);
    },
  };
}
