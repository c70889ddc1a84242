import { spawn } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { DeadlineSweeper, type Expiring } from '../../../src/transport/deadline-sweeper';
import { DeadlineExceededError, withinDeadline } from '../../../src/store/redis/deadline';

/**
 * An echo server in another process: it answers while this process's event
 * loop is blocked, so the reply is waiting in the socket when the loop comes
 * back, together with the expired deadline timer. With `delayMs`, each echo
 * comes that long after the bytes.
 */
async function connectToEchoProcess(delayMs = 0): Promise<{ socket: Socket; stop: () => void }> {
  const echo = delayMs > 0 ? `c.on('data', (d) => setTimeout(() => c.write(d), ${delayMs}))` : 'c.pipe(c)';
  const child = spawn(
    process.execPath,
    ['-e', `const s = require('net').createServer((c) => ${echo}).listen(0, '127.0.0.1', () => console.log(s.address().port))`],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const port = await new Promise<number>((resolve) => child.stdout.once('data', (data) => resolve(Number(String(data).trim()))));
  const socket = connect(port, '127.0.0.1');
  await new Promise((resolve) => socket.once('connect', resolve));
  // A round trip first, so the echo process is warm.
  socket.write('warm');
  await new Promise((resolve) => socket.once('data', resolve));
  return {
    socket,
    stop: () => {
      socket.destroy();
      child.kill();
    },
  };
}

const blockEventLoop = (ms: number) => {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    /* busy, like a burst of Checks */
  }
};

describe('withinDeadline', () => {
  it('passes a result through', async () => {
    await expect(withinDeadline(Promise.resolve('ok'), 10)).resolves.toBe('ok');
  });

  it('passes a failure through', async () => {
    await expect(withinDeadline(Promise.reject(new Error('refused')), 10)).rejects.toThrow('refused');
  });

  it('fails at the deadline when no answer comes', async () => {
    await expect(withinDeadline(new Promise(() => undefined), 20)).rejects.toBeInstanceOf(DeadlineExceededError);
  });

  it('lets a reply that already arrived win over a deadline that expired while the loop was busy', async () => {
    const echo = await connectToEchoProcess();
    try {
      const reply = new Promise<string>((resolve) => echo.socket.once('data', (data) => resolve(String(data))));
      const answer = withinDeadline(reply, 10);
      echo.socket.write('pong');
      blockEventLoop(50); // the echo arrives meanwhile: the deadline timer and the reply are now both ready
      await expect(answer).resolves.toBe('pong');
    } finally {
      echo.stop();
    }
  });
});

