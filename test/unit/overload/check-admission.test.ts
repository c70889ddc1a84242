import { ManualClock } from '../../../src/platform/clock';
import { createCheckHandler } from '../../../src/check/check-handler';
import { GrpcStatus, type RpcError } from '../../../src/transport/status';
import { createLogger } from '../../../src/platform/logger';
import { Metrics } from '../../../src/platform/metrics';
import { CheckAdmission } from '../../../src/check/check-admission';
import { settingsFrom } from '../../support/pipeline-fixture-world';

const NOW = 1_800_000_000_000;

describe('CheckAdmission', () => {
  it('admits up to the bound, sheds the next as over_capacity, and admits again after a release', () => {
    const admission = new CheckAdmission(2, new ManualClock(NOW));
    expect(admission.admit(Infinity)).toBeUndefined();
    expect(admission.admit(Infinity)).toBeUndefined();
    expect(admission.checksInFlight).toBe(2);
    expect(admission.admit(Infinity)).toBe('over_capacity');
    expect(admission.checksInFlight).toBe(2);
    admission.release();
    expect(admission.admit(Infinity)).toBeUndefined();
    expect(admission.checksInFlight).toBe(2);
  });

  it('sheds a Check whose deadline has come (to the millisecond) as past_deadline, and admits one a millisecond before', () => {
    const admission = new CheckAdmission(10, new ManualClock(NOW));
    expect(admission.admit(NOW)).toBe('past_deadline');
    expect(admission.admit(NOW - 1)).toBe('past_deadline');
    expect(admission.checksInFlight).toBe(0);
    expect(admission.admit(NOW + 1)).toBeUndefined();
    expect(admission.checksInFlight).toBe(1);
  });

  it('does not read the clock for a Check without a deadline', () => {
    const clock = { now: jest.fn(() => NOW) };
    new CheckAdmission(10, clock).admit(Infinity);
    expect(clock.now).not.toHaveBeenCalled();
  });
});

describe('the Check handler with admission', () => {
  function handlerWith(admission: CheckAdmission) {
    const metrics = new Metrics();
    const storeCalls: string[] = [];
    const handler = createCheckHandler({
      settings: settingsFrom({}).pipeline,
      keyIndex: { resolveKeyHash: (hash) => (storeCalls.push(`resolve ${hash}`), Promise.resolve(null)) },
      authorizer: { authorize: () => Promise.reject(new Error('not expected')) },
      metrics,
      admission,
      clock: new ManualClock(NOW),
      logger: createLogger('silent'),
      storeFailureMode: 'deny',
    });
    const check = (deadlineMs: number) =>
      new Promise<{ error: RpcError | null; response: unknown }>((resolve) => {
        handler({}, deadlineMs, (error, response) => resolve({ error, response }));
      });
    return { check, metrics, storeCalls };
  }

  it('answers a Check already past its deadline DEADLINE_EXCEEDED without deciding it, and counts it', async () => {
    const { check, metrics, storeCalls } = handlerWith(new CheckAdmission(10, new ManualClock(NOW)));
    const { error } = await check(NOW - 5);
    expect(error).toMatchObject({ code: GrpcStatus.DEADLINE_EXCEEDED });
    expect(storeCalls).toEqual([]);
    const shed = await metrics.registry.getSingleMetricAsString('gateway_authz_checks_shed_total');
    expect(shed).toContain('gateway_authz_checks_shed_total{reason="past_deadline"} 1');
    const decisions = await metrics.registry.getSingleMetricAsString('gateway_authz_check_latency_seconds');
    expect(decisions).toContain('gateway_authz_check_latency_seconds_count 0');
  });

  it('decides a Check with time left and releases its place when answered', async () => {
    const admission = new CheckAdmission(1, new ManualClock(NOW));
    const { check } = handlerWith(admission);
    const { error, response } = await check(NOW + 250);
    expect(error).toBeNull();
    expect(response).toMatchObject({ denied_response: expect.anything() });
    expect(admission.checksInFlight).toBe(0);
    expect((await check(NOW + 250)).error).toBeNull();
  });
});
