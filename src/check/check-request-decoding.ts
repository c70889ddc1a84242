/**
 * Protobuf decoding of the part of Envoy's CheckRequest the pipeline reads:
 * attributes.request.http.{method, path, headers, header_map, body, raw_body},
 * and attributes.source.address.socket_address.address (key restrictions by address).
 *
 * protobufjs (what grpc-js servers use) would decode the whole message and turn
 * it into a plain object with every default filled in (source and
 * destination addresses, timestamps, context extensions…), which was the
 * largest single cost of a Check in the gateway's own process after the
 * answer encoding (measured: about 15% of its CPU at saturation). This reader
 * walks the same bytes and skips what it does not need.
 *
 * It follows protobufjs where they could differ: strings are decoded with
 * Buffer's UTF-8 decoder (protobufjs's BufferReader uses the same), a
 * repeated singular message replaces the earlier one, later map entries win,
 * a map entry without a key or value gets '', and malformed input (a length
 * past the end, a bad wire type, a varint over 10 bytes) throws, which the
 * server answers INTERNAL, as grpc-js does when protobufjs throws.
 * test/unit/grpc/check-request-decoding.test.ts compares the two on random
 * and Envoy-shaped requests.
 *
 * Field numbers (proto/envoy/service/auth/v3/attribute_context.proto):
 * CheckRequest{attributes=1}; AttributeContext{source=1, request=4};
 * Peer{address=1}; Address{socket_address=1}; SocketAddress{address=2};
 * Request{http=2}; HttpRequest{method=2, headers=3 (map), path=4,
 * body=11, raw_body=12, header_map=13}; HeaderMap{headers=1};
 * HeaderValue{key=1, value=2, raw_value=3}.
 *
 * With a HeaderSelection, only the headers it names are decoded, from
 * `headers` and `header_map` alike; every other header is still walked (so
 * malformed input throws just the same) but never made a string.
 */
import type { CheckRequestMessage } from './check-request';
import type { HeaderSelection } from './header-selection';
import { ProtobufReader as Reader, WIRE_BYTES } from '../transport/protobuf-reader';

type HttpRequestMessage = NonNullable<NonNullable<NonNullable<CheckRequestMessage['attributes']>['request']>['http']>;
type HeaderValueMessage = NonNullable<NonNullable<HttpRequestMessage['header_map']>['headers']>[number];

export function decodeCheckRequest(buffer: Buffer, selection?: HeaderSelection): CheckRequestMessage {
  const reader = new Reader(buffer, 0, buffer.length);
  let attributes: CheckRequestMessage['attributes'];
  while (reader.pos < reader.end) {
    const tag = reader.uint32();
    if (tag >>> 3 === 1 && (tag & 7) === WIRE_BYTES) attributes = decodeAttributes(reader.nested(), selection);
    else reader.skip(tag & 7);
  }
  return attributes ? { attributes } : {};
}

function decodeAttributes(reader: Reader, selection: HeaderSelection | undefined): NonNullable<CheckRequestMessage['attributes']> {
  let request: NonNullable<CheckRequestMessage['attributes']>['request'];
  let address: string | undefined;
  while (reader.pos < reader.end) {
    const tag = reader.uint32();
    if (tag >>> 3 === 4 && (tag & 7) === WIRE_BYTES) request = decodeRequest(reader.nested(), selection);
    // A repeated singular message replaces the earlier one, as in protobufjs: its address or none.
    else if (tag >>> 3 === 1 && (tag & 7) === WIRE_BYTES) address = nestedString(reader.nested(), [1, 1, 2]);
    else reader.skip(tag & 7);
  }
  const attributes: NonNullable<CheckRequestMessage['attributes']> = request ? { request } : {};
  if (address) attributes.source = { address: { socket_address: { address } } };
  return attributes;
}

/**
 * The string at a path of field numbers through nested messages (Peer → Address → SocketAddress → address); the
 * last occurrence wins at each level. Undefined when any level is absent.
 */
function nestedString(reader: Reader, path: readonly number[]): string | undefined {
  let found: string | undefined;
  const [field, ...rest] = path;
  while (reader.pos < reader.end) {
    const tag = reader.uint32();
    if (tag >>> 3 !== field || (tag & 7) !== WIRE_BYTES) reader.skip(tag & 7);
    else if (rest.length === 0) found = reader.string();
    else found = nestedString(reader.nested(), rest);
  }
  return found;
}

function decodeRequest(
  reader: Reader,
  selection: HeaderSelection | undefined,
): NonNullable<NonNullable<CheckRequestMessage['attributes']>['request']> {
  let http: HttpRequestMessage | undefined;
  while (reader.pos < reader.end) {
    const tag = reader.uint32();
    if (tag >>> 3 === 2 && (tag & 7) === WIRE_BYTES) http = decodeHttp(reader.nested(), selection);
    else reader.skip(tag & 7);
  }
  return http ? { http } : {};
}

