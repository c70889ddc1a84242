import { ManualClock } from '../../../src/platform/clock';
import { LastUsedRecorder } from '../../../src/keys/last-used-recorder';
import { HOUR_MS } from '../../../src/keys/request-counts';
import type { CountedBatch, LastUse } from '../../../src/ports/store';
import { LogCapture } from '../../support/log-capture';

class RecordingSink {
  batches: LastUse[][] = [];
  /** Every call, the failed ones included, with its batch. */
  calls: { uses: LastUse[]; batch: CountedBatch | undefined; failed: boolean }[] = [];
  failNext = false;
  async recordLastUsed(uses: readonly LastUse[], batch?: CountedBatch): Promise<void> {
    const failed = this.failNext;
    this.calls.push({ uses: [...uses], batch, failed });
    if (failed) {
      this.failNext = false;
      throw new Error('redis down');
    }
    this.batches.push([...uses]);
  }
}

describe('LastUsedRecorder', () => {
  it("groups a flush's uses by account, so each chunk holds few accounts (one count-hash lifetime each)", async () => {
    const sink = new RecordingSink();
    const recorder = new LastUsedRecorder(sink, new ManualClock(1), new LogCapture().logger, 60_000, 50_000, 4);
    for (let i = 0; i < 8; i += 1) recorder.note({ keyId: `key_${i}`, accountId: i % 2 === 0 ? 'acct_even' : 'acct_odd' });
    await recorder.flush();
    expect(sink.batches.map((chunk) => [...new Set(chunk.map((use) => use.accountId))])).toEqual([['acct_even'], ['acct_odd']]);
    expect(
      sink.batches
        .flat()
        .map((use) => use.keyId)
        .sort(),
    ).toEqual(Array.from({ length: 8 }, (_, i) => `key_${i}`));
  });

  it('writes at most one entry per key per flush, with the latest use', async () => {
    const clock = new ManualClock(1_000);
    const sink = new RecordingSink();
    const recorder = new LastUsedRecorder(sink, clock, new LogCapture().logger, 60_000);
    for (let i = 0; i < 100; i += 1) {
      recorder.note({ keyId: 'key_a', accountId: 'acme' });
      clock.advance(10);
    }
    recorder.note({ keyId: 'key_b', accountId: 'acme' });
    expect(sink.batches).toEqual([]); // nothing written on the hot path
    await recorder.flush();
    expect(sink.batches).toEqual([
      [
        { keyId: 'key_a', accountId: 'acme', atMs: 1_000 + 99 * 10, requests: 100 },
        { keyId: 'key_b', accountId: 'acme', atMs: 2_000, requests: 1 },
      ],
    ]);
    await recorder.flush();
    expect(sink.batches).toHaveLength(1); // nothing pending, nothing written
  });

  it('flushes early when too many distinct keys are pending, keeping memory bounded', async () => {
    const sink = new RecordingSink();
    const recorder = new LastUsedRecorder(sink, new ManualClock(1), new LogCapture().logger, 60_000, 3);
    for (const keyId of ['k1', 'k2', 'k3']) recorder.note({ keyId, accountId: 'a' });
    await recorder.stop();
    expect(sink.batches.map((batch) => batch.length)).toEqual([3]);
  });

  it('writes a big flush in chunks, one after the other, and a refused chunk does not stop the rest (it is sent again next time)', async () => {
    const sink = new RecordingSink();
    let inFlight = 0;
    let maxInFlight = 0;
    const slowSink = {
      async recordLastUsed(uses: readonly LastUse[]): Promise<void> {
        inFlight += 1;
        maxInFlight = Math.max(maxInFlight, inFlight);
        await new Promise((resolve) => setTimeout(resolve, 5));
        inFlight -= 1;
        await sink.recordLastUsed(uses);
      },
    };
    const logs = new LogCapture();
    const recorder = new LastUsedRecorder(slowSink, new ManualClock(1), logs.logger, 60_000, 50_000, 2);
    for (const keyId of ['k1', 'k2', 'k3', 'k4', 'k5']) recorder.note({ keyId, accountId: 'a' });
    sink.failNext = true;
    await recorder.flush();
    expect(maxInFlight).toBe(1);
    expect(sink.batches.map((batch) => batch.map((use) => use.keyId))).toEqual([['k3', 'k4'], ['k5']]);
    expect(logs.lines.filter((line) => line.includes('could not record last use'))).toHaveLength(1);
    await recorder.flush();
    expect(sink.batches.map((batch) => batch.map((use) => use.keyId))).toEqual([['k3', 'k4'], ['k5'], ['k1', 'k2']]);
  });

  it('keeps a batch the store did not confirm, and sends it again with the same id and counts before the new ones', async () => {
    const clock = new ManualClock(1);
    const sink = new RecordingSink();
    const logs = new LogCapture();
    const recorder = new LastUsedRecorder(sink, clock, logs.logger, 60_000);
    sink.failNext = true;
    recorder.note({ keyId: 'k1', accountId: 'a' });
    recorder.note({ keyId: 'k1', accountId: 'a' });
    await recorder.flush();
    expect(logs.lines.some((line) => line.includes('kept for the next flush'))).toBe(true);
    recorder.note({ keyId: 'k1', accountId: 'a' });
    recorder.note({ keyId: 'k2', accountId: 'a' });
    await recorder.flush();
    const [failed, resent, next] = sink.calls;
    expect(failed).toMatchObject({ failed: true, uses: [{ keyId: 'k1', requests: 2 }] });
    expect(resent).toEqual({ ...failed, failed: false });
    expect(next!.uses).toEqual([
      { keyId: 'k1', accountId: 'a', atMs: 1, requests: 1 },
      { keyId: 'k2', accountId: 'a', atMs: 1, requests: 1 },
    ]);
    expect(next!.batch!.id).not.toBe(failed!.batch!.id);
    expect(sink.calls).toHaveLength(3);
  });

  it('drops a batch that stayed unconfirmed for most of an hour (the store forgets counted ids after one), and says so', async () => {
    const clock = new ManualClock(1);
    const failing = { recordLastUsed: jest.fn(async () => Promise.reject(new Error('redis down'))) };
    const logs = new LogCapture();
    const recorder = new LastUsedRecorder(failing, clock, logs.logger, 60_000);
    recorder.note({ keyId: 'k1', accountId: 'a' });
    await recorder.flush();
    clock.advance(49 * 60_000);
    await recorder.flush();
    expect(failing.recordLastUsed).toHaveBeenCalledTimes(2);
    clock.advance(2 * 60_000);
    await recorder.flush();
    expect(failing.recordLastUsed).toHaveBeenCalledTimes(3);
    expect(logs.lines.some((line) => line.includes('request counts are dropped'))).toBe(true);
    await recorder.flush();
    expect(failing.recordLastUsed).toHaveBeenCalledTimes(3);
  });

  it('on stop, logs the counts the store still did not confirm as dropped, with how many requests', async () => {
    const logs = new LogCapture();
    const failing = { recordLastUsed: jest.fn(async () => Promise.reject(new Error('redis down'))) };
    const recorder = new LastUsedRecorder(failing, new ManualClock(1), logs.logger, 60_000);
    for (let i = 0; i < 3; i += 1) recorder.note({ keyId: 'k1', accountId: 'a' });
    await recorder.stop();
    expect(logs.lines.filter((line) => line.includes('"event":"last_used_dropped"') && line.includes('"requests":3'))).toHaveLength(1);
  });

  it('counts exactly: every note once, each batch in the UTC hour its notes fell in', async () => {
    const clock = new ManualClock(5 * HOUR_MS - 1_000);
    const sink = new RecordingSink();
    const recorder = new LastUsedRecorder(sink, clock, new LogCapture().logger, 60_000);
    for (let i = 0; i < 7; i += 1) recorder.note({ keyId: 'k1', accountId: 'a' });
    clock.advance(1_000); // the next hour: the seven leave in a batch of the hour before
    for (let i = 0; i < 3; i += 1) recorder.note({ keyId: 'k1', accountId: 'a' });
    sink.failNext = true;
    await recorder.flush(); // the hour-change flush went through; this one fails and is kept
    recorder.note({ keyId: 'k1', accountId: 'a' });
    await recorder.stop();
    const confirmed = sink.calls.filter((call) => !call.failed);
    expect(confirmed.map((call) => [call.batch!.hourStartMs, call.uses[0]!.requests])).toEqual([
      [4 * HOUR_MS, 7],
      [5 * HOUR_MS, 3],
      [5 * HOUR_MS, 1],
    ]);
    expect(new Set(confirmed.map((call) => call.batch!.id)).size).toBe(3);
  });

  it('keeps a key from one flush to the next: a later use is written again, with its own time', async () => {
    const clock = new ManualClock(1_000);
    const sink = new RecordingSink();
    const recorder = new LastUsedRecorder(sink, clock, new LogCapture().logger, 60_000);
    recorder.note({ keyId: 'key_a', accountId: 'acme' });
    await recorder.flush();
    clock.advance(500);
    recorder.note({ keyId: 'key_b', accountId: 'acme' });
    clock.advance(500);
    recorder.note({ keyId: 'key_a', accountId: 'acme' });
    await recorder.flush();
    expect(sink.batches).toEqual([
      [{ keyId: 'key_a', accountId: 'acme', atMs: 1_000, requests: 1 }],
      [
        { keyId: 'key_b', accountId: 'acme', atMs: 1_500, requests: 1 },
        { keyId: 'key_a', accountId: 'acme', atMs: 2_000, requests: 1 },
      ],
    ]);
  });

  it('after flushing early at the bound, forgets those keys and records the next ones as new', async () => {
    const clock = new ManualClock(1);
    const sink = new RecordingSink();
    const recorder = new LastUsedRecorder(sink, clock, new LogCapture().logger, 60_000, 2);
    recorder.note({ keyId: 'k1', accountId: 'a' });
    recorder.note({ keyId: 'k2', accountId: 'b' });
    clock.advance(1);
    recorder.note({ keyId: 'k2', accountId: 'b' });
    recorder.note({ keyId: 'k3', accountId: 'c' });
    await recorder.stop();
    expect(sink.batches).toEqual([
      [
        { keyId: 'k1', accountId: 'a', atMs: 1, requests: 1 },
        { keyId: 'k2', accountId: 'b', atMs: 1, requests: 1 },
      ],
      [
        { keyId: 'k2', accountId: 'b', atMs: 2, requests: 1 },
        { keyId: 'k3', accountId: 'c', atMs: 2, requests: 1 },
      ],
    ]);
  });

  it('writes only the ids, the time and the count, whatever else the noted object carries', async () => {
    const sink = new RecordingSink();
    const recorder = new LastUsedRecorder(sink, new ManualClock(7), new LogCapture().logger, 60_000);
    const identity = { keyId: 'key_a', accountId: 'acme', keyPrefix: 'gk_live_abcd', environment: 'live' };
    recorder.note(identity);
    await recorder.flush();
    expect(sink.batches).toEqual([[{ keyId: 'key_a', accountId: 'acme', atMs: 7, requests: 1 }]]);
  });

  it('writes on its own timer once started, and flushes what is left on stop', async () => {
    jest.useFakeTimers();
    try {
      const sink = new RecordingSink();
      const recorder = new LastUsedRecorder(sink, new ManualClock(5), new LogCapture().logger, 1_000);
      recorder.start();
      recorder.note({ keyId: 'k1', accountId: 'a' });
      await jest.advanceTimersByTimeAsync(1_000);
      expect(sink.batches).toHaveLength(1);
      recorder.note({ keyId: 'k2', accountId: 'a' });
      await recorder.stop();
      expect(sink.batches).toHaveLength(2);
    } finally {
      jest.useRealTimers();
    }
  });
  it('on stop with a time budget, gives up on a store that does not answer: resolves in time, sends no further chunk, logs what was dropped', async () => {
    const calls: number[] = [];
    const silent = { recordLastUsed: (uses: readonly LastUse[]) => (calls.push(uses.length), new Promise<void>(() => undefined)) };
    const logs = new LogCapture();
    const recorder = new LastUsedRecorder(silent, new ManualClock(1), logs.logger, 60_000, 50_000, 100);
    for (let i = 0; i < 250; i += 1) recorder.note({ keyId: `k${i}`, accountId: 'a' });
    const started = performance.now();
    await recorder.stop(50);
    expect(performance.now() - started).toBeLessThan(1000);
    expect(calls).toEqual([100]);
    expect(logs.events('last_used').find((entry) => entry.msg === 'last uses not written: shutting down')).toMatchObject({ keys: 250 });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(calls).toEqual([100]);
  });
});
