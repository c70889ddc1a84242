import fc from 'fast-check';
import { decodeProcessingRequest, type DecodedProcessingRequest } from '../../../src/metering/ext-proc-request-decoding';
import {
  deserializeProcessingRequest,
  EXT_PROC_ATTRIBUTES_KEY,
  headerMap,
  observed,
  serializeProcessingRequest,
  type OfficialHeaderValue,
  type OfficialProcessingRequest,
} from '../../support/ext-proc-official';

/**
 * The hand-written ProcessingRequest reader against protobufjs with Envoy's
 * official protos: the same kind, headers, body, end of stream, scalar
 * attributes and observability flag, on Envoy-shaped and random messages;
 * the same refusals of malformed bytes.
 */
const KINDS = ['request_headers', 'response_headers', 'request_body', 'response_body', 'request_trailers', 'response_trailers'] as const;

interface Comparable {
  kind: string | undefined;
  headers: { key: string; value: string; raw: string }[] | undefined;
  endOfStream: boolean;
  body: string | undefined;
  attributes: Record<string, Record<string, unknown>>;
  observabilityMode: boolean;
}

function fromOfficial(message: OfficialProcessingRequest): Comparable {
  const kind = message.request;
  const part = kind ? (message as unknown as Record<string, Record<string, unknown> | null>)[kind] : undefined;
  const map = (part?.headers ?? part?.trailers) as { headers: OfficialHeaderValue[] } | null | undefined;
  const headers = kind?.endsWith('headers') || kind?.endsWith('trailers') ? (map?.headers ?? []) : undefined;
  const attributes: Record<string, Record<string, unknown>> = {};
  for (const [name, struct] of Object.entries(message.attributes)) {
    attributes[name] = {};
    for (const [field, value] of Object.entries(struct.fields)) {
      if (value.kind === 'numberValue') attributes[name][field] = value.numberValue;
      else if (value.kind === 'stringValue') attributes[name][field] = value.stringValue;
      else if (value.kind === 'boolValue') attributes[name][field] = value.boolValue;
      else if (value.kind === 'nullValue') attributes[name][field] = null;
    }
  }
  return {
    kind,
    headers: headers?.map((h) => ({ key: h.key, value: h.value, raw: h.raw_value.toString('hex') })),
    endOfStream: Boolean(part?.end_of_stream),
    body: kind?.endsWith('body') ? (part!.body as Buffer).toString('hex') : undefined,
    attributes,
    observabilityMode: message.observability_mode,
  };
}

function fromOurs(message: DecodedProcessingRequest): Comparable {
  const attributes: Record<string, Record<string, unknown>> = {};
  for (const [name, fields] of message.attributes ?? []) attributes[name] = Object.fromEntries(fields);
  return {
    kind: message.kind,
    headers: message.headers?.map((h) => ({ key: h.key, value: h.value, raw: h.rawValue.toString('hex') })),
    endOfStream: message.endOfStream,
    body: message.body?.toString('hex'),
    attributes,
    observabilityMode: message.observabilityMode,
  };
}

function expectSameAsProtobufjs(bytes: Buffer): void {
  expect(fromOurs(decodeProcessingRequest(bytes))).toEqual(fromOfficial(deserializeProcessingRequest(bytes)));
}

const ENVOY_REQUEST_HEADERS: [string, string][] = [
  [':authority', 'gateway.example.test'],
  [':path', '/v1/chat/completions'],
  [':method', 'POST'],
  [':scheme', 'http'],
  ['content-type', 'application/json'],
  ['content-length', '1234'],
  ['x-forwarded-proto', 'http'],
  ['x-request-id', '6a3c2f0e-1b2d-4c5e-8f9a-0b1c2d3e4f5a'],
  ['x-gateway-account-id', 'acme'],
  ['x-gateway-key-id', 'key_ki7sq0QuenAUq8kr'],
  ['x-gateway-key-prefix', 'gk_live_1mm5'],
  ['x-gateway-route-family', 'chat-completions'],
];

