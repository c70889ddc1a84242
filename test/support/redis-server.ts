/**
 * A real Redis for the test suites.
 *
 * Resolution order:
 *   1. env TEST_REDIS_URL — used as-is (stop() is a no-op; nothing is flushed).
 *   2. a reachable Docker engine — `redis:7-alpine` via testcontainers.
 *   3. a local `redis-server` binary (PATH, /usr/bin, /usr/local/bin) spawned
 *      on a free 127.0.0.1 port with a throw-away data directory.
 *   4. otherwise: throw a loud, explanatory Error. Suites never skip.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import Redis from 'ioredis';
import { freePort } from './free-port';

export interface TestRedis {
  url: string;
  host: string;
  port: number;
  stop(): Promise<void>;
  /** the child process pid when spawned locally, undefined for containers */
  pid?: number;
}

export interface StartTestRedisOptions {
  /** run with `--appendonly yes` (default: no persistence at all) */
  appendOnly?: boolean;
  /** data directory for a locally spawned redis-server; kept on stop() (a fresh temp dir is used and removed otherwise) */
  dir?: string;
  /** a fixed port for a locally spawned redis-server (default: a free one) */
  port?: number;
  /** more redis-server arguments, e.g. cluster mode */
  extraArgs?: readonly string[];
}

/** Seams for tests of this module; production callers never pass these. */
export interface TestRedisDeps {
  /** environment to read TEST_REDIS_URL and PATH from (default: process.env) */
  env: NodeJS.ProcessEnv;
  /** absolute paths tried after PATH (default: /usr/bin/redis-server, /usr/local/bin/redis-server) */
  fallbackBinaries: readonly string[];
  /** whether a Docker engine is reachable (default: testcontainers probe, capped at ~2 s) */
  dockerAvailable: () => Promise<boolean>;
}

const DEFAULT_FALLBACK_BINARIES = ['/usr/bin/redis-server', '/usr/local/bin/redis-server'] as const;
const DOCKER_PROBE_TIMEOUT_MS = 2000;
const READY_DEADLINE_MS = 5000;
const STOP_GRACE_MS = 3000;
const MAX_PORT_ATTEMPTS = 5;

export async function startTestRedis(opts: StartTestRedisOptions = {}, deps: Partial<TestRedisDeps> = {}): Promise<TestRedis> {
  const env = deps.env ?? process.env;
  const fallbackBinaries = deps.fallbackBinaries ?? DEFAULT_FALLBACK_BINARIES;
  const dockerAvailable = deps.dockerAvailable ?? cachedDockerProbe;

  const externalUrl = env.TEST_REDIS_URL;
  if (externalUrl !== undefined && externalUrl !== '') {
    return fromExternalUrl(externalUrl);
  }

  if (await dockerAvailable()) {
    return startContainer(opts);
  }

  const binary = findRedisServerBinary(env.PATH, fallbackBinaries);
  if (binary !== undefined) {
    return spawnLocal(binary, opts);
  }

  const searched = [...pathDirs(env.PATH).map((d) => path.join(d, 'redis-server')), ...fallbackBinaries];
  throw new Error(
    [
      'No Redis available for the test suite (tests need a REAL Redis and never skip):',
      '  - TEST_REDIS_URL is not set;',
      '  - no Docker engine is reachable (testcontainers could not find a working container runtime);',
      `  - no executable redis-server found on PATH or in the fallback locations (searched: ${
        searched.length > 0 ? searched.join(', ') : '<nothing: PATH is empty>'
      }).`,
      'Fix one of these: install Redis locally (Debian/Ubuntu: `apt-get install -y redis-server`),',
      'start a Docker engine, or point TEST_REDIS_URL at a disposable Redis (e.g. redis://127.0.0.1:6379).',
    ].join('\n'),
  );
}

// ---------------------------------------------------------------------------
// 1. external URL

function fromExternalUrl(url: string): TestRedis {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new Error(`TEST_REDIS_URL is not a valid URL: ${JSON.stringify(url)}`);
  }
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') {
    throw new Error(`TEST_REDIS_URL must be a redis:// or rediss:// URL, got ${JSON.stringify(url)}`);
  }
  return {
    url,
    host: parsed.hostname,
    port: parsed.port === '' ? 6379 : Number(parsed.port),
    stop: async () => {
      /* not ours to stop */
    },
  };
}

// ---------------------------------------------------------------------------
// 2. Docker / testcontainers

