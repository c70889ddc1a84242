/**
 * Protobuf decoding of the part of Envoy's ext_proc ProcessingRequest the
 * usage processor reads: which message it is, its headers (or trailers), its
 * body chunk and end-of-stream flag, and the attributes Envoy evaluated.
 *
 * Why not protobufjs: a metered answer is mostly body chunks (one message per
 * DATA frame Envoy receives from the upstream, hundreds for a long token
 * stream), and protobufjs turns each into an object with every field and
 * default filled in (metadata_context, the attribute maps, the other oneof
 * members) only for the processor to read two of them. Here a body chunk is
 * a view of the message's bytes and a flag. Measured in
 * test/unit/grpc/ext-proc-request-decoding.test.ts's benchmark note
 * (docs/design/metering-internals.md).
 *
 * It follows protobufjs where it matters: strings are decoded as UTF-8 by
 * Buffer, later map entries win, a map entry without a key gets '', unknown
 * fields of every wire type are skipped, and malformed input (a length past
 * the end, a bad wire type, a varint over 10 bytes) throws, which the
 * processor answers INTERNAL. Where the wire holds two members of the
 * `request` oneof (Envoy never sends that), the last one wins, as the
 * protobuf spec says. test/unit/grpc/ext-proc-request-decoding.test.ts
 * compares it with protobufjs and Envoy's official protos.
 *
 * Field numbers (envoy/service/ext_proc/v3/external_processor.proto):
 * ProcessingRequest{request_headers=2, response_headers=3, request_body=4,
 * response_body=5, request_trailers=6, response_trailers=7,
 * metadata_context=8, attributes=9 (map<string, Struct>),
 * observability_mode=10}; HttpHeaders{headers=1, end_of_stream=3};
 * HttpBody{body=1, end_of_stream=2}; HttpTrailers{trailers=1};
 * HeaderMap{headers=1}; HeaderValue{key=1, value=2, raw_value=3};
 * Struct{fields=1 (map<string, Value>)}; Value{null_value=1,
 * number_value=2 (double), string_value=3, bool_value=4, struct_value=5,
 * list_value=6}.
 */
import { ProtobufReader as Reader, WIRE_BYTES, WIRE_FIXED64, WIRE_VARINT } from '../transport/protobuf-reader';

export type ProcessingRequestKind =
  'request_headers' | 'response_headers' | 'request_body' | 'response_body' | 'request_trailers' | 'response_trailers';

const KIND_BY_FIELD: readonly (ProcessingRequestKind | undefined)[] = [
  undefined,
  undefined,
  'request_headers',
  'response_headers',
  'request_body',
  'response_body',
  'request_trailers',
  'response_trailers',
];

export interface HeaderEntry {
  /** Lower-case on Envoy's side. */
  readonly key: string;
  /** HeaderValue.value: empty from current Envoy, which sends raw_value. */
  readonly value: string;
  /** HeaderValue.raw_value, a view of the message's bytes (copy what is kept). */
  readonly rawValue: Buffer;
}

/** A scalar google.protobuf.Value; structs and lists are not read. */
export type AttributeValue = number | string | boolean | null;

export interface DecodedProcessingRequest {
  /** The `request` oneof member that is set, undefined when none this reader knows. */
  kind: ProcessingRequestKind | undefined;
  /** HttpHeaders.headers, or HttpTrailers.trailers. */
  headers: HeaderEntry[] | undefined;
  /** HttpHeaders.end_of_stream or HttpBody.end_of_stream. */
  endOfStream: boolean;
  /** HttpBody.body, a view of the message's bytes. */
  body: Buffer | undefined;
  /** `attributes`: per key (Envoy's is "envoy.filters.http.ext_proc"), the Struct's scalar fields. */
  attributes: Map<string, Map<string, AttributeValue>> | undefined;
  observabilityMode: boolean;
}

const EMPTY: Buffer = Buffer.alloc(0);

/** Throws on malformed bytes. */
export function decodeProcessingRequest(buffer: Buffer): DecodedProcessingRequest {
  const reader = new Reader(buffer, 0, buffer.length);
  const decoded: DecodedProcessingRequest = {
    kind: undefined,
    headers: undefined,
    endOfStream: false,
    body: undefined,
    attributes: undefined,
    observabilityMode: false,
  };
  while (reader.pos < reader.end) {
    const tag = reader.uint32();
    const field = tag >>> 3;
    const wireType = tag & 7;
    const kind = field < KIND_BY_FIELD.length ? KIND_BY_FIELD[field] : undefined;
    if (kind !== undefined && wireType === WIRE_BYTES) {
      // A later oneof member replaces an earlier one.
      decoded.kind = kind;
      decoded.headers = undefined;
      decoded.body = undefined;
      decoded.endOfStream = false;
      const nested = reader.nested();
      if (field <= 3) decodeHttpHeaders(nested, decoded);
      else if (field <= 5) decodeHttpBody(nested, decoded);
      else decodeHttpTrailers(nested, decoded);
    } else if (field === 9 && wireType === WIRE_BYTES) {
      decoded.attributes ??= new Map();
      decodeAttributeEntry(reader.nested(), decoded.attributes);
    } else if (field === 10 && wireType === WIRE_VARINT) {
      decoded.observabilityMode = reader.uint32() !== 0;
    } else {
      reader.skip(wireType);
    }
  }
  return decoded;
}

