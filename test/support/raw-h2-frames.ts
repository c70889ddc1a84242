/**
 * An HTTP/2 peer written frame by frame on a socket, for what no real client
 * sends: frames on the wrong stream, of the wrong size, header blocks that do
 * not decode, more streams than the server allows. It records every frame
 * the server sends, with the socket read it came in.
 */
import * as net from 'node:net';
import { hpackString } from './hpack-encoding';

export const FRAME = {
  DATA: 0x0,
  HEADERS: 0x1,
  PRIORITY: 0x2,
  RST_STREAM: 0x3,
  SETTINGS: 0x4,
  PING: 0x6,
  GOAWAY: 0x7,
  WINDOW_UPDATE: 0x8,
  CONTINUATION: 0x9,
} as const;
export const FLAG = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4, PADDED: 0x8, PRIORITY: 0x20 } as const;

export interface ReceivedFrame {
  type: number;
  flags: number;
  streamId: number;
  payload: Buffer;
  /** Which socket read (0, 1, …) the frame's last byte came in. */
  read: number;
}

export function rawFrame(type: number, flags: number, streamId: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const header = Buffer.alloc(9);
  header.writeUIntBE(payload.length, 0, 3);
  header[3] = type;
  header[4] = flags;
  header.writeUInt32BE(streamId, 5);
  return Buffer.concat([header, payload]);
}

/** A header block of literals without indexing, new names, no Huffman: always decodable, never touching the table. */
export function literalBlock(headers: readonly (readonly [string, string])[]): Buffer {
  const bytes: number[] = [];
  for (const [name, value] of headers) {
    bytes.push(0x00, ...hpackString(name), ...hpackString(value));
  }
  return Buffer.from(bytes);
}

export function grpcRequestBlock(path: string): Buffer {
  return literalBlock([
    [':method', 'POST'],
    [':scheme', 'http'],
    [':path', path],
    [':authority', 'test'],
    ['content-type', 'application/grpc'],
    ['te', 'trailers'],
  ]);
}

export interface RawPeer {
  socket: net.Socket;
  /** Every frame the server sent but PING ACKs, which are only counted: a test may draw millions of them. */
  frames: ReceivedFrame[];
  pingAcks(): number;
  send(...frames: Buffer[]): void;
  /** Resolves when the server has closed the connection. */
  closed: Promise<void>;
  /** The server's GOAWAY, once it came: its last stream id and error code. */
  goaway(): { lastStreamId: number; code: number; debug: string } | undefined;
  destroy(): void;
}

/** Connects, sends the preface and an empty SETTINGS, and ACKs the server's SETTINGS and PINGs. */
export async function rawPeer(port: number, options: { ackPings?: boolean } = {}): Promise<RawPeer> {
  const socket = net.connect(port, '127.0.0.1');
  socket.on('error', () => undefined);
  await new Promise((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  const frames: ReceivedFrame[] = [];
  let buffered = Buffer.alloc(0);
  let reads = 0;
  let pingAcks = 0;
  socket.on('data', (chunk: Buffer) => {
    buffered = Buffer.concat([buffered, chunk]);
    while (buffered.length >= 9) {
      const length = buffered.readUIntBE(0, 3);
      if (buffered.length < 9 + length) break;
      if (buffered[3] === FRAME.PING && buffered[4]! & FLAG.ACK) {
        pingAcks += 1;
        buffered = buffered.subarray(9 + length);
        continue;
      }
      const frame: ReceivedFrame = {
        type: buffered[3]!,
        flags: buffered[4]!,
        streamId: buffered.readUInt32BE(5) & 0x7fffffff,
        payload: Buffer.from(buffered.subarray(9, 9 + length)),
        read: reads,
      };
      frames.push(frame);
      buffered = buffered.subarray(9 + length);
      if (frame.type === FRAME.SETTINGS && (frame.flags & FLAG.ACK) === 0) socket.write(rawFrame(FRAME.SETTINGS, FLAG.ACK, 0));
      if (frame.type === FRAME.PING && (frame.flags & FLAG.ACK) === 0 && options.ackPings !== false) {
        socket.write(rawFrame(FRAME.PING, FLAG.ACK, 0, frame.payload));
      }
    }
    reads += 1;
  });
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.write(Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1'), rawFrame(FRAME.SETTINGS, 0, 0)]));
  return {
    socket,
    frames,
    pingAcks: () => pingAcks,
    send: (...out) => socket.write(Buffer.concat(out)),
    closed,
    goaway: () => {
      const frame = frames.find((f) => f.type === FRAME.GOAWAY);
      if (!frame) return undefined;
      return {
        lastStreamId: frame.payload.readUInt32BE(0) & 0x7fffffff,
        code: frame.payload.readUInt32BE(4),
        debug: frame.payload.subarray(8).toString('latin1'),
      };
    },
    destroy: () => socket.destroy(),
  };
}
