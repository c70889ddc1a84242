import Redis from 'ioredis';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as net from 'node:net';
import type { CheckPathOperation } from '../../src/check/ports';
import { FLUSH_AT_COMMANDS, PipelinedConnection, type LuaSource, type RedisAddress } from '../../src/store/redis/check-connection';
import { StoreUnavailableError } from '../../src/ports/store';
import { spawnTestRedisServer, type TestRedis } from '../support/redis-server';

/**
 * The Check path's own Redis connection against a real redis-server: the
 * deadline (one sweeper; a reply that arrived is never a timeout; late
 * replies keep their place), scripts after a restart or SCRIPT FLUSH, fail
 * fast while Redis is down and reconnect by itself, credentials and database
 * from the URL, and the timing hook.
 */
const DEADLINE_MS = 100;
const asText = (reply: unknown) => reply as string | null;
const script = (lua: string): LuaSource => ({ lua, sha: createHash('sha1').update(lua).digest('hex') });

let redis: TestRedis;
let direct: Redis;

beforeAll(async () => {
  redis = await spawnTestRedisServer();
  direct = new Redis(redis.url, { disconnectTimeout: 50, maxRetriesPerRequest: 0 });
});
afterAll(async () => {
  direct.disconnect();
  await redis.stop();
});

function open(address: Partial<RedisAddress> = {}, deadlineMs = DEADLINE_MS): Promise<PipelinedConnection> {
  return PipelinedConnection.open({
    locate: () => Promise.resolve({ host: '127.0.0.1', port: redis.port, ...address }),
    deadlineMs,
    connectTimeoutMs: 2000,
    reconnectDelayMs: () => 50,
  });
}

const blockEventLoop = (ms: number) => {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    /* busy, like a burst of Checks */
  }
};

it('answers many pipelined commands in order', async () => {
  const connection = await open();
  try {
    await direct.mset(...Array.from({ length: 200 }, (_, i) => [`cc:order:${i}`, `value ${i}`]).flat());
    const replies = await Promise.all(Array.from({ length: 200 }, (_, i) => connection.get(`cc:order:${i}`, asText, 'resolve_key')));
    expect(replies).toEqual(Array.from({ length: 200 }, (_, i) => `value ${i}`));
  } finally {
    await connection.close();
  }
});

it('fails a command Redis does not answer in time at its deadline, then goes on in order once Redis is back', async () => {
  const connection = await open();
  try {
    await direct.set('cc:late', 'late value');
    // Redis holds every client's commands for 1.5 s: slow, as far as the Check path can tell.
    await direct.call('CLIENT', 'PAUSE', '1500', 'ALL');
    const started = performance.now();
    // Held like the others: answered when Redis is back, which is what the failure is judged against, not a clock.
    const redisBack = direct.ping().then(() => performance.now() - started);
    const late = connection.get('cc:late', asText, 'resolve_key').catch((error: unknown) => ({ error, ms: performance.now() - started }));
    const outcome = (await late) as { error: Error; ms: number };
    expect(outcome.error).toBeInstanceOf(StoreUnavailableError);
    expect(outcome.error.message).toBe(`Redis command failed: Redis did not answer within ${DEADLINE_MS} ms`);
    expect(outcome.ms).toBeGreaterThanOrEqual(DEADLINE_MS - 1);
    // At its deadline, not when Redis is back: well within the pause (half of it, against a deadline of 100 ms).
    const backMs = await redisBack;
    expect(outcome.ms).toBeLessThan(backMs / 2);
    // The late reply arrives now and is dropped; the next command gets its own.
    await direct.set('cc:next', 'next value');
    expect(await connection.get('cc:next', asText, 'resolve_key')).toBe('next value');
  } finally {
    await connection.close();
  }
});

it('counts a reply that arrived while the event loop was blocked past the deadline as an answer', async () => {
  const connection = await open();
  try {
    await direct.set('cc:blocked', 'in time');
    const reply = connection.get('cc:blocked', asText, 'resolve_key');
    await new Promise((resolve) => setImmediate(resolve)); // the command is written
    blockEventLoop(DEADLINE_MS * 2); // Redis answers meanwhile; the deadline passes too
    await expect(reply).resolves.toBe('in time');
  } finally {
    await connection.close();
  }
});

