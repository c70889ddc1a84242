import { once } from 'node:events';
import * as net from 'node:net';
import Redis from 'ioredis';
import { RedisReplyError, RespReader, command, type RespReply } from '../../src/store/redis/resp';
import { startTestRedis, type TestRedis } from '../support/redis-server';

/**
 * The hand-written RESP reader and writer of the Check connection, held to
 * the real counterparts: every command goes to a real redis-server as the
 * writer encodes it, and every reply the reader makes of Redis's bytes must
 * equal what ioredis makes of the same command, also when the bytes arrive
 * one at a time.
 */
let redis: TestRedis;
let ioredis: Redis;

beforeAll(async () => {
  redis = await startTestRedis();
  ioredis = new Redis(redis.url, { disconnectTimeout: 50 });
});
afterAll(async () => {
  // quit() resolves on Redis's OK; the socket (and ioredis's timer that destroys it if it lingers) goes on 'end'.
  const ended = ioredis.status === 'end' ? Promise.resolve() : once(ioredis, 'end');
  await ioredis.quit();
  await ended;
  await redis.stop();
});

const prefix = `resp-test-${process.pid}:`;
const big = 'x'.repeat(100_000);
const COMMANDS: string[][] = [
  ['PING'],
  ['SET', `${prefix}text`, 'héllo wörld €'],
  ['GET', `${prefix}text`],
  ['GET', `${prefix}missing`],
  ['SET', `${prefix}empty`, ''],
  ['GET', `${prefix}empty`],
  ['INCRBY', `${prefix}counter`, '-42'],
  ['HSET', `${prefix}hash`, 'a', '1', 'b', '2'],
  ['HGETALL', `${prefix}hash`],
  ['HMGET', `${prefix}hash`, 'a', 'nope', 'b'],
  ['LRANGE', `${prefix}nolist`, '0', '-1'],
  ['SET', `${prefix}big`, big],
  ['GET', `${prefix}big`],
  ['HGET', `${prefix}text`, 'field'],
  ['EVAL', "return {1, 'two', {3, false, {'deep'}}, -4, 'ü'}", '0'],
  ['EVAL', "return redis.error_reply('CUSTOM something went wrong')", '0'],
  ['EVAL', 'return {}', '0'],
  ['EVALSHA', '0000000000000000000000000000000000000000', '0'],
  ['TIME'],
];

/** What ioredis answers for a command: its reply, or its error reply's message. */
async function ioredisReply(parts: string[]): Promise<unknown> {
  try {
    return await ioredis.call(parts[0]!, ...parts.slice(1));
  } catch (error) {
    return { error: (error as Error).message };
  }
}

function comparable(reply: RespReply): unknown {
  if (reply instanceof RedisReplyError) return { error: reply.message };
  if (Array.isArray(reply)) return reply.map(comparable);
  return reply;
}

/** Sends the commands as `command()` encodes them, feeding Redis's bytes to a RespReader `chunk` bytes at a time. */
async function rawReplies(commands: string[][], chunk: number): Promise<RespReply[]> {
  const socket = net.connect(redis.port, redis.host || '127.0.0.1');
  await new Promise((resolve) => socket.once('connect', resolve));
  const replies: RespReply[] = [];
  const reader = new RespReader((reply) => replies.push(reply));
  const done = new Promise<void>((resolve, reject) => {
    socket.on('data', (data: Buffer) => {
      try {
        for (let at = 0; at < data.length; at += chunk) reader.push(data.subarray(at, at + chunk));
      } catch (error) {
        reject(error);
      }
      if (replies.length === commands.length) resolve();
    });
  });
  // command() builds byte strings: one character, one byte.
  socket.write(commands.map(command).join(''), 'latin1');
  await done;
  socket.destroy();
  return replies;
}

it('reads every reply type exactly as ioredis does, in one chunk and byte by byte', async () => {
  const expected: unknown[] = [];
  // Each run starts from the same state: the writes answer the same.
  const reset = () => ioredis.del(`${prefix}counter`, `${prefix}hash`);
  await reset();
  for (const parts of COMMANDS) expected.push(await ioredisReply(parts));
  await reset();
  // TIME differs between the two reads: compare its shape only.
  const timeAt = COMMANDS.findIndex((parts) => parts[0] === 'TIME');
  for (const chunk of [1_000_000, 1, 7]) {
    const replies = (await rawReplies(COMMANDS, chunk)).map(comparable);
    await reset();
    expect(replies[timeAt]).toEqual([expect.stringMatching(/^\d+$/), expect.stringMatching(/^\d+$/)]);
    replies[timeAt] = expected[timeAt];
    expect(replies).toEqual(expected);
  }
});

it('encodes text by its UTF-8 byte length, so multi-byte values reach Redis intact', async () => {
  const value = 'ü€𝄞 and ascii';
  const [set, get] = await rawReplies(
    [
      ['SET', `${prefix}utf8`, value],
      ['GET', `${prefix}utf8`],
    ],
    1_000_000,
  );
  expect(set).toBe('OK');
  expect(get).toBe(value);
  expect(await ioredis.get(`${prefix}utf8`)).toBe(value);
});