/** True when testcontainers finds a working container runtime within ~2 s. */
export async function probeDockerEngine(): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), DOCKER_PROBE_TIMEOUT_MS);
    timer.unref();
  });
  const probe = (async () => {
    try {
      const { getContainerRuntimeClient } = await import('testcontainers');
      await getContainerRuntimeClient();
      return true;
    } catch {
      return false;
    }
  })();
  try {
    return await Promise.race([probe, timeout]);
  } finally {
    if (timer) clearTimeout(timer);
  }
}

let dockerProbe: Promise<boolean> | undefined;
function cachedDockerProbe(): Promise<boolean> {
  return (dockerProbe ??= probeDockerEngine());
}

async function startContainer(opts: StartTestRedisOptions): Promise<TestRedis> {
  const { GenericContainer, Wait } = await import('testcontainers');
  const command = ['redis-server', '--save', '', '--appendonly', opts.appendOnly ? 'yes' : 'no'];
  const container = await new GenericContainer('redis:7-alpine')
    .withExposedPorts(6379)
    .withCommand(command)
    .withWaitStrategy(Wait.forLogMessage('Ready to accept connections'))
    .withStartupTimeout(60_000)
    .start();
  const host = container.getHost();
  const port = container.getMappedPort(6379);
  await waitForPing(host, port, Date.now() + READY_DEADLINE_MS, () => undefined);
  let stopped = false;
  return {
    url: `redis://${formatHost(host)}:${port}`,
    host,
    port,
    stop: async () => {
      if (stopped) return;
      stopped = true;
      await container.stop();
    },
  };
}

// ---------------------------------------------------------------------------
// 3. local redis-server

function pathDirs(pathEnv: string | undefined): string[] {
  if (pathEnv === undefined || pathEnv === '') return [];
  return pathEnv.split(path.delimiter).filter((d) => d !== '');
}

function isExecutableFile(p: string): boolean {
  try {
    if (!fs.statSync(p).isFile()) return false;
    fs.accessSync(p, fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** First executable `redis-server` on `pathEnv`, then in `fallbacks`. */
export function findRedisServerBinary(
  pathEnv: string | undefined,
  fallbacks: readonly string[] = DEFAULT_FALLBACK_BINARIES,
): string | undefined {
  for (const dir of pathDirs(pathEnv)) {
    const candidate = path.join(dir, 'redis-server');
    if (isExecutableFile(candidate)) return candidate;
  }
  return fallbacks.find(isExecutableFile);
}

// Children still alive when this process exits get SIGKILLed (best effort;
// a SIGKILLed test process is covered by the per-child watchdog below).
interface Tracked {
  child: ChildProcess;
  watchdog: ChildProcess | undefined;
  tempDir: string | undefined;
}
const live = new Set<Tracked>();
let exitHookInstalled = false;
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const t of live) {
      try {
        t.child.kill('SIGKILL');
      } catch {
        /* already gone */
      }
      try {
        t.watchdog?.kill('SIGKILL');
      } catch {
        /* already gone */
      }
      if (t.tempDir !== undefined) {
        try {
          fs.rmSync(t.tempDir, { recursive: true, force: true });
        } catch {
          /* best effort */
        }
      }
    }
  });
}

/**
 * A detached `sh` loop that SIGKILLs redis-server (and removes our temp data
 * dir) once this Node process is gone: covers SIGKILLed jest workers, where no
 * 'exit' handler runs. It ends by itself when redis-server exits first.
 */
function startWatchdog(redisPid: number, tempDir: string | undefined): ChildProcess | undefined {
  const script =
    'while kill -0 "$1" 2>/dev/null && kill -0 "$2" 2>/dev/null; do sleep 1; done; ' +
    'if ! kill -0 "$1" 2>/dev/null; then kill -9 "$2" 2>/dev/null; [ -n "$3" ] && rm -rf -- "$3"; fi; exit 0';
  try {
    const wd = spawn('/bin/sh', ['-c', script, 'redis-watchdog', String(process.pid), String(redisPid), tempDir ?? ''], {
      stdio: 'ignore',
      detached: true,
    });
    wd.on('error', () => undefined);
    wd.unref();
    return wd;
  } catch {
    return undefined;
  }
}

function exited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

function waitForExit(child: ChildProcess, ms: number): Promise<boolean> {
  if (exited(child)) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      child.off('exit', onExit);
      resolve(false);
    }, ms);
    const onExit = (): void => {
      clearTimeout(timer);
      resolve(true);
    };
    child.once('exit', onExit);
  });
}

