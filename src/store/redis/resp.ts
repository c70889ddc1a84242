/**
 * The Redis protocol (RESP2) as far as the Check connection needs it:
 * commands out as arrays of bulk strings, and replies in (simple strings,
 * errors, integers, bulk strings, arrays). Hand-written because the Check
 * path is measured to spend most of its client CPU in the general client's
 * per-command machinery (test/bench/redis-check-path.ts); the tests hold it
 * to what real Redis sends and to ioredis's reading of the same replies.
 */

/** An error reply (`-NOSCRIPT …`, `-READONLY …`): Redis answered, and refused. */
export class RedisReplyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ReplyError';
  }

  /** The error's first word, e.g. NOSCRIPT, READONLY, LOADING, BUSY. */
  get code(): string {
    const space = this.message.indexOf(' ');
    return space < 0 ? this.message : this.message.slice(0, space);
  }
}

export type RespReply = string | number | null | RedisReplyError | RespReply[];

/*
 * Commands are built as byte strings: each character one byte (latin1), so
 * an argument of arbitrary bytes (BinaryArgument) travels in the same text
 * as the rest, and the connection writes the text with the 'latin1'
 * encoding. Text is sent as its UTF-8 bytes.
 */

/** `$<bytes>\r\n<bytes>\r\n` for a text, as its UTF-8 bytes. */
export function bulk(text: string): string {
  const length = Buffer.byteLength(text);
  // Equal lengths: ASCII only, whose UTF-8 bytes are its characters (the common case, and no copy).
  if (length === text.length) return `$${length}\r\n${text}\r\n`;
  return `$${length}\r\n${Buffer.from(text, 'utf8').toString('latin1')}\r\n`;
}

/**
 * An argument of arbitrary bytes (a packed plan): as a Buffer, and as the bulk string the commands are built of, made
 * once (the plan goes with every decision).
 */
export class BinaryArgument {
  readonly bulk: string;
  constructor(readonly buffer: Buffer) {
    this.bulk = `$${buffer.length}\r\n${buffer.toString('latin1')}\r\n`;
  }
}

/** A script's argument: text, or bytes. */
export type ScriptArgument = string | BinaryArgument;

/** The bulk string of a script's argument. */
export function argumentBulk(argument: ScriptArgument): string {
  return typeof argument === 'string' ? bulk(argument) : argument.bulk;
}

/** A whole command: `*<count>\r\n` and each part as a bulk string, as a byte string (write it as 'latin1'). */
export function command(parts: readonly string[]): string {
  let out = `*${parts.length}\r\n`;
  for (const part of parts) out += bulk(part);
  return out;
}

const CR = 13;
const PLUS = 43;
const MINUS = 45;
const COLON = 58;
const DOLLAR = 36;
const STAR = 42;

/** Marks "the reply is not complete yet" inside the parser (never escapes it). */
const INCOMPLETE = Symbol('incomplete');

/**
 * Reads replies from a byte stream. `push` each chunk as it arrives; every
 * complete reply goes to `onReply` in order. A reply split across chunks is
 * parsed again from its start once enough bytes are there (the length of a
 * bulk string says how many), so a large reply arriving in many chunks is
 * copied once. A byte sequence that is not RESP throws.
 */
export class RespReader {
  /** Bytes of an incomplete reply, not yet joined. */
  private held: Buffer[] = [];
  private heldLength = 0;
  /** How many bytes the incomplete reply needs at least before it is worth parsing again. */
  private wanted = 0;
  private offset = 0;
  /** While parsing: the buffer length a bulk string that did not fit needs. */
  private needed = 0;

  constructor(private readonly onReply: (reply: RespReply) => void) {}

  push(chunk: Buffer): void {
    if (this.heldLength + chunk.length < this.wanted) {
      this.held.push(chunk);
      this.heldLength += chunk.length;
      return;
    }
    const buffer = this.held.length === 0 ? chunk : Buffer.concat([...this.held, chunk]);
    this.held = [];
    this.heldLength = 0;
    this.wanted = 0;
    this.offset = 0;
    while (this.offset < buffer.length) {
      const start = this.offset;
      this.needed = 0;
      const reply = this.read(buffer);
      if (reply === INCOMPLETE) {
        const rest = buffer.subarray(start);
        this.held = [rest];
        this.heldLength = rest.length;
        this.wanted = Math.max(rest.length + 1, this.needed - start);
        return;
      }
      this.onReply(reply);
    }
  }

  /** Drops a partial reply (after the connection closed). */
  reset(): void {
    this.held = [];
    this.heldLength = 0;
    this.wanted = 0;
  }

  private read(buffer: Buffer): RespReply | typeof INCOMPLETE {
    const type = buffer[this.offset];
    const lineEnd = buffer.indexOf(CR, this.offset + 1);
    // The line and its \n must both be here.
    if (lineEnd < 0 || lineEnd + 1 >= buffer.length) return INCOMPLETE;
    const lineStart = this.offset + 1;
    this.offset = lineEnd + 2;
    switch (type) {
      case PLUS:
        // UTF-8 as ioredis reads it: a script's {ok=…} may carry any byte but CR and LF.
        return buffer.toString('utf8', lineStart, lineEnd);
      case MINUS:
        return new RedisReplyError(buffer.toString('utf8', lineStart, lineEnd));
      case COLON:
        return integerAt(buffer, lineStart, lineEnd);
      case DOLLAR: {
        const length = integerAt(buffer, lineStart, lineEnd);
        if (length < 0) return null;
        const end = this.offset + length;
        if (end + 2 > buffer.length) {
          this.needed = end + 2;
          return INCOMPLETE;
        }
        this.offset = end + 2;
        return buffer.toString('utf8', end - length, end);
      }
      case STAR: {
        const count = integerAt(buffer, lineStart, lineEnd);
        if (count < 0) return null;
        const items: RespReply[] = new Array<RespReply>(count);
        for (let i = 0; i < count; i += 1) {
          if (this.offset >= buffer.length) return INCOMPLETE;
          const item = this.read(buffer);
          if (item === INCOMPLETE) return INCOMPLETE;
          items[i] = item;
        }
        return items;
      }
      default:
        throw new Error(`not a RESP reply: type byte ${String(type)}`);
    }
  }
}

/** A decimal integer written in ASCII between start and end (RESP lengths and integer replies). */
function integerAt(buffer: Buffer, start: number, end: number): number {
  let at = start;
  let negative = false;
  if (buffer[at] === MINUS) {
    negative = true;
    at += 1;
  }
  if (at === end) throw new Error('not a RESP integer: no digits');
  let value = 0;
  for (; at < end; at += 1) {
    const digit = buffer[at]! - 48;
    if (digit < 0 || digit > 9) throw new Error('not a RESP integer');
    value = value * 10 + digit;
  }
  return negative ? -value : value;
}