it('refuses bytes that are not RESP', () => {
  const reader = new RespReader(() => undefined);
  expect(() => reader.push(Buffer.from('?what\r\n'))).toThrow('not a RESP reply');
  expect(() => new RespReader(() => undefined).push(Buffer.from(':12x\r\n'))).toThrow('not a RESP integer');
});

/** ioredis's own parser (redis-parser), untyped: what it is handed and what it hands back. */
interface IoredisParser {
  execute(chunk: Buffer): void;
}
// eslint-disable-next-line @typescript-eslint/no-require-imports
const JavascriptRedisParser = require('redis-parser') as new (options: {
  returnReply: (reply: unknown) => void;
  returnError: (error: Error) => void;
  returnFatalError: (error: Error) => void;
}) => IoredisParser;

/** A small deterministic generator (mulberry32), so a failure names its seed. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const INTEGERS = [
  '0',
  '1',
  '-1',
  '42',
  '-42',
  '9007199254740991',
  '-9007199254740991',
  '9007199254740993',
  '9223372036854775807',
  '-9223372036854775808',
];
const TEXTS = ['', 'a', 'OK', 'héllo', '€', '𝄞', 'line\r\nbreak', '\r', '\n', '*3', '$-1', 'ERR not an error', ' spaced '];

/** One reply as Redis (RESP2) can send it, and what either parser must make of it. */
function generateReply(next: () => number, depth: number): { bytes: string; value: unknown } {
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
  const text = (): string => {
    const size = next() < 0.03 ? 20_000 + Math.floor(next() * 100_000) : Math.floor(next() * 4);
    let out = '';
    while (out.length < size) out += pick(TEXTS);
    return out;
  };
  const kind = Math.floor(next() * (depth < 3 ? 8 : 6));
  switch (kind) {
    case 0: {
      // Status replies carry no CR or LF; a Lua script's {ok=…} may carry any other byte.
      const value = text().replace(/[\r\n]/g, '');
      return { bytes: `+${value}\r\n`, value };
    }
    case 1: {
      const message = `${pick(['ERR', 'NOSCRIPT', 'READONLY', 'LOADING', 'BUSY', 'MASTERDOWN', 'WRONGTYPE'])} ${text().replace(/[\r\n]/g, '')}`;
      return { bytes: `-${message}\r\n`, value: { error: message } };
    }
    case 2: {
      const digits = pick(INTEGERS);
      // Past 2^53 both read a nearby double (not always the nearest): only the first comparison holds them.
      return { bytes: `:${digits}\r\n`, value: Number.isSafeInteger(Number(digits)) ? Number(digits) : expect.any(Number) };
    }
    case 3: {
      const value = text();
      return { bytes: `$${Buffer.byteLength(value)}\r\n${value}\r\n`, value };
    }
    case 4:
      return { bytes: '$-1\r\n', value: null };
    case 5:
      return { bytes: '*-1\r\n', value: null };
    default: {
      const items = Array.from({ length: Math.floor(next() * 6) }, () => generateReply(next, depth + 1));
      return { bytes: `*${items.length}\r\n${items.map((item) => item.bytes).join('')}`, value: items.map((item) => item.value) };
    }
  }
}

function comparableIoredis(reply: unknown): unknown {
  if (reply instanceof Error) return { error: reply.message };
  if (Array.isArray(reply)) return reply.map(comparableIoredis);
  return reply;
}

it('reads generated replies, split at random boundaries, exactly as ioredis does (redis-parser)', () => {
  for (let seed = 1; seed <= 60; seed += 1) {
    const next = random(seed);
    const generated = Array.from({ length: 40 }, () => generateReply(next, 0));
    const stream = Buffer.from(generated.map((reply) => reply.bytes).join(''));
    const ours: unknown[] = [];
    const theirs: unknown[] = [];
    const reader = new RespReader((reply) => ours.push(comparable(reply)));
    const parser = new JavascriptRedisParser({
      returnReply: (reply) => theirs.push(comparableIoredis(reply)),
      returnError: (error) => theirs.push(comparableIoredis(error)),
      returnFatalError: (error) => theirs.push({ fatal: error.message }),
    });
    for (let at = 0; at < stream.length;) {
      // Mostly small pieces (every boundary inside a line or a length), now and then a large one.
      const size = next() < 0.1 ? 1 + Math.floor(next() * 70_000) : 1 + Math.floor(next() * 9);
      const piece = stream.subarray(at, at + size);
      reader.push(piece);
      parser.execute(piece);
      at += size;
    }
    expect({ seed, replies: ours }).toEqual({ seed, replies: theirs });
    expect({ seed, replies: ours }).toEqual({ seed, replies: generated.map((reply) => reply.value) });
  }
});