it('writes every FLUSH_AT_COMMANDS-th command of a turn at once, so Redis starts on a burst before the turn ends', async () => {
  // This test holds the event loop while it asks Redis: a deadline that outlasts that.
  const connection = await open({}, 10_000);
  try {
    const incr = script(`return redis.call('INCR', KEYS[1]) -- ${Date.now()}`);
    const call = () => connection.script(incr, ['cc:burst'], [], (reply) => reply, 'authorize');
    await call(); // loads the script: EVALSHA from now on
    await direct.del('cc:burst');
    const burst = Array.from({ length: FLUSH_AT_COMMANDS + 4 }, call);
    // Still in the turn that issued them: ask Redis from another process what it ran.
    const ranBeforeTurnEnded = counterSeenFromOutside('cc:burst', redis.port, FLUSH_AT_COMMANDS);
    expect(ranBeforeTurnEnded).toBe(FLUSH_AT_COMMANDS);
    // The other 4 leave when the turn ends, as before.
    expect(await Promise.all(burst)).toEqual(Array.from({ length: FLUSH_AT_COMMANDS + 4 }, (_, i) => i + 1));
  } finally {
    await connection.close();
  }
});

/** Blocks this event loop, reading a counter with a child process until it reaches `atLeast` (or 3 s pass). */
function counterSeenFromOutside(key: string, port: number, atLeast: number): number {
  const read = `
    const socket = require('node:net').connect(${port}, '127.0.0.1', () => socket.write('*2\\r\\n$3\\r\\nGET\\r\\n$${key.length}\\r\\n${key}\\r\\n'));
    let reply = '';
    socket.on('data', (chunk) => { reply += chunk; if (reply.endsWith('\\r\\n') && (reply.startsWith('$-1') || reply.split('\\r\\n').length > 2)) { process.stdout.write(reply.startsWith('$-1') ? '0' : reply.split('\\r\\n')[1]); socket.end(); } });`;
  const until = Date.now() + 3000;
  let seen = 0;
  while (Date.now() < until) {
    seen = Number(execFileSync(process.execPath, ['-e', read], { encoding: 'utf8' }));
    if (seen >= atLeast) break;
  }
  return seen;
}

it('sends a script once per connection and loads it again after SCRIPT FLUSH (NOSCRIPT), for the same caller', async () => {
  const connection = await open();
  try {
    const echo = script(`return {ARGV[1], KEYS[1], ${Date.now()}}`);
    const call = (arg: string) => connection.script(echo, ['cc:key'], [arg], (reply) => reply, 'authorize');
    expect(await call('first')).toEqual(['first', 'cc:key', expect.any(Number)]);
    await direct.script('FLUSH');
    expect(await call('after flush')).toEqual(['after flush', 'cc:key', expect.any(Number)]);
    expect(await call('again')).toEqual(['again', 'cc:key', expect.any(Number)]);
    expect(Number(await direct.script('EXISTS', echo.sha).then((found) => (found as number[])[0]))).toBe(1);
  } finally {
    await connection.close();
  }
});

it('gives every caller its own reply when several calls of a flushed script (NOSCRIPT) and other commands share a write', async () => {
  const connection = await open();
  try {
    const echo = script(`return {'echo', ARGV[1]} -- ${Date.now()}`);
    const call = (arg: string) => connection.script(echo, [], [arg], (reply) => reply, 'authorize');
    await call('loads it');
    await direct.script('FLUSH');
    await direct.mset('cc:between:1', 'get 1', 'cc:between:2', 'get 2');
    // One write: each EVALSHA is refused and sent again as EVAL, behind the commands issued after it.
    const replies = await Promise.all([
      call('script 1'),
      connection.get('cc:between:1', asText, 'resolve_key'),
      call('script 2'),
      call('script 3'),
      connection.get('cc:between:2', asText, 'resolve_key'),
      call('script 4'),
    ]);
    expect(replies).toEqual([['echo', 'script 1'], 'get 1', ['echo', 'script 2'], ['echo', 'script 3'], 'get 2', ['echo', 'script 4']]);
    expect(await call('after')).toEqual(['echo', 'after']);
  } finally {
    await connection.close();
  }
});

