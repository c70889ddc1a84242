/**
 * A load driver that talks gRPC the way Envoy's ext_authz filter does: a
 * few long-lived HTTP/2 connections, many concurrent streams on each, one
 * unary Check per stream with a grpc-timeout. Request frames are encoded
 * beforehand (traffic.ts), so the driver only writes bytes and reads the
 * grpc-status trailer; a sample of responses is decoded and checked against
 * the status code its request class must get.
 */
import { performance } from 'node:perf_hooks';
import { newRequestDecision, pendingRequestDecision, type CircuitBreakerLimits } from './envoy-circuit-breaker';
import { RawH2Connection } from './raw-h2-connection';
import { CHECK_PATH, EXPECTED_STATUS, REQUEST_CLASSES, checkCodec, checkResponseStatusCode, type Traffic } from './traffic';

/** envoy.yaml's ext_authz grpc_service timeout (0.25s): Envoy sends it as grpc-timeout and gives up after it. */
export const ENVOY_CHECK_TIMEOUT_MS = 250;

/** What Envoy's gRPC client sends with each Check. */
export const REQUEST_HEADERS: readonly (readonly [string, string])[] = [
  [':method', 'POST'],
  [':scheme', 'http'],
  [':path', CHECK_PATH],
  [':authority', 'ext_authz'],
  ['content-type', 'application/grpc'],
  ['te', 'trailers'],
  ['grpc-timeout', `${ENVOY_CHECK_TIMEOUT_MS}m`],
  ['user-agent', 'envoy-bench'],
];

/** CheckResponse.status.code of a 503 store_unavailable. */
const UNAVAILABLE = 14;

export interface LatencySummary {
  count: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  p999Ms: number;
  maxMs: number;
}

export interface PhaseResult {
  /** Decisions completed inside the measurement window. */
  decisions: number;
  seconds: number;
  perSecond: number;
  latency: LatencySummary;
  /** RPCs that ended without grpc-status 0, or with a broken stream. */
  errors: number;
  /** Decoded responses whose CheckResponse.status.code was not the one their class must get (503s aside). */
  mismatches: number;
  /** Decoded responses that were 503 store_unavailable (status 14): the Redis deadline passed, e.g. under overload. */
  unavailable: number;
  /** Decoded responses per class, and their mismatches, for the report. */
  checked: Record<string, { checked: number; mismatches: number }>;
  /** Open loop only: scheduled sends dropped because too many were in flight. */
  overloaded: number;
  /** Never sent: refused by the modelled Envoy circuit breaker (not counted in `errors`). */
  refusedByEnvoy: number;
  firstError?: string;
}

/** An open-loop phase past saturation (overloadLoop). Counts are of the Checks scheduled inside the measurement window. */
export interface OverloadResult {
  /** The rate asked for. */
  rate: number;
  /** The measurement window, longer than asked when the driver fell behind its schedule. */
  seconds: number;
  /** Checks sent, and per second from the window's start to the last send: below `rate` when the driver could not keep its schedule. */
  sent: number;
  sentPerSecond: number;
  /** How late the driver sent Checks against their schedule (its own event loop's lag on the shared cores). */
  scheduleLagMs: { p99: number; max: number };
  /** Answered with a CheckResponse (a decision), of which: */
  decided: number;
  /** … 503 store_unavailable (the Redis deadline passed), */
  storeUnavailable: number;
  /** … the wrong answer for the request's class (stops the run). */
  mismatches: number;
  /** Answered with a trailers-only gRPC error: shed (UNAVAILABLE, DEADLINE_EXCEEDED) or another error. */
  grpcErrors: number;
  /**
   * Never sent: refused by the modelled Envoy circuit breaker (max_requests, max_pending_requests), which Envoy
   * answers at once with ext_authz's status_on_error (503). Within the deadline by construction; not in `latency`.
   */
  refusedByEnvoy: number;
  /** Reset streams, lost connections, and Checks with no answer at all. */
  unanswered: number;
  /** Answers (of any kind) that came after the deadline. */
  late: number;
  /** Decisions, not 503, answered within the deadline: the useful work. */
  goodput: number;
  goodputPerSecond: number;
  /** Every answer, from its send. */
  latency: LatencySummary;
  /** Decisions only. */
  decidedLatency: LatencySummary;
  firstError?: string;
}

