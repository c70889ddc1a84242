/**
 * Protobuf encoding of the CheckResponse objects built by
 * src/check/responses/check-response.ts, written out for their fixed shape.
 *
 * protobufjs would otherwise encode each answer (fromObject, then encode),
 * which was the largest single cost of a decision in our own code
 * (measured: about a quarter of the Check handler's CPU). This writer
 * sizes the message, then writes it into one buffer, with protobufjs's
 * field order and its rule that a field present on the object is written
 * even when it holds the default value, so the bytes are identical (checked by
 * test/unit/grpc/check-response-encoding.test.ts against proto-loader and
 * Envoy's official protos). Anything outside the known shape falls back to
 * the generic encoder.
 *
 * Field numbers (proto/envoy/...): CheckResponse{status=1, denied_response=2,
 * ok_response=3}; google.rpc.Status{code=1, message=2};
 * DeniedHttpResponse{status=1 (HttpStatus{code=1}), headers=2, body=3};
 * OkHttpResponse{headers=2, headers_to_remove=5, response_headers_to_add=6,
 * query_parameters_to_remove=8}; HeaderValueOption{header=1 (HeaderValue{key=1,
 * value=2}), append=2 (BoolValue{value=1}), append_action=3}.
 */
import type { CheckResponse, HeaderValueOption } from './responses/check-response';

const APPEND_ACTIONS: Readonly<Record<string, number>> = {
  APPEND_IF_EXISTS_OR_ADD: 0,
  ADD_IF_ABSENT: 1,
  OVERWRITE_IF_EXISTS_OR_ADD: 2,
  OVERWRITE_IF_EXISTS: 3,
};

const TYPE_VARINT = 0;
const TYPE_BYTES = 2;

function varintSize(value: number): number {
  if (value < 0x80) return 1;
  if (value < 0x4000) return 2;
  if (value < 0x200000) return 3;
  if (value < 0x10000000) return 4;
  return 5;
}

/** Size of a length-delimited field (tag, length, payload) whose payload is `length` bytes. */
function delimited(length: number): number {
  return 1 + varintSize(length) + length;
}

/**
 * Strings up to this length that are all ASCII are measured and copied by a
 * loop here: for the short header names and values of an answer, one call
 * into Buffer's native code (byteLength, write) costs more than the copy
 * (measured with test/bench/hot-path.ts).
 */
const SHORT_STRING = 64;

/** UTF-8 length of `text`. */
function utf8Length(text: string): number {
  const length = text.length;
  if (length > SHORT_STRING) return Buffer.byteLength(text);
  for (let i = 0; i < length; i += 1) {
    if (text.charCodeAt(i) >= 0x80) return Buffer.byteLength(text);
  }
  return length;
}

/** A uint32 that fits the single-byte tags and simple varints used here. */
function isSmallUint(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= 0xffffffff;
}

/**
 * The sizes measured by the first pass, read back in the same order by the
 * second: one list reused by every encoding (encoding is synchronous), so an
 * answer's sizes allocate nothing.
 */
class SizeList {
  private values = new Int32Array(256);
  private length = 0;
  private next = 0;

  reset(): void {
    this.length = 0;
    this.next = 0;
  }

  push(value: number): number {
    if (this.length === this.values.length) {
      const grown = new Int32Array(this.values.length * 2);
      grown.set(this.values);
      this.values = grown;
    }
    this.values[this.length++] = value;
    return value;
  }

  shift(): number {
    return this.values[this.next++]!;
  }
}

const sizes = new SizeList();

/**
 * Measures a HeaderValueOption (its size, then header, key and value sizes
 * go on `sizes`); -1 when it is not of the shape check-response.ts builds.
 */
function sizeOption(option: HeaderValueOption): number {
  if (
    !option ||
    typeof option !== 'object' ||
    !option.header ||
    typeof option.header.key !== 'string' ||
    typeof option.header.value !== 'string'
  ) {
    return -1;
  }
  if (typeof APPEND_ACTIONS[option.append_action] !== 'number') return -1;
  if (option.append !== undefined && typeof option.append?.value !== 'boolean') return -1;
  const keyBytes = utf8Length(option.header.key);
  const valueBytes = utf8Length(option.header.value);
  const headerSize = delimited(keyBytes) + delimited(valueBytes);
  // BoolValue{value}: tag and one varint byte; append_action: tag and one varint byte.
  const size = delimited(headerSize) + (option.append === undefined ? 0 : delimited(2)) + 2;
  sizes.push(size);
  sizes.push(headerSize);
  sizes.push(keyBytes);
  sizes.push(valueBytes);
  return size;
}

/** The payload size of a repeated HeaderValueOption field (each option delimited), or -1. */
function sizeOptions(options: unknown): number {
  if (!Array.isArray(options)) return -1;
  let total = 0;
  for (let i = 0; i < options.length; i += 1) {
    const size = sizeOption(options[i] as HeaderValueOption);
    if (size < 0) return -1;
    total += delimited(size);
  }
  return total;
}

/** The payload size of a repeated string field (each string's bytes go on `sizes`), or -1. */
function sizeStrings(list: unknown): number {
  if (!Array.isArray(list)) return -1;
  let total = 0;
  for (let i = 0; i < list.length; i += 1) {
    const item: unknown = list[i];
    if (typeof item !== 'string') return -1;
    total += delimited(sizes.push(utf8Length(item)));
  }
  return total;
}

class Writer {
  constructor(
    private readonly buffer: Buffer,
    private offset: number,
  ) {}

