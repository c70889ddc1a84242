/**
 * The Check handler in process, without the network: what one decision
 * costs in gateway-authz's own code (decoding the CheckRequest, deciding,
 * logging, counting, encoding the CheckResponse), with Redis replaced by
 * in-memory stubs. Precise enough (±2%) to measure one hot-path change,
 * where the end-to-end bench on a shared 2-core machine is ±10%.
 *
 *   node .bench/build/test/bench/hot-path.js [--dist DIR] [--seconds S] [--traffic mixed|valid|tail] [--restricted-keys]
 *
 * --restricted-keys: every valid key carries the restrictions of `npm run bench -- --restricted-keys`
 * (RESTRICTIONS_ALLOWING_THE_TRAFFIC), cached as after the bench's warm-up, among RESTRICTED_KEYS_CACHED restricted
 * keys in all; the stub store answers as Redis does once they are confirmed. What a Check of such a key adds in
 * process: the cache lookup, the restriction step, what the store port is handed (not the RESP encoding, see
 * redis-check-path.ts and redis-callgrind.ts --restricted-keys for Redis's side).
 *
 * --dist loads the service from another build (e.g. a copy of an earlier
 * dist/), so a change is measured before and after on the same traffic.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import pino from 'pino';
import {
  envoyShapedRequest,
  frameOf,
  malformedKeys,
  mixedTraffic,
  RESTRICTIONS_ALLOWING_THE_TRAFFIC,
  uniformTraffic,
  unknownKeys,
} from './traffic';
import { generateCustomerKey, hashCustomerKey, displayPrefixOf } from '../../src/keys/customer-key';
import { loadBuildModules, type CheckPathModules } from './build-modules';
import type { HeaderNames } from '../../src/check/routes/header-names';

/** As many restricted keys as the bench's --restricted-keys gateway caches (its 200,000 keys). */
const RESTRICTED_KEYS_CACHED = 200_000;

type Modules = CheckPathModules &
  Partial<typeof import('../../src/check/restrictions-cache')> &
  Partial<typeof import('../../src/check/pipeline/restriction-step')> &
  typeof import('../../src/check/authorization-server') &
  typeof import('../../src/check/check-handler') &
  Partial<typeof import('../../src/check/check-request')> &
  typeof import('../../src/check/proto-loading');

function load(dist: string): Modules {
  const files = ['check/authorization-server.js', 'check/proto-loading.js', 'check/check-request.js'];
  const restrictions = ['check/restrictions-cache.js', 'check/pipeline/restriction-step.js'];
  return loadBuildModules<Modules>(dist, [...files, ...restrictions.filter((file) => fs.existsSync(path.join(dist, file)))]);
}