export interface PhaseHooks {
  /** Called when the measurement window opens and closes (snapshot CPU, Redis stats…). */
  atStart?: () => void | Promise<void>;
  atEnd?: () => void | Promise<void>;
}

interface Completion {
  ok: boolean;
  /** The server answered: a CheckResponse (ok) or a trailers-only gRPC error. Not: a reset stream, a lost connection. */
  answered: boolean;
  /** Not sent: Envoy's circuit breaker (modelled) refused it, as an overflow. */
  refusedByEnvoy?: boolean;
  /** CheckResponse.status.code when read, else -1. */
  status: number;
  error?: string;
}

/** How an answer's CheckResponse.status.code is read: fully decoded (protobufjs, checks the whole message) or peeked. */
type StatusReader = (message: Buffer) => number;
const decodeStatus: StatusReader = (message) => checkCodec().deserialize(message).status?.code ?? 0;

/** How often one Check may be sent again after the server did not process it (GOAWAY), as Envoy would. */
const MAX_RESENDS = 3;

export class H2Driver {
  private next = 0;
  private closing = false;
  /** Connections the server closed (GOAWAY) and that were replaced; closed with the driver. */
  private readonly retired: RawH2Connection[] = [];
  /** Slot → its replacement being connected. */
  private readonly replacing = new Map<number, Promise<void>>();

  /** A connection being added because every open one was full (Envoy's pool growing). */
  private growing: Promise<void> | undefined;

  private constructor(
    private readonly host: string,
    private readonly port: number,
    private readonly connections: RawH2Connection[],
    private readonly maxConnections: number,
    private readonly circuitBreaker: Omit<CircuitBreakerLimits, 'maxConnections'> | undefined,
  ) {
    for (const connection of connections) this.adopt(connection);
  }

  /**
   * `connections` to start with. `maxConnections` above it: like Envoy, a
   * connection is added whenever every open one is at the server's
   * SETTINGS_MAX_CONCURRENT_STREAMS, up to that many; until then the request
   * waits on the least busy one (Envoy's pending queue). Default: a fixed pool.
   * With `circuitBreaker`, Envoy's cluster circuit breaker too (envoy.yaml's
   * ext_authz thresholds): a request past `maxRequests` open streams, or past
   * `maxPendingRequests` waiting, is refused at once, never sent
   * (envoy-circuit-breaker.ts).
   */
  static async connect(
    address: string,
    connections: number,
    maxConnections = connections,
    circuitBreaker?: Omit<CircuitBreakerLimits, 'maxConnections'>,
  ): Promise<H2Driver> {
    const at = address.lastIndexOf(':');
    const [host, port] = [address.slice(0, at), Number(address.slice(at + 1))];
    return new H2Driver(
      host,
      port,
      await Promise.all(Array.from({ length: connections }, () => RawH2Connection.connect(host, port, REQUEST_HEADERS))),
      maxConnections,
      circuitBreaker,
    );
  }

  /** Streams open over the pool (Envoy's max_requests counts these). */
  get openStreams(): number {
    let streams = 0;
    for (const connection of this.connections) streams += connection.streams;
    return streams;
  }

  /** Requests waiting for a stream (Envoy's max_pending_requests counts these). */
  get pendingRequests(): number {
    let pending = 0;
    for (const connection of this.connections) pending += connection.queued;
    return pending;
  }

  private adopt(connection: RawH2Connection): RawH2Connection {
    const breaker = this.circuitBreaker;
    if (breaker) connection.mayStartQueued = () => pendingRequestDecision(breaker, this.openStreams) === 'attach';
    return connection;
  }

  /** Connections open or replaced so far (the pool grows past saturation when allowed to). */
  get connectionCount(): number {
    return this.connections.length;
  }

  close(): void {
    this.closing = true;
    for (const connection of [...this.connections, ...this.retired]) connection.close();
  }