  varint(value: number): void {
    let rest = value;
    while (rest >= 0x80) {
      this.buffer[this.offset++] = (rest & 0x7f) | 0x80;
      rest >>>= 7;
    }
    this.buffer[this.offset++] = rest;
  }

  tag(field: number, type: number): void {
    this.buffer[this.offset++] = (field << 3) | type;
  }

  string(field: number, text: string, bytes: number): void {
    this.tag(field, TYPE_BYTES);
    this.varint(bytes);
    if (bytes === text.length && bytes <= SHORT_STRING) {
      // ASCII (a byte per character): copied here, see SHORT_STRING.
      const { buffer } = this;
      let at = this.offset;
      for (let i = 0; i < bytes; i += 1) buffer[at++] = text.charCodeAt(i);
      this.offset = at;
    } else {
      this.offset += this.buffer.write(text, this.offset, 'utf8');
    }
  }

  /** A repeated HeaderValueOption field, with the sizes sizeOptions() measured. */
  options(field: number, options: readonly HeaderValueOption[]): void {
    for (const option of options) {
      this.tag(field, TYPE_BYTES);
      this.varint(sizes.shift());
      this.tag(1, TYPE_BYTES);
      this.varint(sizes.shift());
      this.string(1, option.header.key, sizes.shift());
      this.string(2, option.header.value, sizes.shift());
      if (option.append !== undefined) {
        this.tag(2, TYPE_BYTES);
        this.varint(2);
        this.tag(1, TYPE_VARINT);
        this.varint(option.append.value ? 1 : 0);
      }
      this.tag(3, TYPE_VARINT);
      this.varint(APPEND_ACTIONS[option.append_action]!);
    }
  }

  /** A repeated string field, with the sizes sizeStrings() measured. */
  strings(field: number, list: readonly string[]): void {
    for (const text of list) this.string(field, text, sizes.shift());
  }

  done(): Buffer {
    return this.buffer;
  }
}

/**
 * The CheckResponse as protobuf bytes, or undefined when the object is not
 * of the shape check-response.ts builds (the caller then uses the generic
 * encoder).
 */
export function encodeCheckResponse(response: CheckResponse): Buffer | undefined {
  return encodeAfter(response, 0);
}

/** The CheckResponse as a gRPC length-prefixed message (flag 0, big-endian length), written in one buffer; undefined as above. */
export function encodeCheckResponseFrame(response: CheckResponse): Buffer | undefined {
  const frame = encodeAfter(response, 5);
  if (!frame) return undefined;
  frame[0] = 0;
  frame.writeUInt32BE(frame.length - 5, 1);
  return frame;
}

/**
 * The encoding, after `headroom` bytes left for the caller. Two passes over
 * the object: the first checks its shape and measures every nested message
 * (onto `sizes`), the second writes, in protobufjs's field order.
 */
function encodeAfter(response: CheckResponse, headroom: number): Buffer | undefined {
  if (!response || typeof response !== 'object' || !response.status) return undefined;
  const { status } = response;
  if (!isSmallUint(status.code) || typeof status.message !== 'string') return undefined;
  if ((response.denied_response === undefined) === (response.ok_response === undefined)) return undefined;
  sizes.reset();
  const messageBytes = utf8Length(status.message);
  const statusSize = 1 + varintSize(status.code) + delimited(messageBytes);
  let size = delimited(statusSize);

  const denied = response.denied_response;
  const ok = response.ok_response;
  let bodySize = 0;
  let httpSize = 0;
  let bodyBytes = 0;
  if (denied) {
    if (!denied.status || !isSmallUint(denied.status.code) || typeof denied.body !== 'string') return undefined;
    httpSize = 1 + varintSize(denied.status.code);
    const headers = sizeOptions(denied.headers);
    if (headers < 0) return undefined;
    bodyBytes = utf8Length(denied.body);
    bodySize = delimited(httpSize) + headers + delimited(bodyBytes);
  } else if (ok) {
    // Measured in the order they are written.
    const headers = sizeOptions(ok.headers);
    const remove = headers < 0 ? -1 : sizeStrings(ok.headers_to_remove);
    const add = remove < 0 ? -1 : sizeOptions(ok.response_headers_to_add);
    const removeQuery = add < 0 ? -1 : sizeStrings(ok.query_parameters_to_remove);
    if (removeQuery < 0) return undefined;
    bodySize = headers + remove + add + removeQuery;
  }
  size += delimited(bodySize);

  const writer = new Writer(Buffer.allocUnsafe(headroom + size), headroom);
  writer.tag(1, TYPE_BYTES);
  writer.varint(statusSize);
  writer.tag(1, TYPE_VARINT);
  writer.varint(status.code);
  writer.string(2, status.message, messageBytes);
  if (denied) {
    writer.tag(2, TYPE_BYTES);
    writer.varint(bodySize);
    writer.tag(1, TYPE_BYTES);
    writer.varint(httpSize);
    writer.tag(1, TYPE_VARINT);
    writer.varint(denied.status.code);
    writer.options(2, denied.headers);
    writer.string(3, denied.body, bodyBytes);
  } else if (ok) {
    writer.tag(3, TYPE_BYTES);
    writer.varint(bodySize);
    // Declaration order of OkHttpResponse, as protobufjs writes it.
    writer.options(2, ok.headers);
    writer.strings(5, ok.headers_to_remove);
    writer.options(6, ok.response_headers_to_add);
    writer.strings(8, ok.query_parameters_to_remove);
  }
  return writer.done();
}
