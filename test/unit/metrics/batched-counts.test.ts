import { Counter, Registry } from 'prom-client';
import { Metrics } from '../../../src/platform/metrics';
import { BatchedCounts } from '../../../src/platform/batched-counts';
import type { Decision } from '../../../src/check/decision';

describe('BatchedCounts (Check-path counters)', () => {
  it('shows at each scrape what prom-client shows when each count is added at once', async () => {
    const [real, batchedRegistry] = [new Registry(), new Registry()];
    const options = { name: 'test_total', help: 'A test counter.', labelNames: ['outcome'] as const };
    const direct = new Counter({ ...options, registers: [real] });
    const counts = new BatchedCounts();
    const batched = new Counter({ ...options, registers: [batchedRegistry], collect: () => counts.flush() });
    const hit = counts.countFor(batched.labels({ outcome: 'hit' }));
    const miss = counts.countFor(batched.labels({ outcome: 'miss' }));
    for (const [hits, misses] of [
      [3, 0],
      [0, 0],
      [2, 5],
    ] as const) {
      for (let i = 0; i < hits; i += 1) {
        direct.labels({ outcome: 'hit' }).inc();
        hit.inc();
      }
      for (let i = 0; i < misses; i += 1) {
        direct.labels({ outcome: 'miss' }).inc();
        miss.inc();
      }
      expect(await batchedRegistry.metrics()).toBe(await real.metrics());
      expect(await batchedRegistry.getMetricsAsJSON()).toEqual(await real.getMetricsAsJSON());
    }
  });

  it('counts every decision and key cache lookup in the service metrics by the next scrape', async () => {
    const metrics = new Metrics();
    const decision = {
      kind: 'allow',
      route: { style: 'chat', family: 'openai' },
      strip: { headers: [], queryParameters: [] },
    } as unknown as Decision;
    for (let i = 0; i < 7; i += 1) metrics.observeDecision(decision, 0.001);
    metrics.observeKeyCache('hit');
    metrics.observeKeyCache('hit');
    const first = await metrics.registry.metrics();
    expect(first).toContain('gateway_authz_decisions_total{style="chat",family="openai",result="allow",reason="allowed"} 7');
    expect(first).toContain('gateway_authz_key_cache_lookups_total{outcome="hit"} 2');
    metrics.observeDecision(decision, 0.001);
    const second = await metrics.registry.getSingleMetricAsString('gateway_authz_decisions_total');
    expect(second).toContain('result="allow",reason="allowed"} 8');
  });
});
