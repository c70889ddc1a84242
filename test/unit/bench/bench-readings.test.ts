/**
 * What `npm run bench` reads its targets from: the CheckResponse status code
 * peeked from the bytes (against protobufjs with Envoy's official protos),
 * h2load's per-request log, and the service's Prometheus histogram.
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { h2loadArguments, parseH2loadLog, STAGGERED_CONNECTIONS } from '../../bench/h2load';
import type { ExtProcCpuResult } from '../../bench/ext-proc-cpu';
import { asShown, evaluateTargets, extProcFigures, type BenchReport, type GatewayRun } from '../../bench/report';
import { histogramDelta, histogramQuantile, parseMetrics, formatBucket } from '../../bench/server-metrics';
import { checkCodec, checkResponseStatusCode } from '../../bench/traffic';
import { OFFICIAL_EXTERNAL_AUTH_PROTO, OFFICIAL_LOADER_OPTIONS } from '../../support/envoy-official-client';

function officialResponseSerializer(): (response: object) => Buffer {
  const definition = protoLoader.loadSync(OFFICIAL_EXTERNAL_AUTH_PROTO, OFFICIAL_LOADER_OPTIONS);
  const check = (definition['envoy.service.auth.v3.Authorization'] as grpc.ServiceDefinition).Check!;
  return (response) => check.responseSerialize(response);
}

describe('checkResponseStatusCode', () => {
  const serialize = officialResponseSerializer();

  it.each([
    [
      'an allow with headers and no status code (proto3 omits 0)',
      { status: {}, ok_response: { headers: [{ header: { key: 'x-a', value: 'b' } }] } },
      0,
    ],
    ['no status at all', { ok_response: {} }, 0],
    ['401', { status: { code: 16, message: 'unauthenticated' }, denied_response: { status: { code: 401 }, body: '{"error":{}}' } }, 16],
    ['429', { status: { code: 8 }, denied_response: { status: { code: 429 } } }, 8],
    ['503 store_unavailable', { status: { code: 14, message: 'store' }, denied_response: { status: { code: 503 } } }, 14],
    ['an answer with dynamic metadata', { dynamic_metadata: { fields: { a: { number_value: 1.5 } } }, status: { code: 7 } }, 7],
  ])('reads the code of %s as protobufjs does', (_name, response, code) => {
    const bytes = serialize(response);
    expect(checkResponseStatusCode(bytes)).toBe(code);
    expect(checkCodec().deserialize(bytes).status?.code ?? 0).toBe(code);
  });

  it('reads a negative int32 code (a 10-byte varint)', () => {
    expect(checkResponseStatusCode(serialize({ status: { code: -3 } }))).toBe(-3);
  });

  it('refuses a truncated message rather than guessing', () => {
    const bytes = serialize({ status: { code: 16, message: 'unauthenticated' } });
    expect(() => checkResponseStatusCode(bytes.subarray(0, bytes.length - 3))).toThrow(/truncated/);
  });
});

describe('parseH2loadLog', () => {
  const log = [
    // start (µs since the epoch), HTTP status, µs to the end of the response
    '1000000000000000\t200\t1500',
    '1000000000100000\t200\t2500',
    '1000000000250000\t-1\t90000',
    '1000000000300000\t200\t1000',
    '1000000000400000\t503\t700',
    '',
  ].join('\n');

  it('keeps every request without a warm-up, in ms', () => {
    expect(parseH2loadLog(log, 0)).toEqual({ latenciesMs: [1.5, 2.5, 90, 1, 0.7], failed: 2, startSpanSeconds: 0.4 });
  });

  it('leaves out the requests that started in the warm-up, counted from the earliest start', () => {
    expect(parseH2loadLog(log, 250)).toEqual({ latenciesMs: [90, 1, 0.7], failed: 2, startSpanSeconds: 0.15 });
  });

  it('refuses a line it does not understand', () => {
    expect(() => parseH2loadLog('finished in 4.00s\n', 0)).toThrow(/unexpected h2load log line/);
  });

  const tailRound = {
    binary: 'h2load',
    address: '127.0.0.1:9191',
    bodyFile: '/tmp/body.bin',
    logFile: '/tmp/h2load.log',
    connections: 4,
    streamsPerConnection: 256,
    rate: 3000,
    warmupMs: 0,
    durationMs: 1000,
  };
  const sameRequests =
    '--data /tmp/body.bin --header content-type: application/grpc --header te: trailers --header grpc-timeout: 250m ' +
    '--log-file /tmp/h2load.log http://127.0.0.1:9191/envoy.service.auth.v3.Authorization/Check';

  it('asks h2load for the rate per connection, a fixed number of gRPC requests, and the log', () => {
    expect(h2loadArguments(tailRound).join(' ')).toBe(
      `--clients 4 --max-concurrent-streams 256 --rps 750.000 --requests 3000 ${sameRequests}`,
    );
  });

  it('staggered: opens the connections one a millisecond apart, each at its share of the rate', () => {
    expect(h2loadArguments({ ...tailRound, connections: STAGGERED_CONNECTIONS, staggered: true }).join(' ')).toBe(
      `--clients 10 --max-concurrent-streams 256 --rate 1 --rate-period 1ms --rps 300.000 --requests 3000 ${sameRequests}`,
    );
  });
});

describe('the Check latency histogram', () => {
  const scrape = (counts: number[]) =>
    parseMetrics(
      [
        '# TYPE gateway_authz_check_latency_seconds histogram',
        ...['0.001', '0.005', '0.025', '+Inf'].map((le, i) => `gateway_authz_check_latency_seconds_bucket{le="${le}"} ${counts[i]}`),
        `gateway_authz_check_latency_seconds_count ${counts[3]}`,
        'gateway_authz_checks_shed_total{reason="over_capacity"} 7',
        'gateway_authz_nodejs_eventloop_lag_max_seconds 0.0113',
        'gateway_authz_decisions_total{style="bearer",family="chat-completions",result="allow",reason="allowed"} 5',
        'gateway_authz_decisions_total{style="x-api-key",family="messages",result="allow",reason="allowed"} 2',
      ].join('\n'),
    );

  it('reads the buckets and the counters', () => {
    const snapshot = scrape([1, 2, 3, 4]);
    expect(snapshot.checkLatency).toEqual({ bounds: [0.001, 0.005, 0.025, Infinity], cumulative: [1, 2, 3, 4] });
    expect(snapshot.counters).toEqual({ 'shed.over_capacity': 7, 'reason.allowed': 7 });
    // prom-client's gauge is the longest tick-to-tick interval of a timer due every 10 ms: 11.3 ms is 1.3 ms late.
    expect(snapshot.loopDelayMaxMs).toBeCloseTo(1.3, 6);
  });

  it('finds the bucket of a quantile in the delta between two scrapes', () => {
    const delta = histogramDelta(scrape([100, 100, 100, 100]).checkLatency, scrape([1_100, 1_190, 1_199, 1_200]).checkLatency)!;
    expect(delta.cumulative).toEqual([1_000, 1_090, 1_099, 1_100]);
    // rank ceil(0.5 × 1100) = 550 is in the first bucket; ceil(0.99 × 1100) = 1089 in the second; 0.999 → 1099, the third.
    expect(formatBucket(histogramQuantile(delta, 0.5))).toBe('0–1');
    expect(formatBucket(histogramQuantile(delta, 0.99))).toBe('1–5');
    expect(formatBucket(histogramQuantile(delta, 0.999))).toBe('5–25');
    expect(formatBucket(histogramQuantile(delta, 1))).toBe('> 25');
  });

  it('has no quantile without observations, and no delta without the histogram', () => {
    expect(histogramQuantile({ bounds: [0.001, Infinity], cumulative: [0, 0] }, 0.99)).toBeUndefined();
    expect(histogramDelta(undefined, scrape([1, 1, 1, 1]).checkLatency)).toBeUndefined();
  });
});

describe('the targets list', () => {
  /** The fields evaluateTargets reads, around the figure under test. */
  function reportWith(roundTrips: { valid: number; malformed: number }, overrides: Partial<GatewayRun> = {}): BenchReport {
    const gateway = {
      label: 'gateway-authz',
      saturation: { perSecond: 5000 },
      cpuUsPerDecision: 59.96,
      redisCpuUsPerDecision: 15.04,
      redisCommands: { perDecision: 6.2, byCommand: {} },
      // Two batch calls for 100 keys in two count hashes each, 10 PEXPIREs: 2·2 + 2·100 + 200 + 10 = 414 of the 5,004.
      flushIntervalCommands: {
        windowSeconds: 27,
        decisions: 1000,
        commands: { evalsha: 1002, set: 2, hincrby: 200, pexpire: 10 },
        perDecision: 5.004,
      },
      fresh: { cachedKeys: 200_000, rssUnderLoadMb: 200.4 },
      overload: [],
      roundTrips: {
        'valid (cached)': { decisions: 1000, commands: {}, perDecision: roundTrips.valid },
        malformed: { decisions: 1000, commands: {}, perDecision: roundTrips.malformed },
      },
      ...overrides,
    };
    return { baseline: { saturation: { perSecond: 5001 }, cpuUsPerDecision: 100 }, gateway, answerWithinMs: 250 } as unknown as BenchReport;
  }
  const verdict = (report: BenchReport, name: string) => evaluateTargets(report).find((target) => target.name.startsWith(name));

  it('judges each figure as it prints it: 1.004 round trips, printed 1.00, meet "≤ 1"; 1.006, printed 1.01, do not', () => {
    expect(verdict(reportWith({ valid: 1.004, malformed: 0 }), 'Redis round trips, cached valid key')).toMatchObject({
      value: '1.00',
      pass: true,
    });
    expect(verdict(reportWith({ valid: 1.006, malformed: 0 }), 'Redis round trips, cached valid key')).toMatchObject({
      value: '1.01',
      pass: false,
    });
  });

  it('does the same for every bound in the list (CPU, Redis CPU, commands, RSS, ratio to the no-op)', () => {
    const report = reportWith({ valid: 1, malformed: 0.004 });
    expect(verdict(report, 'server CPU per decision')).toMatchObject({ pass: true });
    expect(verdict(report, 'server CPU per decision')!.value).toMatch(/^60\.0 µs/);
    expect(verdict(report, 'Redis CPU per decision')).toMatchObject({ value: '15.0 µs', pass: true });
    expect(verdict(report, 'Redis commands per decision')).toMatchObject({
      value: '5.00 (Checks 4.59 + last-used batches 0.41)',
      pass: true,
    });
    expect(verdict(report, 'RSS under load')).toMatchObject({ pass: true });
    expect(verdict(report, 'RSS under load')!.value).toMatch(/^200 MB/);
    expect(verdict(report, 'Redis commands, malformed key')).toMatchObject({ value: '0.00', pass: true });
    // 5000 / 5001 = 0.9998, printed 1.00 ×.
    expect(verdict(report, 'decisions/s at saturation vs the no-op grpc-js server')).toMatchObject({ pass: true });
  });

  it("notes Redis's CPU user and system apart, and the decisions it took per read, beside its CPU target (judged on the total alone)", () => {
    const withWork = reportWith(
      { valid: 1, malformed: 0 },
      { redisCpuUsPerDecision: 16.2, redisWork: { userUsPerDecision: 14.04, systemUsPerDecision: 2.16, decisionsPerRead: 15.46 } },
    );
    expect(verdict(withWork, 'Redis CPU per decision')).toEqual({
      name: 'Redis CPU per decision',
      goal: '≤ 15 µs',
      value: '16.2 µs',
      pass: false,
      note: '14.0 user + 2.2 system; 15.5 decisions a read',
    });
    // A report from before the split was measured: the verdict alone.
    expect(verdict(reportWith({ valid: 1, malformed: 0 }), 'Redis CPU per decision')).not.toHaveProperty('note');
  });

  it('judges commands per decision over one whole flush interval, not over the rounds (a gateway has traffic there one round in a few)', () => {
    expect(verdict(reportWith({ valid: 1, malformed: 0 }), 'Redis commands per decision')).toMatchObject({ pass: true });
    const withoutPhase = reportWith({ valid: 1, malformed: 0 }, { flushIntervalCommands: undefined });
    expect(verdict(withoutPhase, 'Redis commands per decision')).toMatchObject({ value: 'n/a', pass: null });
  });

  it("judges goodput past saturation against the saturation measured beside the phase, printing the rounds' ratio too", () => {
    /** A phase behind the breaker (or raw) whose goodput is 4,400/s; the closed loops beside it read `before` and `after`. */
    const phase = (before: number, after: number, behindBreaker = true) => ({
      multiple: 1.5,
      rate: 7500,
      sent: 37_500,
      sentPerSecond: 7500,
      scheduleLagMs: { p99: 1, max: 2 },
      goodputPerSecond: 4400,
      late: 0,
      unanswered: 0,
      refusedByEnvoy: 15_000,
      counters: {},
      saturationBeside: { before, after },
      ...(behindBreaker ? { envoyCircuitBreaker: { maxConnections: 1024, maxRequests: 128, maxPendingRequests: 16 } } : {}),
    });
    const goodput = (...phases: ReturnType<typeof phase>[]) =>
      verdict(reportWith({ valid: 1, malformed: 0 }, { overload: phases } as unknown as Partial<GatewayRun>), '1.5 × saturation, behind');
    // The rounds read 5,000/s (0.88 ×), the machine was slower beside the phase: 4,400 / mean(4,600, 5,000) = 0.92 ×.
    expect(goodput(phase(4600, 5000))).toMatchObject({
      value: "0.92 × (4,400 vs 4,800/s, closed loop before and after it); 0.88 × the rounds' saturation (5,000/s)",
      pass: true,
    });
    // Faster beside it than in the rounds: 4,400 / 5,200 = 0.85 ×, a miss although 0.88 × the rounds'.
    expect(goodput(phase(5200, 5200))).toMatchObject({ pass: false });
    expect(goodput(phase(5200, 5200))!.value).toMatch(/^0\.85 × \(4,400 vs 5,200\/s/);
    // The raw phase is printed and judged on nothing.
    const raw = verdict(
      reportWith({ valid: 1, malformed: 0 }, { overload: [phase(4600, 5000, false)] } as unknown as Partial<GatewayRun>),
      '1.5 × saturation, raw',
    );
    expect(raw).toMatchObject({ pass: null });
  });

  describe('the tail', () => {
    /** A tail run: h2load's p99, and the server's own p99 bucket when there is one. */
    const tail = (p99Ms: number, inside?: [number, number]) => ({
      rate: 16_000,
      requests: 192_000,
      heldPerSecond: 16_000,
      failed: 0,
      latency: { count: 192_000, p50Ms: 1, p90Ms: 2, p99Ms, p999Ms: p99Ms * 2, maxMs: p99Ms * 3 },
      ...(inside
        ? { server: { count: 192_000, p99: { q: 0.99, count: 1900, lowerMs: inside[0], upperMs: inside[1] }, counters: {} } }
        : {}),
    });
    const withTails = (staggered: boolean) => {
      const report = reportWith(
        { valid: 1, malformed: 0 },
        { cpuUsPerDecision: 30, tail: tail(8, [6, 7.5]), ...(staggered ? { staggeredTail: tail(4, [4, 5]) } : {}) },
      );
      Object.assign(report.baseline, { tail: tail(380), ...(staggered ? { staggeredTail: tail(200) } : {}) });
      return report;
    };

    it("judges the rounds whose connections were opened 1 ms apart, and prints the bursts' with the floor they set", () => {
      const report = withTails(true);
      expect(verdict(report, "p99 at half the gateway's saturation")).toMatchObject({
        name: "p99 at half the gateway's saturation, 16,000/s (h2load, a valid key, 10 connections opened 1 ms apart: rate / 1000 Checks each ms)",
        value: '0.02 × (4.00 vs 200.00 ms)',
        pass: true,
      });
      expect(verdict(report, 'p99 inside the server')).toMatchObject({
        value: '4–5 ms (bucket resolution: the p99 is in this bucket)',
        pass: true,
      });
      // 16,000/s in bursts every 10 ms: 160 Checks at 30 µs each, 4.8 ms of one core.
      expect(verdict(report, "the same tail with h2load's connections opened together")).toEqual({
        name: "the same tail with h2load's connections opened together (rate / 100 Checks at once every 10 ms)",
        goal: 'none',
        value: "p99 8.00 ms (0.02 × the no-op grpc-js's 380.00 ms); inside the server 6–7.5 ms",
        pass: null,
        note: 'each burst of 160 Checks takes 160 × 30.0 µs = 4.8 ms of one core to serve, so the last of a burst waits about that long on any server at half its own saturation',
      });
    });

    it('judges the bursts when a run has no staggered rounds', () => {
      const report = withTails(false);
      expect(verdict(report, "p99 at half the gateway's saturation")).toMatchObject({
        name: "p99 at half the gateway's saturation, 16,000/s (h2load, a valid key, connections opened together: rate / 100 Checks every 10 ms)",
        pass: true,
      });
      expect(verdict(report, 'p99 inside the server')).toMatchObject({
        value: '6–7.5 ms (bucket resolution: the p99 is in this bucket)',
        pass: false,
      });
      expect(verdict(report, "the same tail with h2load's connections opened together")).toBeUndefined();
    });
  });

  it('rounds as toFixed does', () => {
    expect(asShown(1.004, 2)).toBe(1);
    expect(asShown(59.96, 1)).toBe(60);
    expect(asShown(0.8951, 2)).toBe(0.9);
  });
});

