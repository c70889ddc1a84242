/**
 * `npm run bench -- --attacks`: the HTTP/2 attacks of issue 33, each against
 * the real gateway (on Redis, as the main bench starts it) and against the
 * no-op grpc-js server on node:http2 (nghttp2) as the anchor, in the same run.
 *
 * Per vector and server: a normal client on its own connection sends valid
 * Checks at NORMAL_RATE, open loop (Envoy's traffic does not wait for the
 * answers), for BASELINE_MS (no attack), then during the attack (from
 * ATTACK_CONNECTIONS connections, attacker.ts in a child process), then for
 * AFTER_MS once the attacker's connections are gone. The server under test
 * has a CPU of its own (cpu-affinity.ts, as the tail phase); the normal
 * client, Redis and the attacker share the other, the attacker at a lower
 * priority (ATTACKER_NICENESS) so that it takes what they leave and does not
 * slow the Checks' own round trip: what is measured is the server.
 */
import { fork, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { ATTACK_VECTORS, vectorById, type AttackVector } from './attack-vectors';
import { AFTER_ATTACK_READ_MS, type AttackConnectionResult, type AttackGo, type AttackPrepare, type AttackResult } from './attacker';
import { MEASURED_NICENESS, serverCpuPlan, setNicenessOfTree, tailCpuSplit } from './cpu-affinity';
import { ENVOY_CHECK_TIMEOUT_MS, H2Driver, summarize } from './h2-driver';
import { machineInfo, sampleMaxRss, waitUntilIdle } from './proc-stats';
import { startNoopServer, type ServerUnderTest } from './processes';
import { expectClean, markdownTable, openDisposableRedis, startBenchGateway } from './setup';
import { seedKeys } from './seed';
import { uniformTraffic, type Traffic } from './traffic';

/** The normal client's Checks per second: a steady trickle whose p99 rests on 1,000 Checks over a 5 s attack. */
export const NORMAL_RATE = 200;
const BASELINE_MS = 1_500;
/**
 * As long as the attack: the p99 of 2 s (400 Checks) was its fourth-slowest Check, so one 20 ms stall of the shared
 * machine anywhere in the window read as the server's recovery; over 5 s it takes ten.
 */
const AFTER_MS = 5_000;
/**
 * Unmeasured, once per server before the first vector: the gateway's key cache and optimized code, and the bench's
 * own (the first vector's windows read 2-5 × the later ones' after a 2 s warm-up).
 */
const WARMUP_MS = 5_000;
export const ATTACK_CONNECTIONS = 4;
export const DEFAULT_ATTACK_MS = 5_000;
const ATTACKER_NICENESS = 10;
/** Valid keys the normal client cycles through (all cached after the warm-up). */
const NORMAL_KEYS = 100;

/** Issue 33's goals. */
const TARGET_P99_DURING_MS = 50;
const TARGET_AFTER_FACTOR = 2;
const TARGET_RSS_MB = 250;
/**
 * Ours against the anchor, when either is over TARGET_P99_DURING_MS: within 25 %. At 200 Checks/s a p99 is the
 * tenth-slowest of a thousand, and under the same attack on the shared cores it moves by about that much from run
 * to run; a difference inside it is not one this bench can see.
 */
const ANCHOR_TOLERANCE = 1.25;

export interface AttackPhaseOptions {
  attackMs: number;
  vectors: readonly AttackVector[];
  flush: boolean;
  json: string;
  gatewayEnv: Record<string, string>;
  nodeArgs: string[];
}

/** The normal client's Checks in one window. Quantiles are over every Check sent: one that failed counts as slowest. */
interface NormalChecks {
  sent: number;
  /** Not answered with the right decision within Envoy's deadline: a gRPC error, a 503, a reset, no answer, or late. */
  failed: number;
  p50Ms: number;
  p99Ms: number;
  /** How late the normal client itself sent its Checks (its own event loop on the shared core): the most, in ms. */
  clientLagMaxMs: number;
}

interface AttackRun {
  vector: string;
  server: string;
  baseline: NormalChecks;
  during: NormalChecks;
  after: NormalChecks;
  rssPeakMb: number;
  attack: {
    frames: number;
    streams: number;
    megabytes: number;
    /**
     * Of ATTACK_CONNECTIONS: closed by the server during the attack or in the moment after it, by a GOAWAY (the
     * connection takes no new stream: a server may leave the socket to the client to close) or by closing the socket.
     */
    closedByServer: number;
    /** Of those, the sockets the server closed, and when, in ms from the attack's start. */
    socketClosedAtMs: number[];
    goawayCodes: number[];
  };
  /** The server process was gone after the vector (restarted for the next one). */
  serverDied?: true;
}

interface Target {
  vector: string;
  name: string;
  met: boolean;
  detail: string;
}

const log = (text: string) => process.stderr.write(`${text}\n`);

interface Contender {
  label: string;
  server: ServerUnderTest;
  start: () => Promise<ServerUnderTest>;
}

export async function runAttackPhase(options: AttackPhaseOptions): Promise<void> {
  const started = Date.now();
  const redis = await openDisposableRedis(options.flush, 'attack phase');
  const contenders: Contender[] = [];
  try {
    const seeded = await seedKeys(redis.url, { keys: 1_000, keysPerAccount: 10, rateLimitedKeys: 1, keep: NORMAL_KEYS }, log);
    const traffic = uniformTraffic('valid', seeded.kept);
    const startOurs = () => startBenchGateway(redis.url, 'gateway-attacks.log', options.gatewayEnv, options.nodeArgs);
    const startAnchor = async () => (await startNoopServer('grpc-js'))!;
    contenders.push({ label: 'gateway-authz', server: await startOurs(), start: startOurs });
    contenders.push({ label: 'no-op grpc-js (node:http2)', server: await startAnchor(), start: startAnchor });

    const split = tailCpuSplit(os.availableParallelism());
    const measured = [process.pid, ...(redis.pid ? [redis.pid] : []), ...contenders.map((entry) => entry.server.pid)];
    const cpus = serverCpuPlan(split, measured);
    const raised = raiseMeasured(measured);
    log(
      `attacks: ${options.vectors.length} vectors × ${contenders.length} servers, ${ATTACK_CONNECTIONS} attacking connections for ` +
        `${options.attackMs / 1000} s each; a normal client at ${NORMAL_RATE} Checks/s, ${BASELINE_MS / 1000} s before, during, ` +
        `${AFTER_MS / 1000} s after; ` +
        (split ? `the server under test alone on CPU ${split.server}, the rest on ${split.others}` : 'one CPU: every process shares it') +
        (raised ? `; the servers, Redis and the normal client at niceness ${MEASURED_NICENESS}` : ''),
    );
    for (const entry of contenders) {
      const driver = await H2Driver.connect(entry.server.grpcAddress, 1);
      try {
        // A 503 (the Redis deadline) on a busy machine only leaves a key uncached; a wrong answer stops the run.
        expectClean(`${entry.label}: the first Checks`, await driver.sendAll(traffic, 8), true);
        await cpus.onServerCpu(entry.server.pid, () => normalChecks(driver, traffic, WARMUP_MS));
      } finally {
        driver.close();
      }
    }

    const runs: AttackRun[] = [];
    /** Per server, every Check of every no-attack window: the yardstick of "after". */
    const noAttack = new Map(contenders.map((entry) => [entry.label, [] as number[]]));
    for (const [index, vector] of options.vectors.entries()) {
      for (const entry of contenders) {
        // What one vector queued must not spill into the next: the other contender, still working off its attack,
        // would run beside this one's normal client (seen: grpc-js busy for seconds after a reset flood).
        for (const other of contenders) {
          if (!(await waitUntilIdle(other.server.pid, 5_000))) log(`    note: ${other.label} was still busy 5 s after the previous vector`);
        }
        const run = await cpus.onServerCpu(entry.server.pid, () =>
          attackRun(entry, vector, traffic, options.attackMs, noAttack.get(entry.label)!),
        );
        log(`  ${index + 1}. ${vector.id}, ${entry.label}: ${summaryLine(run)}`);
        runs.push(run);
        if (!isAlive(entry.server.pid)) {
          run.serverDied = true;
          log(`    the server died; restarting it for the next vector`);
          entry.server = await entry.start();
          cpus.adopt(entry.server.pid);
          if (raised) raiseMeasured([entry.server.pid]);
        }
      }
    }
    cpus.release();

    const [ours, anchor] = contenders.map((entry) => entry.label) as [string, string];
    const noAttackP99Ms = Object.fromEntries([...noAttack].map(([label, latencies]) => [label, summarize(latencies).p99Ms]));
    const targets = evaluateAttackTargets(runs, options.vectors, ours, anchor, noAttackP99Ms[ours]!);
    const report = {
      date: new Date().toISOString(),
      command: `npm run bench -- ${process.argv.slice(2).join(' ')}`,
      machine: machineInfo(),
      normalClient: {
        rate: NORMAL_RATE,
        baselineMs: BASELINE_MS,
        afterMs: AFTER_MS,
        answerWithinMs: ENVOY_CHECK_TIMEOUT_MS,
        quantiles: 'over every Check sent; null: the quantile fell on a Check not answered with its decision within answerWithinMs',
      },
      attack: { connections: ATTACK_CONNECTIONS, durationMs: options.attackMs, reconnects: false, niceness: ATTACKER_NICENESS },
      measuredNiceness: raised ? MEASURED_NICENESS : 0,
      ...(split ? { cpus: split } : {}),
      vectors: options.vectors.map(({ id, title, abuse }) => ({ id, title, abuse })),
      noAttackP99Ms,
      runs,
      targets,
      elapsedSeconds: (Date.now() - started) / 1000,
    };
    fs.mkdirSync(path.dirname(options.json), { recursive: true });
    fs.writeFileSync(options.json, `${JSON.stringify(report, null, 2)}\n`);
    printAttackReport(runs, targets, options, noAttackP99Ms, (text) => process.stdout.write(`${text}\n`));
    log(`\nJSON written to ${path.relative(process.cwd(), options.json) || options.json}; ${report.elapsedSeconds.toFixed(0)} s in all`);
  } finally {
    for (const entry of contenders) await entry.server.stop();
    await redis.stop();
  }
}

async function attackRun(
  entry: Contender,
  vector: AttackVector,
  traffic: Traffic,
  attackMs: number,
  noAttackLatencies: number[],
): Promise<AttackRun> {
  const { server } = entry;
  const client = await H2Driver.connect(server.grpcAddress, 1);
  try {
    collectOwnGarbage();
    // The attacker connects while the baseline runs: its connections are idle until told to go.
    const attacker = startAttacker(vector, server.grpcAddress, traffic.frames[0]!);
    const baseline = await normalChecks(client, traffic, BASELINE_MS, noAttackLatencies);
    await attacker.ready;
    const rss = sampleMaxRss(server.pid, 100);
    attacker.go(attackMs);
    const during = await normalChecks(client, traffic, attackMs);
    const result = await attacker.result;
    const rssPeakMb = rss.stop() / 2 ** 20;
    const after = await normalChecks(client, traffic, AFTER_MS);
    return { vector: vector.id, server: entry.label, baseline, during, after, rssPeakMb, attack: attackSummary(result.connections) };
  } finally {
    client.close();
  }
}

async function normalChecks(driver: H2Driver, traffic: Traffic, durationMs: number, keep?: number[]): Promise<NormalChecks> {
  const latencies: number[] = [];
  const result = await driver.overloadLoop({
    traffic,
    rate: NORMAL_RATE,
    warmupMs: 0,
    durationMs,
    answerWithinMs: ENVOY_CHECK_TIMEOUT_MS,
    rightAnswerLatencies: latencies,
  });
  if (result.mismatches > 0) throw new Error(`a normal Check got a wrong answer: ${result.firstError}`);
  for (let i = latencies.length; i < result.sent; i += 1) latencies.push(Number.POSITIVE_INFINITY);
  keep?.push(...latencies);
  const summary = summarize(latencies);
  return {
    sent: result.sent,
    failed: result.sent - result.goodput,
    p50Ms: summary.p50Ms,
    p99Ms: summary.p99Ms,
    clientLagMaxMs: result.scheduleLagMs.max,
  };
}

function attackSummary(connections: AttackConnectionResult[]): AttackRun['attack'] {
  const closed = connections.filter((connection) => connection.closedAtMs !== undefined);
  return {
    closedByServer: connections.filter((connection) => connection.closedAtMs !== undefined || connection.goaway).length,
    frames: connections.reduce((sum, connection) => sum + connection.frames, 0),
    streams: connections.reduce((sum, connection) => sum + connection.streams, 0),
    megabytes: connections.reduce((sum, connection) => sum + connection.bytes, 0) / 2 ** 20,
    socketClosedAtMs: closed.map((connection) => connection.closedAtMs!),
    goawayCodes: connections.flatMap((connection) => (connection.goaway ? [connection.goaway.code] : [])),
  };
}

/**
 * A full collection of this process's heap before a vector's windows: the normal client runs here, and an
 * incremental marking step of this process's own (seen: 16 ms, with --trace-gc, at the same point of every run on
 * Node 24) read as the server's latency in the 5 s after a vector. At 200 Checks/s no other is due within a vector.
 */
const collectOwnGarbage: () => void = (() => {
  v8.setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
})();

/** The measured processes at MEASURED_NICENESS; false, with a note, where this user may not raise a priority. */
function raiseMeasured(pids: readonly number[]): boolean {
  for (const pid of pids) {
    const failure = setNicenessOfTree(pid, MEASURED_NICENESS);
    if (failure) {
      log(`  note: ${failure}; the measured processes share the CPU with the rest of the machine at equal priority`);
      return false;
    }
  }
  return true;
}

interface RunningAttacker {
  ready: Promise<void>;
  go(durationMs: number): void;
  result: Promise<AttackResult>;
}

/** attacker.js (compiled next to this file) in a child process, connected and waiting for `go`. */
function startAttacker(vector: AttackVector, address: string, checkFrame: Buffer): RunningAttacker {
  const child: ChildProcess = fork(path.join(__dirname, 'attacker.js'), [], {
    execArgv: [],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  // It inherits this process's CPU (off the server's); lower its priority there.
  os.setPriority(child.pid!, ATTACKER_NICENESS);
  const exited = new Promise<never>((_, reject) =>
    child.once('exit', (code) => reject(new Error(`the attacker (${vector.id}) exited with ${code}`))),
  );
  exited.catch(() => undefined);
  const message = <T>(type: string) =>
    Promise.race([
      new Promise<T>((resolve) => {
        const listener = (received: { type: string }) => {
          if (received.type !== type) return;
          child.off('message', listener);
          resolve(received as T);
        };
        child.on('message', listener);
      }),
      exited,
    ]);
  const prepare: AttackPrepare = {
    type: 'prepare',
    vector: vector.id,
    address,
    connections: ATTACK_CONNECTIONS,
    checkFrame: checkFrame.toString('base64'),
  };
  child.send(prepare);
  return {
    // Its threads started at this process's niceness; by now all of them exist.
    ready: message<unknown>('ready').then(() => void setNicenessOfTree(child.pid!, ATTACKER_NICENESS)),
    go: (durationMs) => child.send({ type: 'go', durationMs } satisfies AttackGo),
    result: message<AttackResult>('result'),
  };
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const ms = (value: number) => (Number.isFinite(value) ? value.toFixed(value < 10 ? 1 : 0) : 'failed');

function summaryLine(run: AttackRun): string {
  return (
    `p99 ${ms(run.baseline.p99Ms)} → ${ms(run.during.p99Ms)} → ${ms(run.after.p99Ms)} ms, ${run.during.failed + run.after.failed} failed, ` +
    `client late ≤ ${ms(run.baseline.clientLagMaxMs)} → ${ms(run.during.clientLagMaxMs)} → ${ms(run.after.clientLagMaxMs)} ms, ` +
    `RSS ${run.rssPeakMb.toFixed(0)} MB, ${run.attack.streams} streams / ${run.attack.frames} frames sent, ` +
    `${run.attack.closedByServer} of ${ATTACK_CONNECTIONS} closed${run.attack.goawayCodes.length ? ` (GOAWAY ${[...new Set(run.attack.goawayCodes)].join(', ')})` : ''}`
  );
}

export function evaluateAttackTargets(
  runs: readonly AttackRun[],
  vectors: readonly AttackVector[],
  ours: string,
  anchor: string,
  /**
   * Our no-attack p99 over every no-attack window of the run (12 × 300 Checks), not the one window before the vector:
   * at 200 Checks/s a window's p99 is its third-slowest Check, and one stall of the shared machine moves it twofold.
   */
  noAttackP99Ms: number,
): Target[] {
  const targets: Target[] = [];
  for (const vector of vectors) {
    const our = runs.find((run) => run.vector === vector.id && run.server === ours);
    const their = runs.find((run) => run.vector === vector.id && run.server === anchor);
    if (!our) continue;
    const add = (name: string, met: boolean, detail: string) => targets.push({ vector: vector.id, name, met, detail });
    add(
      `normal p99 during the attack ≤ ${TARGET_P99_DURING_MS} ms`,
      our.during.p99Ms <= TARGET_P99_DURING_MS,
      `${ms(our.during.p99Ms)} ms`,
    );
    add(
      `normal p99 after it ≤ ${TARGET_AFTER_FACTOR} × the no-attack p99`,
      // A no-attack p99 that failed is no yardstick (the machine stalled): not met.
      Number.isFinite(noAttackP99Ms) && our.after.p99Ms <= TARGET_AFTER_FACTOR * noAttackP99Ms,
      `${ms(our.after.p99Ms)} ms against ${ms(noAttackP99Ms)} ms`,
    );
    add(
      `RSS ≤ ${TARGET_RSS_MB} MB`,
      our.rssPeakMb <= TARGET_RSS_MB && !our.serverDied,
      our.serverDied ? 'the server died' : `${our.rssPeakMb.toFixed(0)} MB`,
    );
    if (vector.abuse) {
      add(
        "the attacker's connections closed",
        our.attack.closedByServer === ATTACK_CONNECTIONS,
        `${our.attack.closedByServer} of ${ATTACK_CONNECTIONS}${our.attack.goawayCodes.length ? `, GOAWAY ${[...new Set(our.attack.goawayCodes)].join(', ')}` : ''}`,
      );
    }
    if (their) {
      const bothWithin = our.during.p99Ms <= TARGET_P99_DURING_MS && their.during.p99Ms <= TARGET_P99_DURING_MS;
      // Both p99s failed: the one that failed fewer Checks did better.
      const bothFailed = !Number.isFinite(our.during.p99Ms) && !Number.isFinite(their.during.p99Ms);
      add(
        'at least as good as the anchor',
        bothWithin ||
          (bothFailed
            ? our.during.failed <= ANCHOR_TOLERANCE * their.during.failed
            : our.during.p99Ms <= ANCHOR_TOLERANCE * their.during.p99Ms),
        `p99 ${ms(our.during.p99Ms)} ms against ${ms(their.during.p99Ms)} ms` +
          (bothFailed ? `; ${our.during.failed} Checks failed against ${their.during.failed}` : ''),
      );
    }
  }
  return targets;
}

function printAttackReport(
  runs: readonly AttackRun[],
  targets: readonly Target[],
  options: AttackPhaseOptions,
  noAttackP99Ms: Record<string, number>,
  print: (text: string) => void,
): void {
  print(
    `\n## HTTP/2 attacks (${ATTACK_CONNECTIONS} connections × ${options.attackMs / 1000} s; normal Checks at ${NORMAL_RATE}/s on their own connection)\n`,
  );
  print('Latencies in ms over every normal Check sent; a Check not answered with its decision within 250 ms counts as slowest');
  print('("failed" where a quantile falls on one; the "failed" column: such Checks during + after the attack).');
  print('The attacker does not reconnect: "closed" counts the connections the server closed (a GOAWAY, or the socket closed:');
  print(
    `"sockets"); a vector that never reads sees a GOAWAY only if it was among the bytes read in the ${AFTER_ATTACK_READ_MS} ms after the attack.`,
  );
  print(
    `No-attack p99 over every window before a vector: ${Object.entries(noAttackP99Ms)
      .map(([label, p99]) => `${label} ${ms(p99)} ms`)
      .join(', ')} (the yardstick of "after").\n`,
  );
  const rows = [
    [
      'vector',
      'server',
      'no-attack p99',
      'during p50',
      'during p99',
      'after p99',
      'failed',
      'RSS MB',
      'streams',
      'frames',
      'closed',
      'sockets',
      'GOAWAY',
    ],
  ];
  for (const run of runs) {
    const number = options.vectors.findIndex((vector) => vector.id === run.vector) + 1;
    rows.push([
      `${number}. ${run.vector}`,
      run.server,
      ms(run.baseline.p99Ms),
      ms(run.during.p50Ms),
      ms(run.during.p99Ms),
      ms(run.after.p99Ms),
      `${run.during.failed}+${run.after.failed}`,
      `${run.rssPeakMb.toFixed(0)}${run.serverDied ? ' (died)' : ''}`,
      String(run.attack.streams),
      String(run.attack.frames),
      `${run.attack.closedByServer}/${ATTACK_CONNECTIONS}`,
      String(run.attack.socketClosedAtMs.length),
      [...new Set(run.attack.goawayCodes)].map((code) => `0x${code.toString(16)}`).join(' ') || '–',
    ]);
  }
  for (const line of markdownTable(rows)) print(line);
  print(
    `\nTargets (gateway-authz; "closed" only for protocol abuse: ${options.vectors
      .filter((vector) => vector.abuse)
      .map((vector) => vector.id)
      .join(', ')}):`,
  );
  for (const target of targets) print(`  ${target.met ? 'MET ' : 'MISS'}  ${target.vector}: ${target.name} (${target.detail})`);
  const missed = targets.filter((target) => !target.met).length;
  print(`\n${targets.length - missed} of ${targets.length} met, ${missed} missed.`);
}

/** --attack-vectors: the ids asked for, in ATTACK_VECTORS's order; all when none. */
export function selectVectors(ids: readonly string[]): AttackVector[] {
  // An unknown id throws, naming the vectors there are.
  for (const id of ids) vectorById(id);
  return ATTACK_VECTORS.filter((vector) => ids.length === 0 || ids.includes(vector.id));
}