  /**
   * An open connection, round robin. Like Envoy, a connection the server has
   * closed (GOAWAY at GRPC_MAX_CONNECTION_AGE_MS, for one) is replaced by a
   * new one; until that is ready the others carry the load.
   */
  private pick(): RawH2Connection | undefined {
    let leastBusy: RawH2Connection | undefined;
    for (let tries = 0; tries < this.connections.length; tries += 1) {
      const slot = this.next++ % this.connections.length;
      const connection = this.connections[slot]!;
      if (!connection.isOpen) {
        this.replace(slot);
        continue;
      }
      if (connection.hasRoom || this.maxConnections <= this.connections.length) return connection;
      if (!leastBusy || connection.inFlight < leastBusy.inFlight) leastBusy = connection;
    }
    if (leastBusy) this.grow();
    return leastBusy;
  }

  private grow(): void {
    if (this.closing || this.growing || this.connections.length >= this.maxConnections) return;
    this.growing = RawH2Connection.connect(this.host, this.port, REQUEST_HEADERS)
      .then((connection) => this.adopt(connection))
      .then((connection) => {
        if (this.closing) {
          connection.close();
          return;
        }
        // The Checks waiting for a stream go to the new connection, as Envoy's pending requests do.
        for (const other of this.connections) {
          if (connection.room === 0) break;
          if (other.isOpen) other.handOver(Math.min(other.queued, connection.room), connection);
        }
        this.connections.push(connection);
      })
      .catch(() => undefined)
      .finally(() => {
        this.growing = undefined;
        // Still Checks waiting: another connection, as long as the limit allows.
        if (this.connections.some((connection) => connection.isOpen && connection.queued > 0)) this.grow();
      });
  }

  private replace(slot: number): void {
    if (this.closing || this.replacing.has(slot)) return;
    const replaced = RawH2Connection.connect(this.host, this.port, REQUEST_HEADERS).then((connection) => {
      this.adopt(connection);
      if (this.closing) {
        connection.close();
        return;
      }
      this.retired.push(this.connections[slot]!);
      this.connections[slot] = connection;
    });
    this.replacing.set(slot, replaced);
    void replaced.finally(() => this.replacing.delete(slot)).catch(() => undefined);
  }

  /** One Check; with `readStatus`, the answer's CheckResponse status code is read too. */
  private send(frame: Buffer, readStatus: StatusReader | undefined, done: (completion: Completion) => void, resends = 0): void {
    const connection = this.pick();
    if (!connection) {
      const replacements = [...this.replacing.values()];
      if (replacements.length === 0 || resends >= MAX_RESENDS) {
        done({ ok: false, answered: false, status: -1, error: 'no open connection' });
        return;
      }
      void Promise.allSettled(replacements).then(() => this.send(frame, readStatus, done, resends + 1));
      return;
    }
    if (
      this.circuitBreaker &&
      newRequestDecision(this.circuitBreaker, {
        streams: this.openStreams,
        pending: this.pendingRequests,
        connectionHasRoom: connection.hasRoom,
      }) === 'overflow'
    ) {
      done({ ok: false, answered: false, refusedByEnvoy: true, status: -1, error: 'overflow (circuit breaker)' });
      return;
    }
    connection.request(frame, readStatus !== undefined, (completion) => {
      if (!completion.ok && completion.overflow) {
        done({ ok: false, answered: false, refusedByEnvoy: true, status: -1, error: completion.error });
        return;
      }
      if (!completion.ok) {
        // Never processed by the server: send it again on another connection, as Envoy does with a refused stream.
        if (completion.unprocessed && !this.closing && resends < MAX_RESENDS) this.send(frame, readStatus, done, resends + 1);
        else done({ ok: false, answered: completion.answered === true, status: -1, error: completion.error });
        return;
      }
      if (!completion.body || !readStatus) {
        done({ ok: true, answered: true, status: -1 });
        return;
      }
      try {
        done({ ok: true, answered: true, status: readStatus(completion.body.subarray(5)) });
      } catch (error) {
        done({ ok: false, answered: true, status: -1, error: `undecodable response: ${(error as Error).message}` });
      }
    });
  }