interface Contender {
  dist: string;
  run: (durationMs: number) => Promise<number>;
  stop: () => Promise<void>;
  decisions: number;
  wallMs: number;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      dist: { type: 'string', multiple: true, default: [path.join(__dirname, '..', '..', 'src')] },
      seconds: { type: 'string', default: '6' },
      log: { type: 'string', default: '/dev/null' },
      env: { type: 'string', multiple: true, default: [] },
      traffic: { type: 'string', default: 'mixed' },
      'restricted-keys': { type: 'boolean', default: false },
    },
  });
  const seconds = Number(values.seconds);
  if (!['mixed', 'valid', 'tail'].includes(values.traffic)) throw new Error(`--traffic: mixed, valid or tail, not ${values.traffic}`);

  // Keys: 2000 valid (cached), 20 rate-limited, plus malformed and unknown ones: the bench's mix.
  const valid = Array.from({ length: 2000 }, () => generateCustomerKey('live'));
  const limited = Array.from({ length: 20 }, () => generateCustomerKey('live'));
  const ids = new Map<string, { keyId: string; accountId: string; prefix: string; limited: boolean }>();
  [...valid, ...limited].forEach((key, index) =>
    ids.set(hashCustomerKey(key), {
      keyId: `key_${index}`,
      accountId: `acct_${index % 200}`,
      prefix: displayPrefixOf(key),
      limited: index >= valid.length,
    }),
  );
  const byKeyId = new Map([...ids.values()].map((entry) => [entry.keyId, entry]));
  // --traffic: the bench's mix (default), valid keys only in the three styles, or the tail phase's one request (h2load's body).
  const traffic =
    values.traffic === 'valid'
      ? uniformTraffic('valid', valid)
      : values.traffic === 'tail'
        ? { frames: [frameOf(envoyShapedRequest(valid[0]!, 0))] }
        : mixedTraffic({ valid, malformed: malformedKeys(100), unknown: unknownKeys(200), rateLimited: limited }, 20_000);

  // --env NAME=VALUE: settings for every contender (e.g. DECISION_LOG_SAMPLE); a dist given as DIR::NAME=VALUE gets its own.
  const baseEnv = Object.fromEntries(values.env.map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)]));
  const contenders: Contender[] = [];
  for (const spec of values.dist) {
    const [dir, ...envParts] = spec.split('::');
    const env = {
      ...baseEnv,
      ...Object.fromEntries(envParts.map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)])),
    };
    contenders.push(await contenderFor(spec, path.resolve(dir!), env, traffic.frames, ids, byKeyId, values.log, values['restricted-keys']));
  }

  for (const entry of contenders) await entry.run(1000); // warm-up: JIT and caches
  const sliceMs = 250;
  for (let elapsed = 0; elapsed < seconds * 1000; elapsed += sliceMs) {
    for (const entry of contenders) {
      const started = performance.now();
      entry.decisions += await entry.run(sliceMs);
      entry.wallMs += performance.now() - started;
    }
  }
  const first = contenders[0]!;
  for (const entry of contenders) {
    const us = (entry.wallMs * 1000) / entry.decisions;
    const ratio = us / ((first.wallMs * 1000) / first.decisions);
    process.stdout.write(
      `${JSON.stringify({ dist: entry.dist, decisions: entry.decisions, usPerDecision: Number(us.toFixed(2)), vsFirst: Number(ratio.toFixed(3)) })}\n`,
    );
    await entry.stop();
  }
}

async function contenderFor(
  label: string,
  dist: string,
  env: Record<string, string>,
  frames: Buffer[],
  ids: Map<string, { keyId: string; accountId: string; prefix: string; limited: boolean }>,
  byKeyId: Map<string, { keyId: string; accountId: string; prefix: string; limited: boolean }>,
  logFile: string,
  restrictedKeys: boolean,
): Promise<Contender> {
  const m = load(dist);
  /** With --restricted-keys, restricted keys the traffic does not send, cached as the bench's gateway holds them. */
  const others = new Set<string>();
  const loaded = m.loadSettings({ CONFIG_FILE: '', ...env });
  if (!loaded.ok) throw new Error(loaded.problems.join('; '));
  const settings = loaded.settings as typeof loaded.settings & { decisionLogSample?: number };
  const bodies = frames.map((frame) => frame.subarray(5));

  // Synchronous writes, as pino's default stdout destination does in production.
  const logger = m.createLogger('info', pino.destination({ dest: logFile, sync: true }));
  const metrics = new m.Metrics();
  const lastUsed = new m.LastUsedRecorder({ recordLastUsed: async () => undefined }, { now: () => Date.now() }, logger, 5000);
  const keyIndex = new m.CachedKeyIndex(
    {
      resolveKeyHash: async (hash: string) => {
        const entry = ids.get(hash);
        if (entry) return { keyId: entry.keyId, accountId: entry.accountId };
        return others.has(hash) ? { keyId: 'key_other', accountId: 'acct_other' } : null;
      },
    },
    { maxEntries: 200_000, negativeTtlMs: 2000, maxNegativeEntries: 100_000, onLookup: (outcome) => metrics.observeKeyCache(outcome) },
  );
  const restrictions = restrictedKeys ? await restrictionsCacheFor(m, keyIndex, ids, others) : undefined;
  const tightest = { scope: 'key' as const, limit: 600, windowSeconds: 60, remaining: 599, resetMs: 100 };
  const authorizer = {
    authorize: async (request: { keyId: string }) => {
      const entry = byKeyId.get(request.keyId)!;
      return entry.limited
        ? { kind: 'rate_limited' as const, prefix: entry.prefix, hit: { ...tightest, remaining: 0, retryAfterMs: 26_000 } }
        : { kind: 'allow' as const, prefix: entry.prefix, environment: 'live' as const, tightest };
    },
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
    ...(restrictions ? { restrictions } : {}),
    ...(settings.decisionLogSample !== undefined ? { decisionLogSample: settings.decisionLogSample } : {}),
  } as never);

  let index = 0;
  /** One Check, request bytes → the serialized CheckResponse, through the build's own codec; `done` when answered. */
  const checkOnce = oneCheck(m, handler, settings.pipeline.headerNames);
  /** The whole handler, request bytes → serialized CheckResponse, 64 calls in flight, for `durationMs`. */
  const run = async (durationMs: number) => {
    let done = 0;
    const end = performance.now() + durationMs;
    while (performance.now() < end) {
      await new Promise<void>((resolve) => {
        let pending = 64;
        for (let i = 0; i < 64; i += 1) {
          checkOnce(bodies[index++ % bodies.length]!, () => {
            if (--pending === 0) resolve();
          });
        }
      });
      done += 64;
    }
    return done;
  };
  return { dist: label, run, stop: () => lastUsed.stop(), decisions: 0, wallMs: 0 };
}