it('loads a flushed script with one EVAL for a whole burst refused with NOSCRIPT, and again after each later flush', async () => {
  const own = await spawnTestRedisServer();
  const stats = new Redis(own.url, { maxRetriesPerRequest: 0 });
  const connection = await PipelinedConnection.open({
    locate: () => Promise.resolve({ host: '127.0.0.1', port: own.port }),
    deadlineMs: 2000,
    connectTimeoutMs: 2000,
    reconnectDelayMs: () => 50,
  });
  const evalCalls = async () => Number(/cmdstat_eval:calls=(\d+)/.exec(await stats.info('commandstats'))?.[1] ?? 0);
  try {
    const echo = script(`return ARGV[1] -- ${Date.now()}`);
    const call = (arg: string) => connection.script(echo, [], [arg], (reply) => reply, 'authorize');
    const burst = (name: string) => Promise.all(Array.from({ length: 50 }, (_, i) => call(`${name} ${i}`)));
    expect(await call('loads it')).toBe('loads it');
    for (const round of ['first flush', 'second flush']) {
      await stats.config('RESETSTAT');
      await stats.script('FLUSH');
      expect(await burst(round)).toEqual(Array.from({ length: 50 }, (_, i) => `${round} ${i}`));
      expect([round, await evalCalls()]).toEqual([round, 1]);
    }
  } finally {
    await connection.close();
    stats.disconnect();
    await own.stop();
  }
});

it('fails a reloaded script at its deadline when a command behind it was answered first, and goes on in order', async () => {
  const connection = await open();
  try {
    // Busy for ARGV[1] µs on Redis's clock: longer than the deadline on the second call.
    const slow = script(
      `local s = redis.call('TIME') repeat local n = redis.call('TIME') until (n[1] - s[1]) * 1000000 + n[2] - s[2] >= tonumber(ARGV[1]) return 'done' -- ${Date.now()}`,
    );
    await connection.script(slow, [], ['0'], (reply) => reply, 'authorize');
    await direct.script('FLUSH');
    await direct.set('cc:overtaking', 'answered first');
    // NOSCRIPT sends the script again behind the GET: the GET is answered before it.
    const reloaded = connection.script(slow, [], [String(DEADLINE_MS * 3 * 1000)], (reply) => reply, 'authorize');
    const overtaking = connection.get('cc:overtaking', asText, 'resolve_key');
    await expect(overtaking).resolves.toBe('answered first');
    await expect(reloaded).rejects.toThrow(`Redis did not answer within ${DEADLINE_MS} ms`);
    await direct.set('cc:after-reload', 'next value');
    expect(await connection.get('cc:after-reload', asText, 'resolve_key')).toBe('next value');
  } finally {
    await connection.close();
  }
});

