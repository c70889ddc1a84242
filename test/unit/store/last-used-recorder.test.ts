import { ManualClock } from '../../../src/domain/clock';
import { LastUsedRecorder } from '../../../src/store/last-used-recorder';
import type { LastUse } from '../../../src/store/store';
import { LogCapture } from '../../support/log-capture';

class RecordingSink {
  batches: LastUse[][] = [];
  failNext = false;
  async recordLastUsed(uses: readonly LastUse[]): Promise<void> {
    if (this.failNext) {
      this.failNext = false;
      throw new Error('redis down');
    }
    this.batches.push([...uses]);
  }
}

describe('LastUsedRecorder', () => {
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
        { keyId: 'key_a', accountId: 'acme', atMs: 1_000 + 99 * 10 },
        { keyId: 'key_b', accountId: 'acme', atMs: 2_000 },
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

  it('writes a big flush in chunks, one after the other, and a refused chunk does not stop the rest', async () => {
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
  });

  it('logs and drops a batch the store refuses, then keeps working', async () => {
    const sink = new RecordingSink();
    const logs = new LogCapture();
    const recorder = new LastUsedRecorder(sink, new ManualClock(1), logs.logger, 60_000);
    sink.failNext = true;
    recorder.note({ keyId: 'k1', accountId: 'a' });
    await recorder.flush();
    expect(logs.lines.some((line) => line.includes('could not record last use'))).toBe(true);
    recorder.note({ keyId: 'k2', accountId: 'a' });
    await recorder.flush();
    expect(sink.batches).toEqual([[{ keyId: 'k2', accountId: 'a', atMs: 1 }]]);
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
      [{ keyId: 'key_a', accountId: 'acme', atMs: 1_000 }],
      [
        { keyId: 'key_b', accountId: 'acme', atMs: 1_500 },
        { keyId: 'key_a', accountId: 'acme', atMs: 2_000 },
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
        { keyId: 'k1', accountId: 'a', atMs: 1 },
        { keyId: 'k2', accountId: 'b', atMs: 1 },
      ],
      [
        { keyId: 'k2', accountId: 'b', atMs: 2 },
        { keyId: 'k3', accountId: 'c', atMs: 2 },
      ],
    ]);
  });

  it('writes only the ids and the time, whatever else the noted object carries', async () => {
    const sink = new RecordingSink();
    const recorder = new LastUsedRecorder(sink, new ManualClock(7), new LogCapture().logger, 60_000);
    const identity = { keyId: 'key_a', accountId: 'acme', keyPrefix: 'gk_live_abcd', environment: 'live' };
    recorder.note(identity);
    await recorder.flush();
    expect(sink.batches).toEqual([[{ keyId: 'key_a', accountId: 'acme', atMs: 7 }]]);
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
});