describe('ProcessingRequest decoding (the fields the processor reads)', () => {
  it('reads every message Envoy sends in observability mode as protobufjs does', () => {
    const messages = [
      observed({ request_headers: { headers: headerMap(ENVOY_REQUEST_HEADERS), end_of_stream: false } }),
      observed({ request_headers: { headers: headerMap(ENVOY_REQUEST_HEADERS.slice(0, 4)), end_of_stream: true } }),
      observed({
        response_headers: {
          headers: headerMap([
            [':status', '200'],
            ['content-type', 'text/event-stream; charset=utf-8'],
          ]),
          end_of_stream: false,
        },
        attributes: { [EXT_PROC_ATTRIBUTES_KEY]: { fields: { 'request.size': { numberValue: 1234 } } } },
      }),
      observed({ response_body: { body: Buffer.from('data: {"choices":[]}\n\n'), end_of_stream: false } }),
      observed({ response_body: { body: Buffer.alloc(0), end_of_stream: true } }),
      observed({ request_body: { body: Buffer.from('{"model":"gpt-4o"}'), end_of_stream: true } }),
      observed({ response_trailers: { trailers: headerMap([['grpc-status', '0']]) } }),
      observed({ request_trailers: { trailers: headerMap([]) } }),
      // Metadata forwarded from ext_authz (read past, never used).
      observed({
        response_body: { body: Buffer.from('x'), end_of_stream: false },
        metadata_context: { filter_metadata: { 'envoy.filters.http.ext_authz': { fields: { a: { stringValue: 'b' } } } } },
      }),
    ];
    for (const message of messages) expectSameAsProtobufjs(serializeProcessingRequest(message));
  });

  it('reads random messages (any member, header bytes, attribute kinds) as protobufjs does', () => {
    const text = fc.oneof(fc.string({ maxLength: 40 }), fc.string({ unit: 'binary', maxLength: 20 }));
    const header = fc.record({ key: text, value: fc.option(text), raw: fc.option(fc.uint8Array({ maxLength: 40 })) });
    const value = fc.oneof(
      fc.double({ noNaN: true }).map((n) => ({ numberValue: n })),
      text.map((s) => ({ stringValue: s })),
      fc.boolean().map((b) => ({ boolValue: b })),
      fc.constant({ nullValue: 'NULL_VALUE' }),
      fc.constant({ structValue: { fields: { inner: { numberValue: 1 } } } }),
      fc.constant({ listValue: { values: [{ numberValue: 1 }] } }),
    );
    fc.assert(
      fc.property(
        fc.constantFrom(...KINDS),
        fc.array(header, { maxLength: 12 }),
        fc.uint8Array({ maxLength: 300 }),
        fc.boolean(),
        fc.dictionary(text, fc.dictionary(text, value, { maxKeys: 4 }), { maxKeys: 3 }),
        fc.boolean(),
        (kind, headers, body, endOfStream, attributes, observability) => {
          const map = {
            headers: headers.map((h) => ({
              key: h.key,
              ...(h.value !== null ? { value: h.value } : {}),
              ...(h.raw ? { raw_value: Buffer.from(h.raw) } : {}),
            })),
          };
          const part = kind.endsWith('body')
            ? { body: Buffer.from(body), end_of_stream: endOfStream }
            : kind.endsWith('trailers')
              ? { trailers: map }
              : { headers: map, end_of_stream: endOfStream };
          const structs = Object.fromEntries(Object.entries(attributes).map(([name, fields]) => [name, { fields }]));
          expectSameAsProtobufjs(serializeProcessingRequest({ [kind]: part, attributes: structs, observability_mode: observability }));
        },
      ),
      { numRuns: 500, seed: 16 },
    );
  });

  it('gives a body chunk as a view of the message, not a copy', () => {
    const bytes = serializeProcessingRequest(observed({ response_body: { body: Buffer.from('chunk of tokens'), end_of_stream: false } }));
    const decoded = decodeProcessingRequest(bytes);
    expect(decoded.body!.toString()).toBe('chunk of tokens');
    expect(decoded.body!.buffer).toBe(bytes.buffer);
  });

  it('skips unknown fields of every wire type, and a message with no member it knows has no kind', () => {
    const known = serializeProcessingRequest(observed({ response_body: { body: Buffer.from('abc'), end_of_stream: true } }));
    const unknown = Buffer.from([
      0xf8,
      0x06,
      0x2a, // field 111 varint
      0xf9,
      0x06,
      1,
      2,
      3,
      4,
      5,
      6,
      7,
      8, // field 111 fixed64
      0xfa,
      0x06,
      0x02,
      0x68,
      0x69, // field 111 bytes
      0xfd,
      0x06,
      1,
      2,
      3,
      4, // field 111 fixed32
      0x5a,
      0x02,
      0x08,
      0x01, // protocol_config (11), unread
    ]);
    const decoded = decodeProcessingRequest(Buffer.concat([unknown, known, unknown]));
    expect(fromOurs(decoded)).toEqual(fromOurs(decodeProcessingRequest(known)));
    expect(decodeProcessingRequest(unknown).kind).toBeUndefined();
    expectSameAsProtobufjs(Buffer.concat([unknown, known]));
  });

  it('throws on malformed bytes where protobufjs throws', () => {
    const good = serializeProcessingRequest(observed({ response_body: { body: Buffer.from('abcdef'), end_of_stream: false } }));
    const malformed = [
      good.subarray(0, 8), // a length past the end
      Buffer.from([0x2a, 0x05, 0x0a, 0x09, 0x01]), // a nested length past the end
      Buffer.from([0x0f]), // wire type 7
      Buffer.from([0x50, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]), // a varint over 10 bytes
      Buffer.from([0x4a, 0x0c, 0x12, 0x0a, 0x0a, 0x08, 0x0a, 0x01, 0x78, 0x12, 0x03, 0x11, 0x00, 0x00]), // a double cut short
    ];
    for (const bytes of malformed) {
      expect(() => deserializeProcessingRequest(bytes)).toThrow();
      expect(() => decodeProcessingRequest(bytes)).toThrow();
    }
  });
});
