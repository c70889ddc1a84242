/**
 * Protobuf encoding of the CheckResponse objects built by
 * src/responses/check-response.ts, written out for their fixed shape.
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
import type { CheckResponse, HeaderValueOption } from '../responses/check-response';

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
    this.offset += this.buffer.write(text, this.offset, 'utf8');
  }

  done(): Buffer {
    return this.buffer;
  }
}

/** A uint32 that fits the single-byte tags and simple varints used here. */
function isSmallUint(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= 0xffffffff;
}

interface SizedOption {
  option: HeaderValueOption;
  keyBytes: number;
  valueBytes: number;
  headerSize: number;
  appendSize: number;
  size: number;
}

function sizeOption(option: HeaderValueOption): SizedOption | undefined {
  if (
    !option ||
    typeof option !== 'object' ||
    !option.header ||
    typeof option.header.key !== 'string' ||
    typeof option.header.value !== 'string'
  ) {
    return undefined;
  }
  const action = APPEND_ACTIONS[option.append_action];
  if (action === undefined || (option.append !== undefined && typeof option.append?.value !== 'boolean')) return undefined;
  const keyBytes = Buffer.byteLength(option.header.key);
  const valueBytes = Buffer.byteLength(option.header.value);
  const headerSize = delimited(keyBytes) + delimited(valueBytes);
  // BoolValue{value}: tag and one varint byte.
  const appendSize = option.append === undefined ? -1 : 2;
  const size = delimited(headerSize) + (appendSize >= 0 ? delimited(appendSize) : 0) + 2;
  return { option, keyBytes, valueBytes, headerSize, appendSize, size };
}

function writeOption(writer: Writer, field: number, sized: SizedOption): void {
  const { option } = sized;
  writer.tag(field, TYPE_BYTES);
  writer.varint(sized.size);
  writer.tag(1, TYPE_BYTES);
  writer.varint(sized.headerSize);
  writer.string(1, option.header.key, sized.keyBytes);
  writer.string(2, option.header.value, sized.valueBytes);
  if (sized.appendSize >= 0) {
    writer.tag(2, TYPE_BYTES);
    writer.varint(sized.appendSize);
    writer.tag(1, TYPE_VARINT);
    writer.varint(option.append.value ? 1 : 0);
  }
  writer.tag(3, TYPE_VARINT);
  writer.varint(APPEND_ACTIONS[option.append_action]!);
}

function sizeOptions(options: unknown): SizedOption[] | undefined {
  if (!Array.isArray(options)) return undefined;
  const sized: SizedOption[] = [];
  for (const option of options) {
    const entry = sizeOption(option as HeaderValueOption);
    if (!entry) return undefined;
    sized.push(entry);
  }
  return sized;
}

function sizeStrings(list: unknown): number[] | undefined {
  if (!Array.isArray(list)) return undefined;
  const sizes: number[] = [];
  for (const item of list) {
    if (typeof item !== 'string') return undefined;
    sizes.push(Buffer.byteLength(item));
  }
  return sizes;
}

const sumOf = (sizes: readonly number[], each: (size: number) => number) => sizes.reduce((sum, size) => sum + each(size), 0);

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

/** The encoding, after `headroom` bytes left for the caller. */
function encodeAfter(response: CheckResponse, headroom: number): Buffer | undefined {
  if (!response || typeof response !== 'object' || !response.status) return undefined;
  const { status } = response;
  if (!isSmallUint(status.code) || typeof status.message !== 'string') return undefined;
  if ((response.denied_response === undefined) === (response.ok_response === undefined)) return undefined;
  const messageBytes = Buffer.byteLength(status.message);
  const statusSize = 1 + varintSize(status.code) + delimited(messageBytes);
  let size = delimited(statusSize);

  const denied = response.denied_response;
  const ok = response.ok_response;
  let deniedParts: { httpSize: number; headers: SizedOption[]; bodyBytes: number; size: number } | undefined;
  let okParts: { headers: SizedOption[]; remove: number[]; add: SizedOption[]; removeQuery: number[]; size: number } | undefined;
  if (denied) {
    if (!denied.status || !isSmallUint(denied.status.code) || typeof denied.body !== 'string') return undefined;
    const headers = sizeOptions(denied.headers);
    if (!headers) return undefined;
    const httpSize = 1 + varintSize(denied.status.code);
    const bodyBytes = Buffer.byteLength(denied.body);
    const deniedSize =
      delimited(httpSize) +
      sumOf(
        headers.map((h) => h.size),
        delimited,
      ) +
      delimited(bodyBytes);
    deniedParts = { httpSize, headers, bodyBytes, size: deniedSize };
    size += delimited(deniedSize);
  } else if (ok) {
    const headers = sizeOptions(ok.headers);
    const remove = sizeStrings(ok.headers_to_remove);
    const add = sizeOptions(ok.response_headers_to_add);
    const removeQuery = sizeStrings(ok.query_parameters_to_remove);
    if (!headers || !remove || !add || !removeQuery) return undefined;
    const okSize =
      sumOf(
        headers.map((h) => h.size),
        delimited,
      ) +
      sumOf(remove, delimited) +
      sumOf(
        add.map((h) => h.size),
        delimited,
      ) +
      sumOf(removeQuery, delimited);
    okParts = { headers, remove, add, removeQuery, size: okSize };
    size += delimited(okSize);
  }

  const writer = new Writer(Buffer.allocUnsafe(headroom + size), headroom);
  writer.tag(1, TYPE_BYTES);
  writer.varint(statusSize);
  writer.tag(1, TYPE_VARINT);
  writer.varint(status.code);
  writer.string(2, status.message, messageBytes);
  if (deniedParts && denied) {
    writer.tag(2, TYPE_BYTES);
    writer.varint(deniedParts.size);
    writer.tag(1, TYPE_BYTES);
    writer.varint(deniedParts.httpSize);
    writer.tag(1, TYPE_VARINT);
    writer.varint(denied.status.code);
    for (const header of deniedParts.headers) writeOption(writer, 2, header);
    writer.string(3, denied.body, deniedParts.bodyBytes);
  } else if (okParts && ok) {
    writer.tag(3, TYPE_BYTES);
    writer.varint(okParts.size);
    // Declaration order of OkHttpResponse, as protobufjs writes it.
    for (const header of okParts.headers) writeOption(writer, 2, header);
    ok.headers_to_remove.forEach((name, index) => writer.string(5, name, okParts.remove[index]!));
    for (const header of okParts.add) writeOption(writer, 6, header);
    ok.query_parameters_to_remove.forEach((name, index) => writer.string(8, name, okParts.removeQuery[index]!));
  }
  return writer.done();
}