describe('DeadlineSweeper', () => {
  interface Command extends Expiring {
    id: number;
    failedAt?: number;
  }
  const expired: Command[] = [];
  const expire = (command: Command) => {
    command.settled = true;
    command.failedAt = performance.now();
    expired.push(command);
  };
  beforeEach(() => {
    expired.length = 0;
  });
  const command = (id: number, ms: number): Command => ({ id, deadline: performance.now() + ms, settled: false });

  /** Waits (at most 3 s, the machine may be busy) until `done` holds. */
  async function until(done: () => boolean): Promise<void> {
    const end = Date.now() + 3000;
    while (!done() && Date.now() < end) await new Promise((resolve) => setTimeout(resolve, 5));
  }

  it('fails each unanswered command once its deadline has passed, oldest first, and none before', async () => {
    const sweeper = new DeadlineSweeper<Command>(expire);
    const commands = [command(1, 20), command(2, 20), command(3, 60)];
    commands.forEach((entry) => sweeper.add(entry));
    await until(() => expired.length === 3);
    expect(expired.map((entry) => entry.id)).toEqual([1, 2, 3]);
    for (const entry of expired) expect(entry.failedAt!).toBeGreaterThanOrEqual(entry.deadline);
    expect(sweeper.size).toBe(0);
  });

  it('never fails a command that was answered, and forgets answered ones', async () => {
    const sweeper = new DeadlineSweeper<Command>(expire);
    const commands = Array.from({ length: 100 }, (_, i) => command(i, 10));
    commands.forEach((entry) => sweeper.add(entry));
    for (const entry of commands) {
      if (entry.id % 2 === 1) continue;
      entry.settled = true;
      sweeper.settled();
    }
    // The first (even, answered) one left at once; the others wait behind unanswered ones.
    expect(sweeper.size).toBe(99);
    await until(() => sweeper.size === 0);
    expect(expired.map((entry) => entry.id)).toEqual(commands.filter((entry) => entry.id % 2 === 1).map((entry) => entry.id));
  });

  it('keeps sweeping when an expiry, settling as the channels do, drops commands answered out of order behind it', async () => {
    // Every user's expire settles the entry and tells the sweeper (settled()), which then also drops the answered ones behind it.
    const sweeper: DeadlineSweeper<Command> = new DeadlineSweeper<Command>((entry) => {
      expire(entry);
      sweeper.settled();
    });
    const [slow, answered, last] = [command(1, 10), command(2, 10), command(3, 10)];
    [slow, answered, last].forEach((entry) => sweeper.add(entry));
    // Answered before the one issued ahead of it (another Cluster node, a NOSCRIPT resend, a gRPC call).
    answered.settled = true;
    sweeper.settled();
    await until(() => expired.length === 2);
    expect(expired.map((entry) => entry.id)).toEqual([1, 3]);
    expect(sweeper.size).toBe(0);
  });

  it('holds about what is in flight when answers overtake a slow one: those behind it are dropped, not kept for its wait', async () => {
    // A gRPC server's sweeper under overload: each admitted call waits for Redis while thousands shed behind it are
    // answered at once. Held until the slow one's answer, they lived long enough to be promoted to the old generation.
    const sweeper = new DeadlineSweeper<Command>(expire);
    const slow = command(0, 40);
    sweeper.add(slow);
    let largest = 0;
    for (let id = 1; id <= 20_000; id += 1) {
      const shed = command(id, 40);
      sweeper.add(shed);
      shed.settled = true;
      sweeper.settled();
      largest = Math.max(largest, sweeper.size);
    }
    expect(largest).toBeLessThanOrEqual(513);
    const stillWaiting = command(20_001, 40);
    sweeper.add(stillWaiting);
    await until(() => expired.length === 2);
    expect(expired.map((entry) => entry.id)).toEqual([0, 20_001]);
    expect(sweeper.size).toBe(0);
  });

  it('expires every unanswered command when expiring one drops thousands answered behind it (no compaction under the sweep)', async () => {
    const sweeper: DeadlineSweeper<Command> = new DeadlineSweeper<Command>((entry) => {
      expire(entry);
      sweeper.settled();
    });
    const commands = Array.from({ length: 4000 }, (_, id) => command(id, 10));
    commands.forEach((entry) => sweeper.add(entry));
    // Answered out of order: every one but each 8th, too few settles yet for a compaction (one per 512).
    for (const entry of commands) if (entry.id % 8 !== 0 && entry.id < 4000 - 8 * 64) entry.settled = true;
    const unanswered = commands.filter((entry) => !entry.settled).map((entry) => entry.id);
    await until(() => expired.length === unanswered.length);
    expect(expired.map((entry) => entry.id)).toEqual(unanswered);
    expect(sweeper.size).toBe(0);
  });

  it('arms one timer for a burst of commands, not one each', () => {
    const setTimeoutSpy = jest.spyOn(global, 'setTimeout');
    try {
      const sweeper = new DeadlineSweeper<Command>(expire);
      for (let i = 0; i < 1000; i += 1) sweeper.add(command(i, 50));
      expect(setTimeoutSpy).toHaveBeenCalledTimes(1);
      sweeper.stop();
    } finally {
      setTimeoutSpy.mockRestore();
    }
  });

  it('lets a reply win that arrived while an I/O callback held the loop, in the turn its deadline timer fired', async () => {
    // The deadline timer fires in a turn's timers phase; that turn's poll phase then runs another socket's callback,
    // which holds the loop while the reply comes in. Only the next turn's poll reads it: the expiry must wait for it.
    const delayed = await connectToEchoProcess(40);
    const other = await connectToEchoProcess();
    const sweeper = new DeadlineSweeper<Command>(expire);
    try {
      const entry = command(1, 10);
      sweeper.add(entry);
      delayed.socket.once('data', () => (entry.settled = true));
      delayed.socket.write('ping'); // answered 40 ms from now, after the deadline
      other.socket.once('data', () => blockEventLoop(200)); // the reply comes in during this
      other.socket.write('pong'); // echoed at once
      blockEventLoop(20); // past the deadline, with the other echo waiting: timer and callback run in the same turn
      await until(() => entry.settled);
      expect(expired).toEqual([]);
      expect(entry.settled).toBe(true);
    } finally {
      sweeper.stop();
      delayed.stop();
      other.stop();
    }
  });

  it('lets a reply that already arrived win over a deadline that expired while the loop was busy', async () => {
    const echo = await connectToEchoProcess();
    try {
      const sweeper = new DeadlineSweeper<Command>(expire);
      const entry = command(1, 10);
      sweeper.add(entry);
      echo.socket.once('data', () => (entry.settled = true));
      echo.socket.write('pong');
      blockEventLoop(50); // the echo arrives meanwhile: the deadline timer and the reply are now both ready
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(entry.settled).toBe(true);
      expect(expired).toEqual([]);
    } finally {
      echo.stop();
    }
  });
});
