import { performance } from 'node:perf_hooks';
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import type { Decision } from '../check/decision';
import type { AdminAuthMetrics, AuthLimitKind } from '../admin/admin-auth-limits';
import type { Authorizer, CarriesDecisionClock, CheckPathOperation, CheckPathTimer, KeyIndex, TimesCheckPath } from '../check/ports';
import type { ShedReason } from '../check/check-admission';
import { BatchedCounts, type BatchedCount } from './batched-counts';
import { ExtProcMetrics } from '../metering/ext-proc-metrics';
import { HotPathHistogram, type HotPathHistogramChild } from './hot-path-histogram';
import type { UsageRecord } from '../metering/usage-record';
import type { UsageRecorderMetrics, UsageRecordOutcome } from '../metering/usage-recorder';

export interface MetricsOptions {
  /** The `model` label of the usage metrics (bounded: see modelMetricLabel); default: always `other`. */
  usageModelLabel?: (model: string | undefined) => string;
}

/**
 * Prometheus metrics, on a registry of their own (no global state, so
 * several servers in one test process do not collide). Labels carry only
 * bounded values: style, family, result, reason code, operation. Never an
 * account, key or prefix.
 */
export class Metrics implements AdminAuthMetrics, UsageRecorderMetrics {
  readonly registry = new Registry();
  /** The usage processor's (ext_proc) metrics, on the same registry. */
  readonly extProc = new ExtProcMetrics(this.registry);

  /** The per-Check counts (decisions, key cache lookups), added to their counters when the registry is read. */
  private readonly checkPathCounts = new BatchedCounts();

  private readonly decisions = new Counter({
    name: 'gateway_authz_decisions_total',
    help: 'Check decisions by client style, route family, result and reason code.',
    labelNames: ['style', 'family', 'result', 'reason'] as const,
    registers: [this.registry],
    collect: () => this.checkPathCounts.flush(),
  });

  private readonly decisionSeconds = new HotPathHistogram({
    name: 'gateway_authz_decision_duration_seconds',
    help: 'Time from CheckRequest to CheckResponse, by result.',
    labelNames: ['result'] as const,
    buckets: [0.0002, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25],
    registers: [this.registry],
  });

