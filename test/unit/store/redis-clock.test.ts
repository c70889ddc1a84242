import { RedisClock } from '../../../src/store/redis/redis-clock';

/**
 * RedisClock with a local clock and a Redis that answer as told: the offset
 * from the middle of the round trip, the shortest of the last four round
 * trips, a failed sample keeping the last offset, and stop().
 */
let localMs = 0;
const REDIS_AHEAD_US = 1_764_300_000_000_000;

/** TIME that takes `roundTripMs` of local time, Redis answering halfway through (or `skewUs` off). */
function answers(plan: { roundTripMs: number; skewUs?: number } | Error) {
  return (): Promise<number> => {
    if (plan instanceof Error) return Promise.reject(plan);
    localMs += plan.roundTripMs / 2;
    const redisUs = localMs * 1000 + REDIS_AHEAD_US + (plan.skewUs ?? 0);
    localMs += plan.roundTripMs / 2;
    return Promise.resolve(redisUs);
  };
}

function scripted(plans: Parameters<typeof answers>[0][]) {
  let call = 0;
  const reads: number[] = [];
  const read = () => {
    reads.push(call);
    const plan = plans[Math.min(call, plans.length - 1)]!;
    call += 1;
    return answers(plan)();
  };
  return { read, reads };
}

beforeEach(() => {
  jest.useFakeTimers();
  localMs = 5_000;
});

afterEach(() => {
  jest.useRealTimers();
});

it("carries Redis's clock on the local one from the middle of the round trip", async () => {
  const clock = await RedisClock.start({ readRedisUs: answers({ roundTripMs: 4 }), localMs: () => localMs });
  expect(clock.nowUs()).toBe(localMs * 1000 + REDIS_AHEAD_US);
  localMs += 1234.567;
  expect(clock.nowUs()).toBe(Math.round(localMs * 1000 + REDIS_AHEAD_US));
  expect(clock.uncertaintyUs()).toBe(2000);
  clock.stop();
});

it('answers whole microseconds', async () => {
  const clock = await RedisClock.start({ readRedisUs: answers({ roundTripMs: 1 }), localMs: () => localMs });
  localMs += 0.0004;
  expect(Number.isInteger(clock.nowUs())).toBe(true);
  clock.stop();
});

it('keeps the sample with the shortest round trip: one that queued and came back late does not move the clock', async () => {
  // A 20 ms round trip whose answer was read 9 ms early (it queued behind other work on the way back).
  const { read } = scripted([{ roundTripMs: 1 }, { roundTripMs: 20, skewUs: -9000 }]);
  const clock = await RedisClock.start({ readRedisUs: read, localMs: () => localMs, intervalMs: 100 });
  await jest.advanceTimersByTimeAsync(100);
  expect(clock.nowUs()).toBe(localMs * 1000 + REDIS_AHEAD_US);
  expect(clock.uncertaintyUs()).toBe(500);
  clock.stop();
});

it("follows a step of Redis's clock once the samples before it have aged out (four kept)", async () => {
  const { read, reads } = scripted([{ roundTripMs: 1 }, { roundTripMs: 2, skewUs: 60_000_000 }]);
  const clock = await RedisClock.start({ readRedisUs: read, localMs: () => localMs, intervalMs: 100 });
  await jest.advanceTimersByTimeAsync(300);
  expect(reads).toHaveLength(4);
  // The 1 ms sample from before the step is still one of the four: the clock has not moved yet.
  expect(clock.nowUs()).toBe(localMs * 1000 + REDIS_AHEAD_US);
  await jest.advanceTimersByTimeAsync(100);
  expect(clock.nowUs()).toBe(localMs * 1000 + REDIS_AHEAD_US + 60_000_000);
  clock.stop();
});

it('keeps the last offset while samples fail, and samples again after', async () => {
  const down = new Error('connection closed');
  const { read, reads } = scripted([{ roundTripMs: 2 }, down, down, { roundTripMs: 1, skewUs: 500 }]);
  const clock = await RedisClock.start({ readRedisUs: read, localMs: () => localMs, intervalMs: 100 });
  await jest.advanceTimersByTimeAsync(200);
  expect(reads).toHaveLength(3);
  localMs += 50;
  expect(clock.nowUs()).toBe(localMs * 1000 + REDIS_AHEAD_US);
  await jest.advanceTimersByTimeAsync(100);
  expect(clock.nowUs()).toBe(localMs * 1000 + REDIS_AHEAD_US + 500);
  clock.stop();
});

it('fails to start when the first sample fails', async () => {
  await expect(RedisClock.start({ readRedisUs: answers(new Error('NOAUTH')), localMs: () => localMs })).rejects.toThrow('NOAUTH');
});

it('samples no more once stopped', async () => {
  const { read, reads } = scripted([{ roundTripMs: 1 }]);
  const clock = await RedisClock.start({ readRedisUs: read, localMs: () => localMs, intervalMs: 100 });
  await jest.advanceTimersByTimeAsync(100);
  expect(reads).toHaveLength(2);
  clock.stop();
  await jest.advanceTimersByTimeAsync(1000);
  expect(reads).toHaveLength(2);
});
