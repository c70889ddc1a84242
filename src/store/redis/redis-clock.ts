import { performance } from 'node:perf_hooks';

/**
 * Redis's clock, read on this replica without a command per decision.
 *
 * Every replica decides on one clock, Redis's, so hosts whose own clocks
 * are skewed still agree on windows, expiry and the month. The authorize
 * script used to read it with TIME, one of its five commands (about 8 % of
 * the instructions Redis ran per decision; passed as an argument, the time
 * costs half of that to parse, test/bench/redis-callgrind.ts). Instead each
 * replica samples TIME now and then and carries it forward on its own
 * monotonic clock, as NTP does: offset = Redis's time − the local time
 * halfway through the round trip, wrong by at most half that round trip.
 * Of the last SAMPLES_KEPT samples the one with the shortest round trip is
 * used, so one that queued behind other work does not move the clock, and
 * a step of Redis's own clock is followed within SAMPLES_KEPT intervals.
 * The local clock is monotonic (performance.now), so a step of this host's
 * wall clock changes nothing.
 *
 * A failed sample keeps the last offset: a monotonic clock drifts by parts
 * per million, microseconds over minutes, and while Redis cannot answer
 * TIME it cannot answer Checks either.
 */
export interface RedisClockOptions {
  /** TIME: Redis's clock in µs. */
  readRedisUs: () => Promise<number>;
  /** The local monotonic clock, ms (default performance.now); tests skew it. */
  localMs?: () => number;
  /** Between samples (default SAMPLE_INTERVAL_MS). */
  intervalMs?: number;
}

const SAMPLE_INTERVAL_MS = 1000;
const SAMPLES_KEPT = 4;

interface Sample {
  roundTripUs: number;
  offsetUs: number;
}

export class RedisClock {
  private readonly samples: Sample[] = [];
  private offsetUs = 0;
  private roundTripUs = 0;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  private constructor(
    private readonly readRedisUs: () => Promise<number>,
    private readonly localMs: () => number,
    private readonly intervalMs: number,
  ) {}

  /** Takes the first sample before it answers (its failure is the caller's), then one every interval. */
  static async start(options: RedisClockOptions): Promise<RedisClock> {
    const clock = new RedisClock(
      options.readRedisUs,
      options.localMs ?? (() => performance.now()),
      options.intervalMs ?? SAMPLE_INTERVAL_MS,
    );
    await clock.sample();
    clock.schedule();
    return clock;
  }

  /** Redis's time now, whole µs. */
  nowUs(): number {
    return Math.round(this.localMs() * 1000 + this.offsetUs);
  }

  /** How far nowUs() can be from Redis's clock: half the round trip of the sample in use, µs. */
  uncertaintyUs(): number {
    return this.roundTripUs / 2;
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.sample()
        .catch(() => undefined)
        .finally(() => this.schedule());
    }, this.intervalMs);
    this.timer.unref();
  }

  private async sample(): Promise<void> {
    const sentMs = this.localMs();
    const redisUs = await this.readRedisUs();
    const receivedMs = this.localMs();
    const roundTripUs = (receivedMs - sentMs) * 1000;
    this.samples.push({ roundTripUs, offsetUs: redisUs - ((sentMs + receivedMs) / 2) * 1000 });
    if (this.samples.length > SAMPLES_KEPT) this.samples.shift();
    let best = this.samples[0]!;
    for (const candidate of this.samples) if (candidate.roundTripUs < best.roundTripUs) best = candidate;
    this.offsetUs = best.offsetUs;
    this.roundTripUs = best.roundTripUs;
  }
}