  private readonly checkLatencySeconds = new HotPathHistogram({
    name: 'gateway_authz_check_latency_seconds',
    help:
      'Time from a Check reaching the process to its answer being handed to the transport, counting the event-loop delay ' +
      '(GC pauses, long callbacks) it waited out before its handler ran. Every decision; shed Checks are not decisions.',
    // Finer around 5 ms, the server-side p99 objective, so its percentile is read to the millisecond.
    buckets: [0.0005, 0.001, 0.0025, 0.004, 0.005, 0.006, 0.0075, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
    registers: [this.registry],
  });

  private readonly shedChecks = new Counter({
    name: 'gateway_authz_checks_shed_total',
    help:
      'Checks answered without a decision: over_capacity (MAX_CHECKS_IN_FLIGHT reached, gRPC UNAVAILABLE) or ' +
      'past_deadline (the caller had given up before the Check started, gRPC DEADLINE_EXCEEDED).',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });

  private readonly redisSeconds = new HotPathHistogram({
    name: 'gateway_authz_store_duration_seconds',
    help: 'Round-trip time of store calls on the Check path, by operation.',
    labelNames: ['operation'] as const,
    buckets: [0.0002, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1],
    registers: [this.registry],
  });

  private readonly redisErrors = new Counter({
    name: 'gateway_authz_store_errors_total',
    help: 'Store calls on the Check path that failed or timed out, by operation.',
    labelNames: ['operation'] as const,
    registers: [this.registry],
  });

  private readonly keyCache = new Counter({
    name: 'gateway_authz_key_cache_lookups_total',
    help: 'Key index lookups by outcome: hit, negative_hit (known unknown) or miss (went to the store).',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
    collect: () => this.checkPathCounts.flush(),
  });

  private readonly storeIdentityMismatches = new Counter({
    name: 'gateway_authz_store_identity_mismatches_total',
    help:
      "Checks whose store decision named another key's record than the one presented (a reply matched to the wrong " +
      'request), answered store_unavailable instead. Any count is a defect in the store channel.',
    registers: [this.registry],
  });

  private readonly adminAuthFailures = new Counter({
    name: 'gateway_authz_admin_auth_failures_total',
    help: 'Admin API requests with a wrong admin token (each one checked, then answered 401).',
    registers: [this.registry],
  });

  private readonly adminAuthRefusals = new Counter({
    name: 'gateway_authz_admin_auth_refusals_total',
    help: 'Admin API requests refused with 429 without their token being checked, by the limit reached: address or total.',
    labelNames: ['limit'] as const,
    registers: [this.registry],
  });

  /**
   * Labelled children, looked up once per label combination: prom-client
   * otherwise sorts and joins the label names and values on every call.
   * The combinations are few (styles × families × reasons), so the maps stay small.
   */
  private readonly decisionCounters = new Map<string, BatchedCount>();
  private readonly decisionHistograms = new Map<string, HotPathHistogramChild>();
  private readonly keyCacheCounters = new Map<string, BatchedCount>();

  private readonly shedCounters = new Map<ShedReason, Counter.Internal>();

  private readonly usageRecords = new Counter({
    name: 'gateway_authz_usage_records_total',
    help:
      'Usage records by what became of them: applied, applied_late (after failed attempts), duplicate, account_not_found, ' +
      'invalid, dropped_buffer_full, dropped_at_shutdown, unstreamed_at_shutdown, unconfirmed_at_shutdown (not confirmed durable).',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  private readonly usageTokens = new Counter({
    name: 'gateway_authz_usage_tokens_total',
    help: 'Tokens of applied usage records by client style, route family, model (price table pattern, else other) and kind.',
    labelNames: ['style', 'family', 'model', 'kind'] as const,
    registers: [this.registry],
  });

  private readonly usageSpend = new Counter({
    name: 'gateway_authz_usage_spend_minor_units_total',
    help: 'Cost (integer minor units) of applied usage records by client style, route family and model (price table pattern, else other).',
    labelNames: ['style', 'family', 'model'] as const,
    registers: [this.registry],
  });

  private readonly usageModelLabel: (model: string | undefined) => string;

  constructor(options: MetricsOptions = {}) {
    collectDefaultMetrics({ register: this.registry, prefix: 'gateway_authz_' });
    this.usageModelLabel = options.usageModelLabel ?? (() => 'other');
  }

  /** Reports `buffered()` as a gauge at each scrape. */
  watchUsageBuffer(buffered: () => number): void {
    new Gauge({
      name: 'gateway_authz_usage_buffered_records',
      help: 'Usage records waiting in this process to be applied (bounded by USAGE_BUFFER_MAX_RECORDS).',
      registers: [this.registry],
      collect() {
        this.set(buffered());
      },
    });
  }

  observeUsageRecord(outcome: UsageRecordOutcome): void {
    this.usageRecords.inc({ outcome });
  }

  observeUsageApplied(record: UsageRecord): void {
    const { style, family, tokens } = record;
    const model = this.usageModelLabel(record.model);
    for (const [kind, count] of [
      ['input', tokens.inputTokens],
      ['output', tokens.outputTokens],
      ['cached_input', tokens.cachedInputTokens],
      ['cache_creation', tokens.cacheCreationTokens],
    ] as const) {
      if (count > 0) this.usageTokens.inc({ style, family, model, kind }, count);
    }
    if (record.costMinorUnits > 0) this.usageSpend.inc({ style, family, model }, record.costMinorUnits);
  }

  /** A store that carries a decision clock: its uncertainty as a gauge at each scrape (none while it has none). Others: nothing. */
  watchDecisionClock(store: object): void {
    if (!carriesDecisionClock(store)) return;
    new Gauge({
      name: 'gateway_authz_redis_clock_uncertainty_seconds',
      help: "How far the Redis clock this process decides on can be from Redis's TIME: half the round trip of the sample in use.",
      registers: [this.registry],
      collect() {
        const us = store.decisionClockUncertaintyUs();
        if (us !== undefined) this.set(us / 1_000_000);
      },
    });
  }

  /** Reports the gRPC server's count of connections closed ENHANCE_YOUR_CALM, by budget, at each scrape. */
  watchHttp2BudgetClosures(closures: Readonly<Record<string, number>>): void {
    new Counter({
      name: 'gateway_authz_http2_budget_closures_total',
      help:
        'gRPC connections closed with GOAWAY(ENHANCE_YOUR_CALM) for overrunning an attack budget: client_resets ' +
        '(mostly reset streams), local_resets (streams refused or reset for the client’s fault), empty_frames, control_frames (PINGs and SETTINGS), ' +
        'header_block (a header block too large or in too many CONTINUATION frames). See docs/design/http2-attack-budgets.md.',
      labelNames: ['budget'] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const [budget, count] of Object.entries(closures)) this.inc({ budget }, count);
      },
    });
  }

  /** Reports `checksInFlight()` as a gauge at each scrape (read then, not on the hot path). */
  watchChecksInFlight(checksInFlight: () => number): void {
    new Gauge({
      name: 'gateway_authz_checks_in_flight',
      help: 'Checks being decided right now (admitted, not yet answered); at most MAX_CHECKS_IN_FLIGHT per process.',
      registers: [this.registry],
      collect() {
        this.set(checksInFlight());
      },
    });
  }

  private readonly checkLatency = this.checkLatencySeconds.labels({});

  observeCheckLatency(seconds: number): void {
    this.checkLatency.observe(seconds);
  }

  observeStoreIdentityMismatch(): void {
    this.storeIdentityMismatches.inc();
  }

  observeShed(reason: ShedReason): void {
    let counter = this.shedCounters.get(reason);
    if (!counter) {
      counter = this.shedChecks.labels({ reason });
      this.shedCounters.set(reason, counter);
    }
    counter.inc();
  }

  observeDecision(decision: Decision, seconds: number): void {
    const result = decision.kind;
    const reason = decision.kind === 'deny' ? decision.reason : 'allowed';
    const key = `${decision.route.style} ${decision.route.family} ${reason}`;
    let counter = this.decisionCounters.get(key);
    if (!counter) {
      counter = this.checkPathCounts.countFor(
        this.decisions.labels({ style: decision.route.style, family: decision.route.family, result, reason }),
      );
      this.decisionCounters.set(key, counter);
    }
    counter.inc();
    let histogram = this.decisionHistograms.get(result);
    if (!histogram) {
      histogram = this.decisionSeconds.labels({ result });
      this.decisionHistograms.set(result, histogram);
    }
    histogram.observe(seconds);
  }

  observeKeyCache(outcome: 'hit' | 'negative_hit' | 'miss'): void {
    let counter = this.keyCacheCounters.get(outcome);
    if (!counter) {
      counter = this.checkPathCounts.countFor(this.keyCache.labels({ outcome }));
      this.keyCacheCounters.set(outcome, counter);
    }
    counter.inc();
  }

  adminAuthFailed(): void {
    this.adminAuthFailures.inc();
  }

  adminAuthRefused(limit: AuthLimitKind): void {
    this.adminAuthRefusals.inc({ limit });
  }

  /**
   * Latency and error metrics for the Check-path store calls. A store that
   * times its own calls (the Redis store, where its reply queue already holds
   * each call's start) is told where to report and returned as it is: no
   * wrapper promise per call. Any other is wrapped.
   */
  instrumentCheckPath(keyIndex: KeyIndex, authorizer: Authorizer): { keyIndex: KeyIndex; authorizer: Authorizer } {
    const timed = new Set<TimesCheckPath>();
    for (const part of [keyIndex, authorizer]) if (timesItself(part)) timed.add(part);
    for (const store of timed) store.timeCheckPathWith(this.observeStoreCall);
    return {
      keyIndex: timesItself(keyIndex)
        ? keyIndex
        : { resolveKeyHash: (hash) => this.time('resolve_key', () => keyIndex.resolveKeyHash(hash)) },
      authorizer: timesItself(authorizer)
        ? authorizer
        : { authorize: (request) => this.time('authorize', () => authorizer.authorize(request)) },
    };
  }

  private readonly observeStoreCall: CheckPathTimer = (operation, seconds, failed) => {
    if (failed) this.storeErrorCounter(operation).inc();
    this.storeHistogram(operation).observe(seconds);
  };

  private async time<T>(operation: CheckPathOperation, call: () => Promise<T>): Promise<T> {
    const started = performance.now();
    let failed = false;
    try {
      return await call();
    } catch (error) {
      failed = true;
      throw error;
    } finally {
      this.observeStoreCall(operation, (performance.now() - started) / 1000, failed);
    }
  }

  private readonly storeErrorCounters = new Map<string, Counter.Internal>();

  private storeErrorCounter(operation: CheckPathOperation): Counter.Internal {
    let counter = this.storeErrorCounters.get(operation);
    if (!counter) {
      counter = this.redisErrors.labels({ operation });
      this.storeErrorCounters.set(operation, counter);
    }
    return counter;
  }

  private readonly storeHistograms = new Map<string, HotPathHistogramChild>();

  private storeHistogram(operation: string): HotPathHistogramChild {
    let histogram = this.storeHistograms.get(operation);
    if (!histogram) {
      histogram = this.redisSeconds.labels({ operation });
      this.storeHistograms.set(operation, histogram);
    }
    return histogram;
  }
}

function carriesDecisionClock(store: object): store is CarriesDecisionClock {
  return typeof (store as Partial<CarriesDecisionClock>).decisionClockUncertaintyUs === 'function';
}

function timesItself(store: object): store is TimesCheckPath {
  return typeof (store as Partial<TimesCheckPath>).timeCheckPathWith === 'function';
}