async function killChild(child: ChildProcess): Promise<void> {
  if (exited(child)) return;
  child.kill('SIGTERM');
  if (await waitForExit(child, STOP_GRACE_MS)) return;
  child.kill('SIGKILL');
  await waitForExit(child, STOP_GRACE_MS);
}

/**
 * Always a locally spawned redis-server (never a container or TEST_REDIS_URL):
 * for topologies the suite builds itself, such as a Cluster.
 */
export async function spawnTestRedisServer(opts: StartTestRedisOptions = {}): Promise<TestRedis> {
  const binary = findRedisServerBinary(process.env.PATH, DEFAULT_FALLBACK_BINARIES);
  if (binary === undefined) {
    throw new Error('No redis-server binary on PATH (needed to build a test Redis Cluster). Install it: apt-get install -y redis-server');
  }
  return spawnLocal(binary, opts);
}

/** A server binary's version, from `<binary> --version` ("Redis server v=7.0.15 …", "Valkey server v=8.0.1 …"). */
export interface ServerBinary {
  binary: string;
  /** the Redis version it speaks: Valkey's own versions (7.2, 8, …) all speak Redis 7.2 */
  speaks: readonly [major: number, minor: number];
  /** the --version line, as it printed it */
  description: string;
}

export function serverBinaryOf(binary: string, versionLine: string): ServerBinary | undefined {
  const match = /^(Redis|Valkey) server v=(\d+)\.(\d+)/.exec(versionLine.trim());
  if (!match) return undefined;
  const [major, minor] = [Number(match[2]), Number(match[3])];
  // Valkey forked Redis 7.2.4, and every Valkey answers INFO with that version (redis_version:7.2.4).
  const speaks = match[1] === 'Valkey' ? ([7, 2] as const) : ([major, minor] as const);
  return { binary, speaks, description: versionLine.trim() };
}

/**
 * The first `redis-server` or `valkey-server` (PATH, then /usr/bin and /usr/local/bin) that speaks Redis `major.minor`
 * or later. Debian bookworm's redis-server is 7.0; `bash .ci/run` installs valkey-server 8 from bookworm-backports
 * beside it for what needs 7.2 (WAITAOF).
 */
export function findServerBinaryAtLeast(
  major: number,
  minor: number,
  pathEnv = process.env.PATH,
  fallbackDirs: readonly string[] = ['/usr/bin', '/usr/local/bin'],
): ServerBinary | undefined {
  const names = ['redis-server', 'valkey-server'];
  const candidates = [
    ...names.flatMap((name) => pathDirs(pathEnv).map((dir) => path.join(dir, name))),
    ...names.flatMap((name) => fallbackDirs.map((dir) => path.join(dir, name))),
  ];
  for (const candidate of new Set(candidates)) {
    if (!isExecutableFile(candidate)) continue;
    let line: string;
    try {
      line = execFileSync(candidate, ['--version'], { encoding: 'utf8', timeout: 5_000 });
    } catch {
      continue;
    }
    const found = serverBinaryOf(candidate, line);
    if (found && (found.speaks[0] > major || (found.speaks[0] === major && found.speaks[1] >= minor))) return found;
  }
  return undefined;
}

/**
 * A locally spawned server that speaks Redis `major.minor` or later; fails loudly, saying how to get one, when the
 * machine has none (a test that needs it must not pass by skipping).
 */
export async function spawnTestRedisServerAtLeast(
  [major, minor]: readonly [number, number],
  opts: StartTestRedisOptions = {},
): Promise<TestRedis & { server: ServerBinary }> {
  const server = findServerBinaryAtLeast(major, minor);
  if (server === undefined) {
    throw new Error(
      `No redis-server or valkey-server that speaks Redis ${major}.${minor} or later on PATH or in /usr/bin, /usr/local/bin. ` +
        'On Debian bookworm: add bookworm-backports and `apt-get install -t bookworm-backports valkey-server` ' +
        '(`bash .ci/run` does both); elsewhere install Redis 7.2 or later, or Valkey.',
    );
  }
  return { ...(await spawnLocal(server.binary, opts)), server };
}