it('fails at once while Redis is down, and reconnects by itself when it is back, scripts included', async () => {
  const own = await spawnTestRedisServer();
  const connection = await PipelinedConnection.open({
    locate: () => Promise.resolve({ host: '127.0.0.1', port: own.port }),
    deadlineMs: DEADLINE_MS,
    connectTimeoutMs: 2000,
    reconnectDelayMs: () => 50,
  });
  let restarted: TestRedis | undefined;
  try {
    const echo = script(`return 'script ran ${Date.now()}'`);
    expect(await connection.script(echo, [], [], (reply) => reply, 'authorize')).toMatch(/^script ran/);
    await own.stop();
    await new Promise((resolve) => setTimeout(resolve, 50));
    // Refused as down, not failed at the deadline.
    await expect(connection.get('cc:down', asText, 'resolve_key')).rejects.toThrow(/not connected to Redis/);
    restarted = await spawnTestRedisServer({ port: own.port });
    const back = performance.now();
    let answer: unknown;
    while (performance.now() - back < 2000) {
      try {
        answer = await connection.script(echo, [], [], (reply) => reply, 'authorize');
        break;
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }
    expect(answer).toMatch(/^script ran/);
  } finally {
    await connection.close();
    await restarted?.stop();
    await own.stop().catch(() => undefined);
  }
});

it('drops a connection Redis stopped answering (SIGSTOP: TCP stays up), so unanswered commands do not pile up, and reconnects', async () => {
  const own = await spawnTestRedisServer();
  const connection = await PipelinedConnection.open({
    locate: () => Promise.resolve({ host: '127.0.0.1', port: own.port }),
    deadlineMs: 50,
    connectTimeoutMs: 300,
    reconnectDelayMs: () => 20,
  });
  try {
    expect(await connection.get('cc:stopped', asText, 'resolve_key')).toBeNull();
    process.kill(own.pid!, 'SIGSTOP');
    let issued = 0;
    let mostAwaiting = 0;
    const failures = new Set<string>();
    const until = performance.now() + 1500;
    while (performance.now() < until) {
      for (let i = 0; i < 20; i += 1) {
        issued += 1;
        connection.get('cc:stopped', asText, 'resolve_key').catch((error: Error) => failures.add(error.message.replace(/\d+ ms/, 'N ms')));
      }
      mostAwaiting = Math.max(mostAwaiting, connection.awaitingReplies);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    // Each command stays failed at its deadline; the written ones are let go once the connection is dropped.
    expect(mostAwaiting).toBeLessThan(issued / 2);
    expect(failures).toContain('Redis command failed: Redis did not answer within N ms');
    expect(failures).toContain('Redis command failed: the connection to Redis was lost');
    process.kill(own.pid!, 'SIGCONT');
    const back = performance.now();
    let answer: unknown = 'no answer';
    while (performance.now() - back < 3000 && answer === 'no answer') {
      answer = await connection.get('cc:stopped', asText, 'resolve_key').catch(() => 'no answer');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(answer).toBeNull();
  } finally {
    if (own.pid !== undefined) process.kill(own.pid, 'SIGCONT');
    await connection.close();
    await own.stop();
  }
});

it('authenticates and selects the database it is given', async () => {
  const guarded = await spawnTestRedisServer();
  const setup = new Redis({ port: guarded.port, disconnectTimeout: 50 });
  await setup.config('SET', 'requirepass', 's3cret-for-check-connection');
  setup.disconnect();
  const admin = new Redis({ port: guarded.port, password: 's3cret-for-check-connection', db: 3, disconnectTimeout: 50 });
  try {
    await admin.set('cc:db3', 'in database 3');
    const connection = await PipelinedConnection.open({
      locate: () => Promise.resolve({ host: '127.0.0.1', port: guarded.port, password: 's3cret-for-check-connection', db: 3 }),
      deadlineMs: DEADLINE_MS,
      connectTimeoutMs: 2000,
      reconnectDelayMs: () => 50,
    });
    try {
      expect(await connection.get('cc:db3', asText, 'resolve_key')).toBe('in database 3');
    } finally {
      await connection.close();
    }
    await expect(
      PipelinedConnection.open({
        locate: () => Promise.resolve({ host: '127.0.0.1', port: guarded.port, password: 'wrong' }),
        deadlineMs: DEADLINE_MS,
        connectTimeoutMs: 2000,
        reconnectDelayMs: () => 50,
      }),
    ).rejects.toThrow(/Redis refused the connection setup/);
  } finally {
    admin.disconnect();
    await guarded.stop();
  }
});

it('refuses a server that is not the master when it must be one (a Sentinel named a replica)', async () => {
  const replica = await spawnTestRedisServer({ extraArgs: ['--replicaof', '127.0.0.1', String(redis.port)] });
  try {
    await expect(
      PipelinedConnection.open({
        locate: () => Promise.resolve({ host: '127.0.0.1', port: replica.port, mustBeMaster: true }),
        deadlineMs: DEADLINE_MS,
        connectTimeoutMs: 2000,
        reconnectDelayMs: () => 50,
      }),
    ).rejects.toThrow(/is not a master/);
  } finally {
    await replica.stop();
  }
});

it('fails the setup of a master that accepts but never answers (AUTH and ROLE unanswered) without an unhandled rejection', async () => {
  // Accepts the connection and reads, never answers: a hung master a Sentinel still names.
  const silent = net.createServer((socket) => socket.resume());
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  process.on('unhandledRejection', onUnhandled);
  try {
    await expect(
      PipelinedConnection.open({
        locate: () =>
          Promise.resolve({ host: '127.0.0.1', port: (silent.address() as net.AddressInfo).port, password: 'pw', mustBeMaster: true }),
        deadlineMs: DEADLINE_MS,
        connectTimeoutMs: 100,
        reconnectDelayMs: () => 50,
      }),
    ).rejects.toThrow(/did not answer within 100 ms/);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(unhandled).toEqual([]);
  } finally {
    process.off('unhandledRejection', onUnhandled);
    await new Promise((resolve) => silent.close(resolve));
  }
});

it('reconnects on one path when the server closes the connection during the setup (a proxy whose Redis is down), one socket at a time', async () => {
  // A fake Redis behind a proxy: while `refusing`, each connection is closed as soon as AUTH comes; otherwise GET answers
  // the key's own name, anything else OK.
  let refusing = false;
  let accepted = 0;
  const live = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    accepted += 1;
    live.add(socket);
    socket.on('close', () => live.delete(socket));
    let buffered = '';
    socket.on('data', (chunk) => {
      if (refusing) {
        socket.destroy();
        return;
      }
      buffered += String(chunk);
      let out = '';
      for (let match; (match = /^\*(\d+)\r\n((?:\$\d+\r\n[^\r]*\r\n)+)/.exec(buffered)) !== null;) {
        const parts = match[2]!.split('\r\n').filter((_, i) => i % 2 === 1);
        if (parts.length < Number(match[1])) break;
        buffered = buffered.slice(match[0].length);
        out += parts[0] === 'GET' ? `$${parts[1]!.length}\r\n${parts[1]}\r\n` : '+OK\r\n';
      }
      socket.write(out);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const connection = await PipelinedConnection.open({
    locate: () => Promise.resolve({ host: '127.0.0.1', port: (server.address() as net.AddressInfo).port, password: 'pw' }),
    deadlineMs: 1000,
    connectTimeoutMs: 1000,
    reconnectDelayMs: () => 50,
  });
  try {
    expect(await connection.get('first', asText, 'resolve_key')).toBe('first');
    refusing = true;
    const before = accepted;
    for (const socket of live) socket.destroy();
    await new Promise((resolve) => setTimeout(resolve, 600));
    // One attempt per 50 ms pause at most (each attempt doubling them would make thousands).
    expect(accepted - before).toBeLessThanOrEqual(13);
    refusing = false;
    const back = performance.now();
    while (performance.now() - back < 2000) {
      if (
        await connection.get('probe', asText, 'resolve_key').then(
          () => true,
          () => false,
        )
      )
        break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(live.size).toBe(1);
    const keys = Array.from({ length: 100 }, (_, i) => `key-${i}`);
    expect(await Promise.all(keys.map((key) => connection.get(key, asText, 'resolve_key')))).toEqual(keys);
  } finally {
    await connection.close();
    for (const socket of live) socket.destroy();
    await new Promise((resolve) => server.close(resolve));
  }
});

it('fails the commands of a connection lost in the middle of a reply, and reads the next connection from a clean start', async () => {
  // The first connection answers half a bulk string and drops; later ones answer each GET with the key's name.
  let connections = 0;
  const server = net.createServer((socket) => {
    connections += 1;
    const first = connections === 1;
    socket.on('data', (chunk) => {
      const keys = [...String(chunk).matchAll(/\$3\r\nGET\r\n\$\d+\r\n([^\r]*)\r\n/g)].map((match) => match[1]!);
      if (first) socket.end('$40\r\nhalf of a reply');
      else socket.write(keys.map((key) => `$${key.length}\r\n${key}\r\n`).join(''));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const connection = await PipelinedConnection.open({
    locate: () => Promise.resolve({ host: '127.0.0.1', port: (server.address() as net.AddressInfo).port }),
    deadlineMs: 1000,
    connectTimeoutMs: 1000,
    reconnectDelayMs: () => 20,
  });
  try {
    const lost = await Promise.allSettled([connection.get('a', asText, 'resolve_key'), connection.get('b', asText, 'resolve_key')]);
    expect(lost.map((outcome) => (outcome.status === 'rejected' ? (outcome.reason as Error).message : outcome.value))).toEqual([
      'Redis command failed: the connection to Redis was lost',
      'Redis command failed: the connection to Redis was lost',
    ]);
    const back = performance.now();
    let answer: unknown = 'no answer';
    while (performance.now() - back < 2000 && answer === 'no answer') {
      answer = await connection.get('after', asText, 'resolve_key').catch(() => 'no answer');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(answer).toBe('after');
  } finally {
    await connection.close();
    await new Promise((resolve) => server.close(resolve));
  }
});

it('reports every command to the timing hook: operation, seconds, failed', async () => {
  const connection = await open();
  const times: [CheckPathOperation, number, boolean][] = [];
  connection.timeWith((operation, seconds, failed) => times.push([operation, seconds, failed]));
  try {
    await connection.get('cc:timed', asText, 'resolve_key');
    await expect(
      connection.script(script("return redis.error_reply('ERR refused on purpose')"), [], [], (reply) => reply, 'authorize'),
    ).rejects.toThrow('refused on purpose');
    expect(times).toEqual([
      ['resolve_key', expect.any(Number), false],
      ['authorize', expect.any(Number), true],
    ]);
    for (const [, seconds] of times) expect(seconds).toBeGreaterThan(0);
  } finally {
    await connection.close();
  }
});
