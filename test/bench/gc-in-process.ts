/**
 * What the Check handler promotes to the old generation, in process: the
 * handler with in-memory stubs for the store (answering on the next
 * event-loop turn, as a Redis reply would), the key cache filled to its
 * default bound, the bench's mixed traffic, 32 Checks in flight. It runs
 * itself again under `--trace-gc-nvp` and reads the promoted bytes of every
 * scavenge in the measured window.
 *
 * Unlike latency, bytes promoted per decision hardly depend on how busy the
 * machine is (the stubs answer after one loop turn, however long that takes),
 * so one change can be measured on a shared machine:
 *
 *   node .bench/build/test/bench/gc-in-process.js [--dist DIR] [--decisions N] [--node-options '...'] [--env NAME=VALUE]
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import pino from 'pino';
import { envAssignments, SHIPPED_NODE_OPTIONS } from './setup';
import { malformedKeys, mixedTraffic, unknownKeys } from './traffic';
import { displayPrefixOf, generateCustomerKey, hashCustomerKey } from '../../src/keys/customer-key';
import { loadBuildModules, type CheckPathModules } from './build-modules';
import { SHIPPED_NODE_ARGS } from './processes';

type Modules = CheckPathModules &
  typeof import('../../src/check/authorization-server') &
  typeof import('../../src/check/check-request-decoding') &
  typeof import('../../src/check/check-response-encoding') &
  Partial<typeof import('../../src/check/check-request')>;

function load(dist: string): Modules {
  return loadBuildModules<Modules>(dist, [
    'check/authorization-server.js',
    'check/check-request-decoding.js',
    'check/check-response-encoding.js',
    'check/check-request.js',
  ]);
}

const CACHED_KEYS = 200_000;
const ACTIVE_KEYS = 10_000;
const IN_FLIGHT = 32;
const WARM_UP_DECISIONS = 50_000;

interface Window {
  fromMs: number;
  toMs: number;
  decisions: number;
  cpuMicros: number;
  heapUsedMb: number;
}

async function child(dist: string, decisions: number, env: Record<string, string>): Promise<void> {
  const m = load(dist);
  const later = <T>(value: T) => new Promise<T>((resolve) => setImmediate(() => resolve(value)));
  const active = Array.from({ length: ACTIVE_KEYS }, () => generateCustomerKey('live'));
  const limited = Array.from({ length: 20 }, () => generateCustomerKey('live'));
  const unknown = unknownKeys(2000);
  const unknownHashes = new Set(unknown.map(hashCustomerKey));
  // Ids derived from the hash, so the stubs hold no table of their own in the heap being measured.
  const idsOf = (hash: string) =>
    unknownHashes.has(hash) ? null : { keyId: `key_${hash.slice(0, 16)}`, accountId: `acct-${hash.slice(16, 21)}` };
  const limitedKeyIds = new Set(limited.map((key) => idsOf(hashCustomerKey(key))!.keyId));
  // The pipeline refuses a decision on another key's record (its display prefix), so the stub answers with each key's
  // own: the one table the stubs hold, 10,020 short strings.
  const prefixOfKeyId = new Map([...active, ...limited].map((key) => [idsOf(hashCustomerKey(key))!.keyId, displayPrefixOf(key)]));
  const traffic = mixedTraffic({ valid: active, malformed: malformedKeys(400), unknown, rateLimited: limited }, 40_000);

  const loaded = m.loadSettings({ CONFIG_FILE: '', DECISION_LOG_SAMPLE: '0.01', ...env });
  if (!loaded.ok) throw new Error(loaded.problems.join('; '));
  const settings = loaded.settings;
  const bodies = traffic.frames.map((frame) => frame.subarray(5));
  const logger = m.createLogger('info', pino.destination({ dest: '/dev/null', sync: true }));
  const metrics = new m.Metrics();
  const lastUsed = new m.LastUsedRecorder({ recordLastUsed: () => later(undefined) }, { now: () => Date.now() }, logger, 5000);
  lastUsed.start();
  const keyIndex = new m.CachedKeyIndex(
    { resolveKeyHash: (hash: string) => later(idsOf(hash)) },
    { maxEntries: CACHED_KEYS, negativeTtlMs: 2000, maxNegativeEntries: 100_000, onLookup: (outcome) => metrics.observeKeyCache(outcome) },
  );
  const tightest = { scope: 'key' as const, limit: 600, windowSeconds: 60, remaining: 599, resetMs: 100 };
  const authorizer = {
    authorize: (request: { keyId: string }) =>
      later(
        limitedKeyIds.has(request.keyId)
          ? {
              kind: 'rate_limited' as const,
              prefix: prefixOfKeyId.get(request.keyId)!,
              hit: { ...tightest, remaining: 0, retryAfterMs: 26_000 },
            }
          : { kind: 'allow' as const, prefix: prefixOfKeyId.get(request.keyId)!, environment: 'live' as const, tightest },
      ),
  };
  const handler = m.createCheckHandler({
    settings: settings.pipeline,
    keyIndex,
    authorizer,
    metrics,
    clock: { now: () => Date.now() },
    logger,
    storeFailureMode: 'deny',
    lastUsed,
    decisionLogSample: settings.decisionLogSample,
  });

  for (let filled = 0; filled < CACHED_KEYS - ACTIVE_KEYS; filled += 1000) {
    await Promise.all(Array.from({ length: 1000 }, () => keyIndex.resolveKeyHash(randomBytes(32).toString('hex'))));
  }
  for (const key of active) await keyIndex.resolveKeyHash(hashCustomerKey(key));

  // The headers the server decodes, in a build that selects them (as startAuthorizationServer does).
  const selection = m.checkRequestHeaderSelection?.(settings.pipeline.headerNames);
  let next = 0;
  const run = (count: number) =>
    new Promise<void>((resolve, reject) => {
      let issued = 0;
      let done = 0;
      const one = () => {
        if (issued >= count) return;
        issued += 1;
        // As the service's Check method does (authorization-server.ts): the request read by its decoder, the answer written by its encoder.
        const request = m.decodeCheckRequest(bodies[next++ % bodies.length]!, selection);
        handler(request, Infinity, (error, response) => {
          if (error) return reject(new Error('the Check handler answered an error', { cause: error }));
          if (!m.encodeCheckResponseFrame(response!)) return reject(new Error('an answer the service would encode with protobufjs'));
          done += 1;
          if (done === count) resolve();
          else setImmediate(one);
        });
      };
      for (let i = 0; i < IN_FLIGHT; i += 1) one();
    });
  await run(WARM_UP_DECISIONS);
  const cpu = process.cpuUsage();
  const fromMs = performance.now();
  await run(decisions);
  const toMs = performance.now();
  const used = process.cpuUsage(cpu);
  const window: Window = {
    fromMs,
    toMs,
    decisions,
    cpuMicros: used.user + used.system,
    heapUsedMb: process.memoryUsage().heapUsed / 2 ** 20,
  };
  process.stderr.write(`WINDOW ${JSON.stringify(window)}\n`);
  await lastUsed.stop();
}

/** `--trace-gc-nvp` lines: `[pid:isolate]  <ms since start> ms: pause=… gc=s|mc … promoted=…`. */
function summarize(trace: string, window: Window): Record<string, number> {
  let promoted = 0;
  const scavengePauses: number[] = [];
  const markCompactPauses: number[] = [];
  for (const line of trace.split('\n')) {
    const match = /^\[\d+:0x[0-9a-f]+\]\s+(\d+) ms: (pause=.*)$/.exec(line);
    if (!match || Number(match[1]) < window.fromMs || Number(match[1]) > window.toMs) continue;
    const field = (name: string) => new RegExp(`(?:^| )${name}=(\\S+)`).exec(match[2]!)?.[1];
    if (field('gc') === 's') {
      scavengePauses.push(Number(field('pause')));
      promoted += Number(field('promoted') ?? 0);
    } else if (field('gc') === 'mc') {
      markCompactPauses.push(Number(field('pause')));
    }
  }
  const per100k = 100_000 / window.decisions;
  return {
    decisions: window.decisions,
    promotedBytesPerDecision: Math.round(promoted / window.decisions),
    scavengesPer100kDecisions: Number((scavengePauses.length * per100k).toFixed(1)),
    scavengePauseMedianMs: scavengePauses.sort((a, b) => a - b)[Math.floor(scavengePauses.length / 2)] ?? 0,
    markCompactsPer100kDecisions: Number((markCompactPauses.length * per100k).toFixed(1)),
    markCompactPauseMaxMs: Math.max(0, ...markCompactPauses),
    cpuMicrosPerDecision: Number((window.cpuMicros / window.decisions).toFixed(1)),
    heapUsedMb: Number(window.heapUsedMb.toFixed(1)),
  };
}

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      dist: { type: 'string', default: path.join(__dirname, '..', '..', 'src') },
      decisions: { type: 'string', default: '200000' },
      'node-options': { type: 'string', default: SHIPPED_NODE_OPTIONS },
      env: { type: 'string', multiple: true, default: [] },
    },
  });
  const dist = path.resolve(values.dist);
  const env = envAssignments(values.env, 'env');
  if (positionals[0] === 'child') return child(dist, Number(values.decisions), env);
  const result = spawnSync(
    process.execPath,
    [
      ...values['node-options'].split(' ').filter(Boolean),
      ...SHIPPED_NODE_ARGS,
      '--trace-gc-nvp',
      __filename,
      'child',
      `--dist=${dist}`,
      `--decisions=${values.decisions}`,
      ...values.env.map((entry) => `--env=${entry}`),
    ],
    { encoding: 'utf8', maxBuffer: 1 << 30 },
  );
  const windowLine = /^WINDOW (.*)$/m.exec(result.stderr)?.[1];
  if (result.status !== 0 || !windowLine) throw new Error(`the measured process failed (${result.status}): ${result.stderr.slice(-2000)}`);
  process.stdout.write(
    `${JSON.stringify({ dist: values.dist, nodeOptions: values['node-options'], env, ...summarize(result.stdout, JSON.parse(windowLine) as Window) })}\n`,
  );
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