/**
 * RESTRICTED_KEYS_CACHED restricted keys cached as after the bench's warm-up: the traffic's, then others. In the key
 * cache's entries (this build's RestrictionsCache over a CachedKeyIndex that attaches), or by key id in a build
 * before that.
 */
async function restrictionsCacheFor(
  m: Modules,
  keyIndex: InstanceType<Modules['CachedKeyIndex']>,
  ids: Map<string, { keyId: string }>,
  others: Set<string>,
): Promise<unknown> {
  if (!m.RestrictionsCache || !m.effectiveRestrictions) throw new Error('this build has no key restrictions');
  const form = m.effectiveRestrictions(JSON.stringify(RESTRICTIONS_ALLOWING_THE_TRAFFIC), '');
  if (typeof (keyIndex as { attach?: unknown }).attach !== 'function') {
    const byKeyId = new (m.RestrictionsCache as unknown as new (maxEntries: number) => { set(keyId: string, value: unknown): void })(
      RESTRICTED_KEYS_CACHED,
    );
    for (let i = 0; i < RESTRICTED_KEYS_CACHED; i += 1) byKeyId.set(`key_${i}`, form);
    return byKeyId;
  }
  const cache = new m.RestrictionsCache(keyIndex);
  for (let i = 0; others.size < RESTRICTED_KEYS_CACHED - ids.size; i += 1) others.add(hashCustomerKey(`other-${i}`));
  for (const hash of [...ids.keys(), ...others]) {
    await keyIndex.resolveKeyHash(hash);
    cache.set(hash, form);
  }
  return cache;
}

type Handler = ReturnType<Modules['createCheckHandler']>;
interface Codec {
  requestDeserialize(bytes: Buffer): unknown;
  responseSerialize(value: unknown): Buffer;
}
interface FakeCall {
  deadlineMs: number;
  finished: boolean;
  respond(frame: Buffer): void;
  fail(error: unknown): void;
}

/**
 * One Check the way the build's server runs it: through its Check method (this transport: decode, handler,
 * encode into the frame), or, in a build from before it, through the grpc-js service definition's codec.
 */
function oneCheck(m: Modules, handler: Handler, headerNames: HeaderNames): (bytes: Buffer, done: () => void) => void {
  const named = m as unknown as Record<string, unknown>;
  if (typeof named.checkMethod === 'function') {
    // The headers the server decodes, in a build that selects them (as startAuthorizationServer does).
    const selection = m.checkRequestHeaderSelection?.(headerNames);
    const method = (
      named.checkMethod as (h: Handler, logger: unknown, selection: unknown) => { handle(bytes: Buffer, call: FakeCall): void }
    )(handler, { error: () => undefined }, selection);
    return (bytes, done) =>
      method.handle(bytes, {
        deadlineMs: Infinity,
        finished: false,
        respond: () => done(),
        fail: (error) => {
          throw new Error('the Check handler answered an error', { cause: error });
        },
      });
  }
  const raw = m.loadAuthorizationService().service as unknown as { Check: Codec };
  const fast = (named.withFastCheckCodec ?? named.withFastResponseEncoding) as ((service: unknown) => { Check: Codec }) | undefined;
  const check = (fast ? fast(raw) : raw).Check;
  const legacy = handler as unknown as (call: { request: unknown }, callback: (error: unknown, response: unknown) => void) => void;
  return (bytes, done) =>
    legacy({ request: check.requestDeserialize(bytes) }, (error, response) => {
      if (error) throw new Error('the Check handler answered an error', { cause: error });
      check.responseSerialize(response);
      done();
    });
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
