import { measuringLoopStall } from './loop-stall';

function holdLoop(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // Busy: nothing else in this process runs meanwhile.
  }
}

it('measures a hold of the event loop while the work runs', async () => {
  const { result, stallMs } = await measuringLoopStall(async () => {
    await new Promise((resolve) => setTimeout(resolve, 5));
    holdLoop(120);
    return 'done';
  });
  expect(result).toBe('done');
  expect(stallMs).toBeGreaterThanOrEqual(115);
});

it('counts a hold at the very end of the work', async () => {
  const { stallMs } = await measuringLoopStall(async () => {
    await new Promise((resolve) => setTimeout(resolve, 5));
    holdLoop(80);
  });
  expect(stallMs).toBeGreaterThanOrEqual(75);
});

it('reads far less than a hold when the loop was free', async () => {
  const started = performance.now();
  const { stallMs } = await measuringLoopStall(() => new Promise((resolve) => setTimeout(resolve, 1_500)));
  const tookMs = performance.now() - started;
  // Not the time the work took: waiting on a timer holds nothing. Judged against that time, not a bound near the wait:
  // a loaded machine may still hold the process for a moment, not for half of a 1.5 s wait.
  expect(stallMs).toBeLessThan(tookMs / 2);
});
