import { Metrics } from '../../../src/platform/metrics';

/** Cumulative count of gateway_authz_check_latency_seconds at each `le`, from the exposition text. */
async function cumulative(metrics: Metrics): Promise<Map<string, number>> {
  const text = await metrics.registry.getSingleMetricAsString('gateway_authz_check_latency_seconds');
  const counts = new Map<string, number>();
  for (const match of text.matchAll(/_bucket\{le="([^"]+)"\} (\d+)/g)) counts.set(match[1]!, Number(match[2]));
  return counts;
}

describe('gateway_authz_check_latency_seconds around the 5 ms objective', () => {
  it('tells a Check answered in 4.5 ms from one answered in 5.5 ms or 7 ms, to the millisecond', async () => {
    const metrics = new Metrics();
    for (const seconds of [0.0045, 0.0055, 0.007]) metrics.observeCheckLatency(seconds);
    const counts = await cumulative(metrics);
    expect(counts.get('0.004')).toBe(0);
    expect(counts.get('0.005')).toBe(1);
    expect(counts.get('0.006')).toBe(2);
    expect(counts.get('0.0075')).toBe(3);
  });

  it('still spans 0.5 ms to 1 s, so a Check that waited out a long pause is not lost in +Inf', async () => {
    const metrics = new Metrics();
    metrics.observeCheckLatency(0.0004);
    metrics.observeCheckLatency(0.9);
    const counts = await cumulative(metrics);
    expect(counts.get('0.0005')).toBe(1);
    expect(counts.get('0.5')).toBe(1);
    expect(counts.get('1')).toBe(2);
    expect(counts.get('+Inf')).toBe(2);
  });
});