function decodeHttpHeaders(reader: Reader, into: DecodedProcessingRequest): void {
  into.headers = [];
  while (reader.pos < reader.end) {
    const tag = reader.uint32();
    const field = tag >>> 3;
    if (field === 1 && (tag & 7) === WIRE_BYTES) into.headers = decodeHeaderMap(reader.nested());
    else if (field === 3 && (tag & 7) === WIRE_VARINT) into.endOfStream = reader.uint32() !== 0;
    else reader.skip(tag & 7);
  }
}

function decodeHttpBody(reader: Reader, into: DecodedProcessingRequest): void {
  into.body = EMPTY;
  while (reader.pos < reader.end) {
    const tag = reader.uint32();
    const field = tag >>> 3;
    if (field === 1 && (tag & 7) === WIRE_BYTES) {
      const [start, end] = reader.delimited();
      into.body = reader.buffer.subarray(start, end);
    } else if (field === 2 && (tag & 7) === WIRE_VARINT) {
      into.endOfStream = reader.uint32() !== 0;
    } else {
      reader.skip(tag & 7);
    }
  }
}

function decodeHttpTrailers(reader: Reader, into: DecodedProcessingRequest): void {
  into.headers = [];
  while (reader.pos < reader.end) {
    const tag = reader.uint32();
    if (tag >>> 3 === 1 && (tag & 7) === WIRE_BYTES) into.headers = decodeHeaderMap(reader.nested());
    else reader.skip(tag & 7);
  }
}

function decodeHeaderMap(reader: Reader): HeaderEntry[] {
  const headers: HeaderEntry[] = [];
  while (reader.pos < reader.end) {
    const tag = reader.uint32();
    if (tag >>> 3 === 1 && (tag & 7) === WIRE_BYTES) headers.push(decodeHeaderValue(reader.nested()));
    else reader.skip(tag & 7);
  }
  return headers;
}

function decodeHeaderValue(reader: Reader): HeaderEntry {
  let key = '';
  let value = '';
  let rawValue: Buffer = EMPTY;
  while (reader.pos < reader.end) {
    const tag = reader.uint32();
    const field = tag >>> 3;
    if ((tag & 7) !== WIRE_BYTES || field < 1 || field > 3) {
      reader.skip(tag & 7);
      continue;
    }
    if (field === 1) key = reader.string();
    else if (field === 2) value = reader.string();
    else {
      const [start, end] = reader.delimited();
      rawValue = reader.buffer.subarray(start, end);
    }
  }
  return { key, value, rawValue };
}

function decodeAttributeEntry(reader: Reader, into: Map<string, Map<string, AttributeValue>>): void {
  let key = '';
  let fields = new Map<string, AttributeValue>();
  while (reader.pos < reader.end) {
    const tag = reader.uint32();
    const field = tag >>> 3;
    if (field === 1 && (tag & 7) === WIRE_BYTES) key = reader.string();
    else if (field === 2 && (tag & 7) === WIRE_BYTES) fields = decodeStruct(reader.nested());
    else reader.skip(tag & 7);
  }
  into.set(key, fields);
}

function decodeStruct(reader: Reader): Map<string, AttributeValue> {
  const fields = new Map<string, AttributeValue>();
  while (reader.pos < reader.end) {
    const tag = reader.uint32();
    if (tag >>> 3 === 1 && (tag & 7) === WIRE_BYTES) decodeStructEntry(reader.nested(), fields);
    else reader.skip(tag & 7);
  }
  return fields;
}

function decodeStructEntry(reader: Reader, into: Map<string, AttributeValue>): void {
  let key = '';
  let value: AttributeValue | undefined;
  while (reader.pos < reader.end) {
    const tag = reader.uint32();
    const field = tag >>> 3;
    if (field === 1 && (tag & 7) === WIRE_BYTES) key = reader.string();
    else if (field === 2 && (tag & 7) === WIRE_BYTES) value = decodeValue(reader.nested());
    else reader.skip(tag & 7);
  }
  // A later entry replaces an earlier one, also when it holds no scalar.
  if (value === undefined) into.delete(key);
  else into.set(key, value);
}

/** The scalar a Value holds (the last kind on the wire), undefined for a struct, a list or nothing. */
function decodeValue(reader: Reader): AttributeValue | undefined {
  let value: AttributeValue | undefined;
  while (reader.pos < reader.end) {
    const tag = reader.uint32();
    const field = tag >>> 3;
    const wireType = tag & 7;
    if (field === 1 && wireType === WIRE_VARINT) {
      reader.uint32();
      value = null;
    } else if (field === 2 && wireType === WIRE_FIXED64) {
      value = reader.double();
    } else if (field === 3 && wireType === WIRE_BYTES) {
      value = reader.string();
    } else if (field === 4 && wireType === WIRE_VARINT) {
      value = reader.uint32() !== 0;
    } else if ((field === 5 || field === 6) && wireType === WIRE_BYTES) {
      reader.skip(wireType);
      value = undefined;
    } else {
      reader.skip(wireType);
    }
  }
  return value;
}