async function spawnLocal(binary: string, opts: StartTestRedisOptions): Promise<TestRedis> {
  installExitHook();
  if (opts.port !== undefined) return spawnOnPort(binary, opts.port, opts);
  let lastError: Error | undefined;
  for (let attempt = 0; attempt < MAX_PORT_ATTEMPTS; attempt++) {
    const port = await freePort();
    try {
      return await spawnOnPort(binary, port, opts);
    } catch (err) {
      lastError = err as Error;
      if (!/address already in use|EADDRINUSE/i.test(lastError.message)) throw lastError;
    }
  }
  throw lastError ?? new Error('could not start redis-server');
}

async function spawnOnPort(binary: string, port: number, opts: StartTestRedisOptions): Promise<TestRedis> {
  const ownDir = opts.dir === undefined;
  const dir = opts.dir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'gateway-authz-redis-'));
  if (!ownDir) fs.mkdirSync(dir, { recursive: true });

  const args = [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--protected-mode',
    'no',
    '--save',
    '',
    '--appendonly',
    opts.appendOnly ? 'yes' : 'no',
    '--dir',
    dir,
    '--daemonize',
    'no',
    '--logfile',
    '',
    ...(opts.extraArgs ?? []),
  ];
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const collect = (chunk: Buffer): void => {
    if (output.length < 16_384) output += chunk.toString('utf8');
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  let spawnError: Error | undefined;
  child.on('error', (err) => {
    spawnError = err;
  });

  const tracked: Tracked = { child, watchdog: undefined, tempDir: ownDir ? dir : undefined };
  live.add(tracked);
  if (child.pid !== undefined) tracked.watchdog = startWatchdog(child.pid, tracked.tempDir);

  const cleanup = async (): Promise<void> => {
    await killChild(child);
    try {
      tracked.watchdog?.kill('SIGKILL');
    } catch {
      /* already gone */
    }
    live.delete(tracked);
    child.stdout?.destroy();
    child.stderr?.destroy();
    if (ownDir) fs.rmSync(dir, { recursive: true, force: true });
  };

  try {
    await waitForPing('127.0.0.1', port, Date.now() + READY_DEADLINE_MS, () => {
      if (spawnError) return `failed to spawn ${binary}: ${spawnError.message}`;
      if (exited(child)) {
        return `${binary} exited early (code ${String(child.exitCode)}, signal ${String(child.signalCode)}):\n${output}`;
      }
      return undefined;
    });
  } catch (err) {
    await cleanup();
    const msg = (err as Error).message;
    throw new Error(`${msg}${msg.includes(output) ? '' : `\nredis-server output:\n${output}`}`);
  }

  // Once ready, stop buffering output (the pipes are still drained). The child
  // stays ref'd: a suite that forgets stop() hangs visibly instead of leaking.
  child.stdout?.removeListener('data', collect);
  child.stderr?.removeListener('data', collect);
  child.stdout?.resume();
  child.stderr?.resume();

  let stopping: Promise<void> | undefined;
  return {
    url: `redis://127.0.0.1:${port}`,
    host: '127.0.0.1',
    port,
    pid: child.pid,
    stop: () => (stopping ??= cleanup()),
  };
}

// ---------------------------------------------------------------------------

function formatHost(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Poll with PING until Redis answers or the deadline passes. `fatal()` is
 * checked between attempts; a non-undefined result aborts immediately.
 */
async function waitForPing(host: string, port: number, deadline: number, fatal: () => string | undefined): Promise<void> {
  let lastErr = 'no attempt made';
  for (;;) {
    const reason = fatal();
    if (reason !== undefined) throw new Error(reason);
    const client = new Redis({
      host,
      port,
      lazyConnect: true,
      connectTimeout: 500,
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
      retryStrategy: () => null,
      reconnectOnError: () => false,
      // ioredis arms a disconnectTimeout (default 2 s) timer on disconnect()
      // that is never cleared when the socket had failed to connect; keep it
      // short so it cannot hold the jest worker open.
      disconnectTimeout: 50,
    });
    client.on('error', () => undefined);
    try {
      await client.connect();
      const pong = await client.ping();
      if (pong === 'PONG') return;
      lastErr = `unexpected PING reply ${JSON.stringify(pong)}`;
    } catch (err) {
      lastErr = (err as Error).message;
    } finally {
      client.disconnect();
    }
    if (Date.now() >= deadline) {
      const late = fatal();
      throw new Error(late ?? `redis at ${host}:${port} did not answer PING within ${READY_DEADLINE_MS} ms (last error: ${lastErr})`);
    }
    await sleep(50);
  }
}