  /**
   * Closed loop: `concurrency` Checks always in flight; each answer sends
   * the next request. Measures what the server sustains at saturation.
   */
  closedLoop(options: {
    traffic: Traffic;
    concurrency: number;
    warmupMs: number;
    durationMs: number;
    decodeEvery: number;
    hooks?: PhaseHooks;
    stats?: PhaseStats;
  }): Promise<PhaseResult> {
    const { traffic, concurrency, decodeEvery } = options;
    const stats = options.stats ?? new PhaseStats();
    let position = 0;
    let measuring = false;
    let stopped = false;
    let inFlight = 0;
    let windowStart = 0;
    let windowEnd = 0;
    let resolveDrained: () => void = () => undefined;
    const drained = new Promise<void>((resolve) => (resolveDrained = resolve));

    const issue = () => {
      const index = position++ % traffic.frames.length;
      const cls = traffic.classes[index]!;
      const decode = position % decodeEvery === 0;
      const sentAt = performance.now();
      inFlight += 1;
      this.send(traffic.frames[index]!, decode ? decodeStatus : undefined, (completion) => {
        inFlight -= 1;
        if (measuring) stats.record(performance.now() - sentAt, cls, completion);
        if (!stopped) issue();
        else if (inFlight === 0) resolveDrained();
      });
    };
    for (let i = 0; i < concurrency; i += 1) issue();

    return new Promise<PhaseResult>((resolve, reject) => {
      setTimeout(
        () =>
          void (async () => {
            try {
              await options.hooks?.atStart?.();
              windowStart = performance.now();
              measuring = true;
              setTimeout(
                () =>
                  void (async () => {
                    try {
                      measuring = false;
                      windowEnd = performance.now();
                      stopped = true;
                      await options.hooks?.atEnd?.();
                      if (inFlight > 0) await drained;
                      resolve(stats.result((windowEnd - windowStart) / 1000));
                    } catch (error) {
                      reject(error);
                    }
                  })(),
                options.durationMs,
              );
            } catch (error) {
              reject(error);
            }
          })(),
        options.warmupMs,
      );
    });
  }

  /**
   * Open loop: requests are sent on a fixed schedule (`rate` per second)
   * whether or not earlier ones were answered, and each latency is measured
   * from the request's SCHEDULED time, so a stall counts for every request
   * it delays (no coordinated omission).
   */
  openLoop(options: {
    traffic: Traffic;
    rate: number;
    warmupMs: number;
    durationMs: number;
    decodeEvery: number;
    maxInFlight: number;
    stats?: PhaseStats;
  }): Promise<PhaseResult> {
    const { traffic, rate, decodeEvery } = options;
    const stats = options.stats ?? new PhaseStats();
    const interval = 1000 / rate;
    const start = performance.now();
    const measureFrom = start + options.warmupMs;
    const measureTo = measureFrom + options.durationMs;
    let position = 0;
    let nextAt = start;
    let inFlight = 0;

    return new Promise((resolve) => {
      const finishWhenDrained = () => {
        if (inFlight === 0) resolve(stats.result(options.durationMs / 1000));
      };
      const tick = () => {
        const now = performance.now();
        while (nextAt <= now && nextAt < measureTo) {
          const scheduledAt = nextAt;
          nextAt += interval;
          if (inFlight >= options.maxInFlight) {
            if (scheduledAt >= measureFrom) stats.overloaded += 1;
            continue;
          }
          const index = position++ % traffic.frames.length;
          const cls = traffic.classes[index]!;
          inFlight += 1;
          this.send(traffic.frames[index]!, position % decodeEvery === 0 ? decodeStatus : undefined, (completion) => {
            inFlight -= 1;
            if (scheduledAt >= measureFrom) stats.record(performance.now() - scheduledAt, cls, completion);
            if (nextAt >= measureTo) finishWhenDrained();
          });
        }
        if (nextAt < measureTo) setTimeout(tick, 1);
        else finishWhenDrained();
      };
      tick();
    });
  }

