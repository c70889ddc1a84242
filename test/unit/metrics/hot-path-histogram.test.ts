import fc from 'fast-check';
import { Histogram, Registry } from 'prom-client';
import { HotPathHistogram } from '../../../src/platform/hot-path-histogram';

const BUCKETS = [0.0002, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25];

/** The same histogram twice, each on a registry of its own: prom-client's and the hot-path one. */
function pair(labelNames: readonly string[]) {
  const real = new Registry();
  const ours = new Registry();
  const options = { name: 'test_duration_seconds', help: 'A test histogram.', buckets: BUCKETS };
  const prom = new Histogram({ ...options, labelNames, registers: [real] });
  const fast = new HotPathHistogram({ ...options, labelNames, registers: [ours] });
  return { real, ours, prom, fast };
}

describe('HotPathHistogram (Check-path histograms)', () => {
  it('exports what prom-client exports for the same observations: text and JSON, label sets, bounds, +Inf, sum and count', async () => {
    const observation = fc.record({
      result: fc.constantFrom('allow', 'deny', 'rpc_error'),
      value: fc.oneof(fc.constantFrom(0, ...BUCKETS, 0.3, 5), fc.double({ min: -1, max: 2, noNaN: true })),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(observation, { maxLength: 60 }), async (observations) => {
        const { real, ours, prom, fast } = pair(['result']);
        for (const { result, value } of observations) {
          prom.labels({ result }).observe(value);
          fast.labels({ result }).observe(value);
        }
        expect(await ours.metrics()).toBe(await real.metrics());
        expect(await ours.getMetricsAsJSON()).toEqual(await real.getMetricsAsJSON());
      }),
      { numRuns: 200, seed: 14 },
    );
  });

  it('exports a histogram without labels at zero before its first observation, as prom-client does', async () => {
    const { real, ours, prom, fast } = pair([]);
    expect(await ours.metrics()).toBe(await real.metrics());
    prom.observe(0.003);
    fast.labels({}).observe(0.003);
    expect(await ours.metrics()).toBe(await real.metrics());
  });

  it('refuses a value that is not a finite number, as prom-client does', () => {
    const { prom, fast } = pair(['result']);
    for (const value of [Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => prom.labels({ result: 'allow' }).observe(value)).toThrow(TypeError);
      expect(() => fast.labels({ result: 'allow' }).observe(value)).toThrow(TypeError);
    }
  });

  it('zeroes its label sets on reset, and the children handed out keep counting', async () => {
    const { ours, fast } = pair(['result']);
    const child = fast.labels({ result: 'allow' });
    child.observe(0.001);
    ours.resetMetrics();
    child.observe(0.002);
    const text = await ours.metrics();
    expect(text).toContain('test_duration_seconds_count{result="allow"} 1');
    expect(text).toContain('test_duration_seconds_sum{result="allow"} 0.002');
  });
});
