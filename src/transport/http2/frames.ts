/**
 * HTTP/2 (RFC 9113) frame types, flags, error codes and settings: the
 * numbers the connection reads and writes, in one place.
 */

export const FRAME_HEADER_BYTES = 9;
/** The client's connection preface (RFC 9113 §3.4), before its first SETTINGS. */
export const CLIENT_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

export const FrameType = {
  DATA: 0x0,
  HEADERS: 0x1,
  PRIORITY: 0x2,
  RST_STREAM: 0x3,
  SETTINGS: 0x4,
  PUSH_PROMISE: 0x5,
  PING: 0x6,
  GOAWAY: 0x7,
  WINDOW_UPDATE: 0x8,
  CONTINUATION: 0x9,
} as const;

export const Flag = {
  END_STREAM: 0x1,
  ACK: 0x1,
  END_HEADERS: 0x4,
  PADDED: 0x8,
  PRIORITY: 0x20,
} as const;

/** RFC 9113 §7: the codes RST_STREAM and GOAWAY carry. */
export const ErrorCode = {
  NO_ERROR: 0x0,
  PROTOCOL_ERROR: 0x1,
  INTERNAL_ERROR: 0x2,
  FLOW_CONTROL_ERROR: 0x3,
  SETTINGS_TIMEOUT: 0x4,
  STREAM_CLOSED: 0x5,
  FRAME_SIZE_ERROR: 0x6,
  REFUSED_STREAM: 0x7,
  CANCEL: 0x8,
  COMPRESSION_ERROR: 0x9,
  CONNECT_ERROR: 0xa,
  ENHANCE_YOUR_CALM: 0xb,
  INADEQUATE_SECURITY: 0xc,
  HTTP_1_1_REQUIRED: 0xd,
} as const;

export const Setting = {
  HEADER_TABLE_SIZE: 0x1,
  ENABLE_PUSH: 0x2,
  MAX_CONCURRENT_STREAMS: 0x3,
  INITIAL_WINDOW_SIZE: 0x4,
  MAX_FRAME_SIZE: 0x5,
  MAX_HEADER_LIST_SIZE: 0x6,
} as const;

/** Both sides start with these windows and frame size until SETTINGS say otherwise (RFC 9113 §6.5.2, §6.9.2). */
export const DEFAULT_WINDOW_BYTES = 65_535;
export const DEFAULT_MAX_FRAME_BYTES = 16_384;
export const MAX_FRAME_BYTES_LIMIT = 16_777_215;
export const MAX_WINDOW_BYTES = 2 ** 31 - 1;

/** Writes a frame's 9-byte header at `offset`. */
export function writeFrameHeader(target: Buffer, offset: number, length: number, type: number, flags: number, streamId: number): void {
  target[offset] = (length >>> 16) & 0xff;
  target[offset + 1] = (length >>> 8) & 0xff;
  target[offset + 2] = length & 0xff;
  target[offset + 3] = type;
  target[offset + 4] = flags;
  target.writeUInt32BE(streamId & 0x7fffffff, offset + 5);
}