  /**
   * Open loop past saturation, judged the way Envoy would: each Check is
   * timed from its send, every answer is read (its status peeked, so 503s
   * and wrong answers are counted exactly), and an answer counts only if it
   * comes within `answerWithinMs`. A shed Check (a trailers-only gRPC error,
   * UNAVAILABLE) is an answer; a reset stream, a lost connection, or no answer
   * by `answerWithinMs` + 1 s after the last send is not. A Check the modelled
   * Envoy circuit breaker refused (`connect`'s `circuitBreaker`) is Envoy's own
   * 503 at once: counted apart (`refusedByEnvoy`), never late. The driver's own lag
   * behind its schedule is measured too, and the rate it really sent.
   */
  overloadLoop(options: {
    traffic: Traffic;
    rate: number;
    warmupMs: number;
    durationMs: number;
    answerWithinMs: number;
    /** Filled with the latency of every right decision (503s aside), late ones included: for quantiles over all Checks sent. */
    rightAnswerLatencies?: number[];
  }): Promise<OverloadResult> {
    const { traffic, rate, answerWithinMs } = options;
    const interval = 1000 / rate;
    const start = performance.now();
    const measureFrom = start + options.warmupMs;
    const measureTo = measureFrom + options.durationMs;
    const latencies: number[] = [];
    const decidedLatencies: number[] = [];
    const lags: number[] = [];
    const counts = {
      sent: 0,
      decided: 0,
      storeUnavailable: 0,
      mismatches: 0,
      grpcErrors: 0,
      refusedByEnvoy: 0,
      unanswered: 0,
      late: 0,
      goodput: 0,
    };
    let firstError: string | undefined;
    let position = 0;
    let nextAt = start;
    let measuredInFlight = 0;
    let lastSentAt = measureTo;
    let finished = false;

    return new Promise((resolve) => {
      let drainDeadline: NodeJS.Timeout | undefined;
      const finish = () => {
        if (finished) return;
        finished = true;
        if (drainDeadline) clearTimeout(drainDeadline);
        // Still unanswered: Envoy gave up on them long ago.
        counts.unanswered += measuredInFlight;
        const lagSummary = summarize(lags);
        // A driver that fell behind catches up in bursts and sends its last Check after the window: its rates are over that longer span.
        const span = (Math.max(measureTo, lastSentAt) - measureFrom) / 1000;
        resolve({
          rate,
          seconds: span,
          ...counts,
          sentPerSecond: counts.sent / span,
          goodputPerSecond: counts.goodput / span,
          scheduleLagMs: { p99: lagSummary.p99Ms, max: lagSummary.maxMs },
          latency: summarize(latencies),
          decidedLatency: summarize(decidedLatencies),
          ...(firstError ? { firstError } : {}),
        });
      };
      const record = (latencyMs: number, cls: number, completion: Completion) => {
        if (completion.refusedByEnvoy) {
          // Envoy's local 503: at once, so within the deadline; the gateway never saw it.
          counts.refusedByEnvoy += 1;
          return;
        }
        if (!completion.answered) {
          counts.unanswered += 1;
          firstError ??= completion.error;
          return;
        }
        latencies.push(latencyMs);
        const late = latencyMs > answerWithinMs;
        if (late) counts.late += 1;
        if (!completion.ok) {
          if (completion.error?.startsWith('undecodable')) {
            counts.mismatches += 1;
            firstError ??= completion.error;
          } else counts.grpcErrors += 1;
          return;
        }
        counts.decided += 1;
        decidedLatencies.push(latencyMs);
        const expected = EXPECTED_STATUS[REQUEST_CLASSES[cls]!];
        if (completion.status === UNAVAILABLE && expected !== UNAVAILABLE) counts.storeUnavailable += 1;
        else if (completion.status !== expected) {
          counts.mismatches += 1;
          firstError ??= `a ${REQUEST_CLASSES[cls]} Check answered status ${completion.status}, expected ${expected}`;
        } else {
          options.rightAnswerLatencies?.push(latencyMs);
          if (!late) counts.goodput += 1;
        }
      };
      const tick = () => {
        if (finished) return;
        const now = performance.now();
        while (nextAt <= now && nextAt < measureTo) {
          const scheduledAt = nextAt;
          nextAt += interval;
          const measured = scheduledAt >= measureFrom;
          const index = position++ % traffic.frames.length;
          const cls = traffic.classes[index]!;
          const sentAt = performance.now();
          if (measured) {
            counts.sent += 1;
            measuredInFlight += 1;
            lags.push(sentAt - scheduledAt);
            lastSentAt = sentAt;
          }
          this.send(traffic.frames[index]!, checkResponseStatusCode, (completion) => {
            if (!measured || finished) return;
            measuredInFlight -= 1;
            record(performance.now() - sentAt, cls, completion);
            if (nextAt >= measureTo && measuredInFlight === 0) finish();
          });
        }
        if (nextAt < measureTo) setTimeout(tick, 1);
        else if (measuredInFlight === 0) finish();
        else drainDeadline = setTimeout(finish, answerWithinMs + 1000);
      };
      tick();
    });
  }