describe('the usage processor figures', () => {
  const extProc = {
    answers: 2000,
    concurrency: 64,
    messagesPerAnswer: 506,
    meteredWithUsage: 2000,
    cpuMsPerAnswer: 2.164,
    cpuUsPerMessage: 4.277,
    openStreamsHeld: 2000,
    rssPerOpenStreamKiB: 14,
    heapPerOpenStreamKiB: 3,
  } as ExtProcCpuResult;

  it('labels the CPU by the streamed events (messages less the two header messages) and prints µs per answer', () => {
    expect(extProcFigures(extProc)).toEqual({
      cpu: {
        label: 'processor CPU µs per metered answer (streamed, ~504 events)',
        value: '2,164 µs (4.28 µs per message; 2,000 of 2,000 answers metered complete)',
      },
      memory: { label: 'processor memory per open stream (2,000 held mid-answer)', value: '14 KiB RSS, 3 KiB JS heap' },
    });
  });

  const report = (run?: ExtProcCpuResult) =>
    ({
      baseline: { saturation: { perSecond: 5000 }, cpuUsPerDecision: 100 },
      gateway: {
        label: 'gateway-authz',
        saturation: { perSecond: 5000 },
        cpuUsPerDecision: 50,
        fresh: { cachedKeys: 0, rssUnderLoadMb: 100 },
        overload: [],
        roundTrips: {},
      },
      answerWithinMs: 250,
      ...(run ? { extProc: run } : {}),
    }) as unknown as BenchReport;
  const processorLines = (run?: ExtProcCpuResult) => evaluateTargets(report(run)).filter((target) => target.name.startsWith('processor'));

  it('lists them as informational targets, judged on nothing', () => {
    expect(processorLines(extProc)).toEqual([
      expect.objectContaining({ name: expect.stringContaining('~504 events'), value: expect.stringMatching(/^2,164 µs/), pass: null }),
      expect.objectContaining({ name: expect.stringContaining('per open stream'), value: '14 KiB RSS, 3 KiB JS heap', pass: null }),
    ]);
    expect(processorLines(extProc)[0]!.note).toBeUndefined();
  });

  it('says when some answers were not metered, and when the phase was skipped', () => {
    expect(processorLines({ ...extProc, meteredWithUsage: 1990 })[0]!.note).toMatch(/10 answers not metered complete/);
    expect(processorLines(undefined)).toEqual([
      expect.objectContaining({ value: 'not measured', pass: null, note: 'skipped (--no-ext-proc)' }),
    ]);
  });
});