function decodeHttp(reader: Reader, selection: HeaderSelection | undefined): HttpRequestMessage {
  // A null prototype: toAuthRequest adopts this map as the request's headers instead of copying it (check-request.ts).
  const http: HttpRequestMessage = { method: '', path: '', headers: Object.create(null) as Record<string, string> };
  while (reader.pos < reader.end) {
    const tag = reader.uint32();
    const wireType = tag & 7;
    if (wireType !== WIRE_BYTES) {
      reader.skip(wireType);
      continue;
    }
    switch (tag >>> 3) {
      case 2:
        http.method = reader.string();
        break;
      case 3:
        readMapEntry(reader.nested(), http.headers!, selection);
        break;
      case 4:
        http.path = reader.string();
        break;
      case 11:
        http.body = reader.string();
        break;
      case 12:
        http.raw_body = copyOfRange(reader.buffer, reader.passPayload(), reader.pos);
        break;
      case 13:
        http.header_map = { headers: decodeHeaderMap(reader.nested(), selection) };
        break;
      default:
        reader.skip(wireType);
    }
  }
  return http;
}

function readMapEntry(reader: Reader, into: Record<string, string>, selection: HeaderSelection | undefined): void {
  // Bounds first, strings after: the value of a header the selection leaves out is never decoded.
  let keyStart = ABSENT;
  let keyEnd = ABSENT;
  let valueStart = ABSENT;
  let valueEnd = ABSENT;
  while (reader.pos < reader.end) {
    const tag = reader.uint32();
    const field = tag >>> 3;
    if ((tag & 7) !== WIRE_BYTES || (field !== 1 && field !== 2)) {
      reader.skip(tag & 7);
      continue;
    }
    const start = reader.passPayload();
    if (field === 1) {
      keyStart = start;
      keyEnd = reader.pos;
    } else {
      valueStart = start;
      valueEnd = reader.pos;
    }
  }
  const key = headerName(reader.buffer, keyStart, keyEnd, selection);
  if (key === undefined) return;
  // Later entries win, as in protobufjs; the map has no prototype, so a key named __proto__ is kept, as protobufjs keeps it.
  into[key] = text(reader.buffer, valueStart, valueEnd);
}

function decodeHeaderMap(reader: Reader, selection: HeaderSelection | undefined): HeaderValueMessage[] {
  const headers: HeaderValueMessage[] = [];
  while (reader.pos < reader.end) {
    const tag = reader.uint32();
    if (tag >>> 3 === 1 && (tag & 7) === WIRE_BYTES) {
      const header = decodeHeaderValue(reader.nested(), selection);
      if (header) headers.push(header);
    } else reader.skip(tag & 7);
  }
  return headers;
}

/** Undefined: a header the selection leaves out (toAuthRequest drops a header without a name anyway). */
function decodeHeaderValue(reader: Reader, selection: HeaderSelection | undefined): HeaderValueMessage | undefined {
  // Bounds first, as readMapEntry reads them.
  let keyStart = ABSENT;
  let keyEnd = ABSENT;
  let valueStart = ABSENT;
  let valueEnd = ABSENT;
  let rawStart = ABSENT;
  let rawEnd = ABSENT;
  while (reader.pos < reader.end) {
    const tag = reader.uint32();
    const field = tag >>> 3;
    if ((tag & 7) !== WIRE_BYTES || field < 1 || field > 3) {
      reader.skip(tag & 7);
      continue;
    }
    const start = reader.passPayload();
    if (field === 1) {
      keyStart = start;
      keyEnd = reader.pos;
    } else if (field === 2) {
      valueStart = start;
      valueEnd = reader.pos;
    } else {
      rawStart = start;
      rawEnd = reader.pos;
    }
  }
  const { buffer } = reader;
  const key = headerName(buffer, keyStart, keyEnd, selection);
  if (key === undefined) return undefined;
  return {
    key,
    value: text(buffer, valueStart, valueEnd),
    raw_value: rawStart === ABSENT ? EMPTY : copyOfRange(buffer, rawStart, rawEnd),
  };
}

/** A field's start when the message did not carry it. */
const ABSENT = -1;

/**
 * A header's name, or undefined when the selection leaves it out. Without a
 * selection every header is kept, one without a name under '' (as protobufjs
 * decodes it); with one, a header without a name is left out.
 */
function headerName(buffer: Buffer, start: number, end: number, selection: HeaderSelection | undefined): string | undefined {
  if (!selection) return text(buffer, start, end);
  return start === ABSENT ? undefined : selection.keyFor(buffer, start, end);
}

/** A string field's text; '' when absent, as protobufjs decodes it. */
function text(buffer: Buffer, start: number, end: number): string {
  return start === ABSENT ? '' : buffer.toString('utf8', start, end);
}

/** A copy: the message may be a view of the connection's buffer, which must not be kept alive (or be overwritten while a decision waits). */
function copyOfRange(buffer: Buffer, start: number, end: number): Buffer {
  return Buffer.from(buffer.subarray(start, end));
}

const EMPTY = Buffer.alloc(0);