  /** Every frame once, `concurrency` at a time, every response decoded and checked. */
  async sendAll(traffic: Traffic, concurrency: number): Promise<PhaseResult> {
    const stats = new PhaseStats();
    const started = performance.now();
    let position = 0;
    await new Promise<void>((resolve) => {
      let inFlight = 0;
      const issue = () => {
        if (position >= traffic.frames.length) {
          if (inFlight === 0) resolve();
          return;
        }
        const index = position++;
        const cls = traffic.classes[index]!;
        const sentAt = performance.now();
        inFlight += 1;
        this.send(traffic.frames[index]!, decodeStatus, (completion) => {
          inFlight -= 1;
          stats.record(performance.now() - sentAt, cls, completion);
          issue();
        });
      };
      for (let i = 0; i < Math.min(concurrency, traffic.frames.length); i += 1) issue();
      if (traffic.frames.length === 0) resolve();
    });
    return stats.result((performance.now() - started) / 1000);
  }
}

/** Latencies and outcomes of one phase; several rounds of the same phase record into one. */
export class PhaseStats {
  private latencies: number[] = [];
  /** Open loop: sends skipped because too many were in flight (the server fell behind). */
  overloaded = 0;
  private decisions = 0;
  private errors = 0;
  private refusedByEnvoy = 0;
  private mismatches = 0;
  private unavailable = 0;
  private firstError: string | undefined;
  private readonly checked = REQUEST_CLASSES.map(() => ({ checked: 0, mismatches: 0 }));

  get count(): number {
    return this.decisions;
  }

  record(latencyMs: number, cls: number, completion: Completion): void {
    if (completion.refusedByEnvoy) {
      this.refusedByEnvoy += 1;
      return;
    }
    if (!completion.ok) {
      this.errors += 1;
      this.firstError ??= completion.error;
      return;
    }
    this.decisions += 1;
    this.latencies.push(latencyMs);
    if (completion.status >= 0) {
      const name = REQUEST_CLASSES[cls]!;
      const entry = this.checked[cls]!;
      entry.checked += 1;
      if (completion.status === UNAVAILABLE && EXPECTED_STATUS[name] !== UNAVAILABLE) {
        this.unavailable += 1;
      } else if (completion.status !== EXPECTED_STATUS[name]) {
        entry.mismatches += 1;
        this.mismatches += 1;
      }
    }
  }

  result(seconds: number): PhaseResult {
    return {
      decisions: this.decisions,
      seconds,
      perSecond: this.decisions / seconds,
      latency: summarize(this.latencies),
      errors: this.errors,
      mismatches: this.mismatches,
      unavailable: this.unavailable,
      checked: Object.fromEntries(REQUEST_CLASSES.map((name, index) => [name, this.checked[index]!])),
      overloaded: this.overloaded,
      refusedByEnvoy: this.refusedByEnvoy,
      ...(this.firstError ? { firstError: this.firstError } : {}),
    };
  }
}

export function summarize(latencies: number[]): LatencySummary {
  const sorted = Float64Array.from(latencies).sort();
  const at = (q: number) => (sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!);
  return {
    count: sorted.length,
    p50Ms: at(0.5),
    p90Ms: at(0.9),
    p99Ms: at(0.99),
    p999Ms: at(0.999),
    maxMs: sorted.length === 0 ? 0 : sorted[sorted.length - 1]!,
  };
}
