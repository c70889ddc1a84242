/** What `npm run bench` and `npm run soak` set up alike: the Redis, the gateway's settings, the key pools, the checks. */
import * as fs from 'node:fs';
import * as path from 'node:path';
import Redis from 'ioredis';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import type { PhaseResult } from './h2-driver';
import { REPO_ROOT, startGateway, type ServerUnderTest } from './processes';
import type { SeededKeys } from './seed';

export const BENCH_DIR = path.join(REPO_ROOT, '.bench');

/**
 * REDIS_URL when set (it must be empty, or `flush` must be asked for, since
 * the run seeds and counts commands), else a redis-server spawned on a free port.
 */
export async function openDisposableRedis(flush: boolean, what: string): Promise<TestRedis> {
  const url = process.env.REDIS_URL;
  if (url) {
    const probe = new Redis(url, { disconnectTimeout: 50 });
    try {
      const size = await probe.dbsize();
      if (size > 0 && !flush) {
        throw new Error(`REDIS_URL holds ${size} keys; the ${what} needs a disposable Redis: pass --flush to FLUSHALL it first`);
      }
      if (flush) await probe.flushall();
    } finally {
      probe.disconnect();
    }
    return { url, host: '', port: 0, stop: async () => undefined };
  }
  return startTestRedis();
}

/**
 * The gateway's CONFIG_FILE: limits far above what the load sends, so only
 * the rate-limited keys are refused; two windows per scope, as in the
 * built-in default plan, so the script does the same work.
 */
/**
 * --credit-holds: one price for every model (the traffic's models are charged the default), so a hold has money in it, as on a
 * prepaid account with a price table. Typical of a large model's list prices, in micro-dollars per million tokens.
 */
const BENCH_PRICING = {
  models: [],
  default: { input: 3_000_000, output: 15_000_000, webSearchCall: 10_000 },
  unpricedModels: 'charge-default',
};

export function writeGatewayConfig(name: string, options: { tokenBudgets?: boolean; pricing?: boolean } = {}): string {
  const configFile = path.join(BENCH_DIR, name);
  const huge = [
    { limit: 1_000_000_000, window: '1m' },
    { limit: 1_000_000_000, window: '1d' },
  ];
  // --token-budgets: two budgets per scope too, as large as budgets go (never exhausted: the bench sends no usage).
  const hugeBudgets = [
    { tokens: 60_000_000, window: '1m' },
    { tokens: 1_000_000_000, window: '1d' },
  ];
  fs.mkdirSync(BENCH_DIR, { recursive: true });
  fs.writeFileSync(
    configFile,
    JSON.stringify({
      defaultPlan: {
        key: huge,
        account: huge,
        ...(options.tokenBudgets ? { tokenBudgets: { key: hugeBudgets, account: hugeBudgets } } : {}),
      },
      ...(options.pricing ? { pricing: BENCH_PRICING } : {}),
    }),
  );
  return configFile;
}

/** `--env NAME=VALUE` flags (repeatable) as a settings object for the gateway process. */
export function envAssignments(entries: readonly string[], flag: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const entry of entries) {
    const at = entry.indexOf('=');
    if (at <= 0) throw new Error(`--${flag} takes NAME=VALUE, got '${entry}'`);
    env[entry.slice(0, at)] = entry.slice(at + 1);
  }
  return env;
}

/** The V8 heap cap the Dockerfile sets (ENV NODE_OPTIONS): the gateway is measured as it ships. */
export const SHIPPED_NODE_OPTIONS = '--max-old-space-size=192';

/**
 * glibc's malloc arenas, as the Dockerfile, `npm start` and `npm run dev` set them (ENV MALLOC_ARENA_MAX): the main
 * thread's and one for V8's helper threads, not one per thread (docs/operations/runtime.md).
 */
export const SHIPPED_MALLOC_ARENA_MAX = '2';

/** The settings both scripts give the gateway on top of REDIS_URL and CONFIG_FILE. */
export const GATEWAY_DEFAULT_ENV: Readonly<Record<string, string>> = Object.freeze({
  LOG_LEVEL: 'info',
  DECISION_LOG_SAMPLE: '0.01',
  NODE_OPTIONS: SHIPPED_NODE_OPTIONS,
  MALLOC_ARENA_MAX: SHIPPED_MALLOC_ARENA_MAX,
});

/** The real gateway as the bench runs it (production's node flags, GATEWAY_DEFAULT_ENV, writeGatewayConfig's limits), logging to .bench/`logName`. */
export function startBenchGateway(
  redisUrl: string,
  logName: string,
  env: Record<string, string>,
  nodeArgs: readonly string[],
  distDir?: string,
): Promise<ServerUnderTest> {
  return startGateway(
    { REDIS_URL: redisUrl, CONFIG_FILE: writeGatewayConfig('gateway-config.json'), ...GATEWAY_DEFAULT_ENV, ...env },
    path.join(BENCH_DIR, logName),
    nodeArgs,
    distDir,
  );
}

/** `count` valid keys spread evenly over the seeded ones (so over many accounts). */
export function activePool(seeded: SeededKeys, count: number): string[] {
  const active = Math.min(count, seeded.kept.length);
  const stride = seeded.kept.length / active;
  return Array.from({ length: active }, (_, i) => seeded.kept[Math.floor(i * stride)]!);
}

/**
 * Wrong answers always stop the run. Failed RPCs (a gRPC error answer such
 * as a shed Check, or Envoy's 250 ms deadline passed) and 503s (the Redis
 * deadline passed) are what overload looks like: they stop it only where the
 * load is light.
 */
export function expectClean(what: string, result: PhaseResult, overloadPossible = false): void {
  if (((result.errors > 0 || result.unavailable > 0) && !overloadPossible) || result.mismatches > 0) {
    throw new Error(
      `${what}: ${result.errors} failed RPCs, ${result.unavailable} 503s, ${result.mismatches} wrong answers (${result.firstError ?? 'see checked'}): ${JSON.stringify(result.checked)}`,
    );
  }
}

/** Rows → a markdown table, first column left-aligned, the others right-aligned. */
export function markdownTable(rows: string[][]): string[] {
  const widths = rows[0]!.map((_, column) => Math.max(3, ...rows.map((row) => (row[column] ?? '').length)));
  const line = (row: string[]) =>
    `| ${row.map((cell, column) => (column === 0 ? cell.padEnd(widths[column]!) : cell.padStart(widths[column]!))).join(' | ')} |`;
  return [
    line(rows[0]!),
    `|${widths.map((width, column) => (column === 0 ? `:${'-'.repeat(width + 1)}` : `${'-'.repeat(width + 1)}:`)).join('|')}|`,
    ...rows.slice(1).map(line),
  ];
}
