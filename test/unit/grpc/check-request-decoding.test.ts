import fc from 'fast-check';
import { createLogger } from '../../../src/platform/logger';
import type { UnaryCall } from '../../../src/transport/grpc-server';
import { checkMethod } from '../../../src/check/authorization-server';
import { checkRequestHeaderSelection, toAuthRequest } from '../../../src/check/check-request';
import { decodeCheckRequest } from '../../../src/check/check-request-decoding';
import { loadAuthorizationService } from '../../../src/check/proto-loading';
import { generateCustomerKey } from '../../../src/keys/customer-key';
import { headersThePipelineReads } from '../../../src/check/pipeline/headers-read';
import { headerNamesFor } from '../../../src/check/routes/header-names';
import { loadCheckRequestFixtures, makeFixtureSecrets, materialize } from '../../support/check-request-fixtures';
import { envoyCheckRequest, officialCheckMethod } from '../../support/envoy-official-client';

/** protobufjs through proto-loader: what grpc-js would hand the handler without the fast path. */
const generic = loadAuthorizationService().service.Check!;
/** Envoy's official protos: the bytes Envoy sends. */
const official = officialCheckMethod();

/** What the server's decoder keeps (authorization-server.ts), and the names it stands for. */
const selection = checkRequestHeaderSelection(headerNamesFor(true));
const selectedNames = new Set([...headersThePipelineReads(headerNamesFor(true)), ':method', ':path', 'x-request-id']);

/**
 * Both readers, compared on what the pipeline gets out of them: every header
 * without a selection; with the server's, the same request holding only the
 * selected headers, in the same order.
 */
function expectSameAuthRequest(bytes: Buffer): void {
  const reference = toAuthRequest(generic.requestDeserialize(bytes));
  const fast = toAuthRequest(decodeCheckRequest(bytes));
  expect(fast).toEqual(reference);
  expect(Object.keys(fast.headers)).toEqual(Object.keys(reference.headers));

  const kept = toAuthRequest(decodeCheckRequest(bytes, selection));
  const expected = Object.fromEntries(Object.entries(reference.headers).filter(([name]) => selectedNames.has(name)));
  expect({ ...kept, headers: { ...kept.headers } }).toEqual({ ...reference, headers: expected });
  expect(Object.keys(kept.headers)).toEqual(Object.keys(expected));
}

const wellKnown = ['authorization', 'x-api-key', 'x-goog-api-key', 'anthropic-version', ':path', ':method', 'x-request-id'];
const headerName = fc.oneof(
  fc.constantFrom(...wellKnown, 'X-Mixed-Case', 'user-agent', 'x-api-ke', 'x-api-keys'),
  // Spellings toAuthRequest folds into a selected name: ASCII capitals, and the Kelvin sign, which lower-cases to k.
  fc.constantFrom(...wellKnown).map((name) => name.toUpperCase()),
  fc.constantFrom('X-Api-Key', 'Authorization', 'x-api-\u212aey', 'x-goog-api-\u212aey'),
  fc.string({ minLength: 0, maxLength: 20 }),
);
const headerValue = fc.oneof(fc.string({ maxLength: 200 }), fc.string({ unit: 'binary', maxLength: 60 }), fc.constant(''));

describe('CheckRequest decoding (the fields the pipeline reads)', () => {
  it('reads every Envoy-shaped fixture as protobufjs does', () => {
    const secrets = makeFixtureSecrets({
      live: generateCustomerKey('live'),
      otherLive: generateCustomerKey('live'),
      revoked: generateCustomerKey('live'),
    });
    for (const fixture of loadCheckRequestFixtures()) {
      expectSameAuthRequest(official.requestSerialize(materialize(fixture.check_request, secrets)));
    }
  });

  it('reads random requests (headers map, raw header_map, odd and binary text) as protobufjs does', () => {
    fc.assert(
      fc.property(
        fc.record({
          method: fc.constantFrom('GET', 'POST', '', 'g e t'),
          path: fc.oneof(fc.webPath(), fc.string({ maxLength: 300 })),
          headers: fc.dictionary(headerName, headerValue, { maxKeys: 25 }),
          raw: fc.array(fc.record({ key: headerName, value: headerValue, raw: fc.option(fc.uint8Array({ maxLength: 40 })) }), {
            maxLength: 6,
          }),
          extensions: fc.dictionary(fc.string({ maxLength: 10 }), fc.string({ maxLength: 10 }), { maxKeys: 3 }),
        }),
        ({ method, path, headers, raw, extensions }) => {
          const request = envoyCheckRequest({ method: method || 'GET', path, headers, contextExtensions: extensions }) as {
            attributes: { request: { http: Record<string, unknown> } };
          };
          request.attributes.request.http.method = method;
          if (raw.length > 0) {
            request.attributes.request.http.header_map = {
              headers: raw.map(({ key, value, raw: bytes }) => ({ key, ...(bytes ? { raw_value: Buffer.from(bytes) } : { value }) })),
            };
          }
          expectSameAuthRequest(official.requestSerialize(request));
        },
      ),
      { numRuns: 400, seed: 7 },
    );
  });

  it('skips unknown fields of every wire type, and lets a repeated message replace the earlier one', () => {
    const first = official.requestSerialize(envoyCheckRequest({ path: '/first', headers: { authorization: 'Bearer a' } }));
    const second = official.requestSerialize(envoyCheckRequest({ path: '/second', headers: { 'x-api-key': 'b' } }));
    const unknown = Buffer.from([
      0x78,
      0x96,
      0x01, // field 15, varint 150
      0x81,
      0x01,
      1,
      2,
      3,
      4,
      5,
      6,
      7,
      8, // field 16, fixed64
      0x8d,
      0x01,
      1,
      2,
      3,
      4, // field 17, fixed32
      0x92,
      0x01,
      0x02,
      0x61,
      0x62, // field 18, bytes "ab"
      0x9b,
      0x01,
      0x08,
      0x01,
      0x9c,
      0x01, // field 19, group holding a varint
    ]);
    expectSameAuthRequest(Buffer.concat([unknown, first, unknown, second]));
    expect(toAuthRequest(decodeCheckRequest(Buffer.concat([first, second]))).path).toBe('/second');
  });

  it('reads header names that are Object.prototype members as protobufjs does (__proto__ kept), into a map the request adopts', () => {
    const headers = JSON.parse('{"__proto__":"p","constructor":"c","x-api-key":"k"}') as Record<string, string>;
    // Set as is (envoyCheckRequest joins with `in`, which sees Object.prototype's constructor).
    const built = envoyCheckRequest({ path: '/v1/chat/completions' }) as { attributes: { request: { http: Record<string, unknown> } } };
    built.attributes.request.http.headers = headers;
    const bytes = official.requestSerialize(built);
    expectSameAuthRequest(bytes);
    const message = decodeCheckRequest(bytes);
    const decoded = message.attributes!.request!.http!.headers!;
    expect(Object.getPrototypeOf(decoded)).toBeNull();
    const request = toAuthRequest(message);
    // Adopted, not copied: the lower-case names are already what the copy would build.
    expect(request.headers).toBe(decoded);
    expect(Object.keys(request.headers)).toEqual(expect.arrayContaining(['__proto__', 'constructor', 'x-api-key']));
    expect(request.headers.constructor).toBe('c');
    // A name with a capital goes through the copy.
    const capital = decodeCheckRequest(official.requestSerialize(envoyCheckRequest({ path: '/', headers: { 'x-api-key': 'k' } })));
    capital.attributes!.request!.http!.headers!['X-Upper'] = 'u';
    expect(toAuthRequest(capital).headers['x-upper']).toBe('u');
  });

  it('reads the request body Envoy sends with with_request_body: body (a string) and raw_body (pack_as_bytes), as protobufjs does', () => {
    const json = '{"messages":[{"role":"user","content":"h\u00e9"}],"model":"gpt-4o-mini"}';
    const asString = official.requestSerialize(envoyCheckRequest({ method: 'POST', path: '/v1/chat/completions', body: json }));
    const asBytes = official.requestSerialize(envoyCheckRequest({ method: 'POST', path: '/v1/chat/completions', body: Buffer.from(json) }));
    for (const bytes of [asString, asBytes]) {
      expectSameAuthRequest(bytes);
      expect(Buffer.from(toAuthRequest(decodeCheckRequest(bytes)).body!).toString('utf8')).toBe(json);
    }
    // No body buffering (the default): no body at all, not an empty one.
    expect(
      toAuthRequest(decodeCheckRequest(official.requestSerialize(envoyCheckRequest({ path: '/v1/chat/completions' })))).body,
    ).toBeUndefined();
    fc.assert(
      fc.property(fc.oneof(fc.string({ maxLength: 300 }), fc.uint8Array({ maxLength: 300 })), (body) => {
        const request = envoyCheckRequest({
          method: 'POST',
          path: '/v1/messages',
          body: typeof body === 'string' ? body : Buffer.from(body),
        });
        expectSameAuthRequest(official.requestSerialize(request));
      }),
      { numRuns: 200, seed: 11 },
    );
  });

  it('keeps no view of the message buffer in raw_body: overwriting the buffer after decoding changes nothing', () => {
    const bytes = official.requestSerialize(
      envoyCheckRequest({ method: 'POST', path: '/v1/chat/completions', body: Buffer.from('{"model":"m"}') }),
    );
    const request = toAuthRequest(decodeCheckRequest(bytes));
    bytes.fill(0);
    expect(Buffer.from(request.body!).toString('utf8')).toBe('{"model":"m"}');
  });

  it('refuses malformed bytes as protobufjs does, so the server answers INTERNAL', () => {
    const good = official.requestSerialize(envoyCheckRequest({ path: '/v1/chat/completions', headers: { authorization: 'Bearer k' } }));
    const malformed = [
      good.subarray(0, good.length - 3), // truncated
      Buffer.from([0x0a, 0x05, 0x01]), // length past the end
      Buffer.from([0x0f]), // wire type 7
      Buffer.from([0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]), // varint over 10 bytes
    ];
    // A header the server's selection leaves out is still read to its end: a bad wire type inside its map entry.
    const nest = (field: number, inner: Buffer) => Buffer.concat([Buffer.from([(field << 3) | 2, inner.length]), inner]);
    const badEntry = Buffer.concat([Buffer.from([0x0a, 0x02]), Buffer.from('ua'), Buffer.from([0x0f])]);
    malformed.push(nest(1, nest(4, nest(2, nest(3, badEntry)))));
    for (const bytes of malformed) {
      expect(() => generic.requestDeserialize(bytes) as unknown).toThrow();
      expect(() => decodeCheckRequest(bytes)).toThrow();
      expect(() => decodeCheckRequest(bytes, selection)).toThrow();
    }
  });

  it('is what the server hands the Check handler, and a message it cannot read is answered INTERNAL without a decision', () => {
    const seen: unknown[] = [];
    const method = checkMethod((request) => seen.push(request), createLogger('silent'));
    const failures: unknown[] = [];
    const call = {
      deadlineMs: Infinity,
      finished: false,
      metadata: undefined,
      respond: () => undefined,
      fail: (error) => failures.push(error),
    } as UnaryCall;
    const bytes = official.requestSerialize(envoyCheckRequest({ path: '/v1/messages', headers: { 'x-api-key': 'k' } }));
    if (method.kind !== 'unary') throw new Error('Check is unary');
    method.handle(bytes, call);
    expect(seen).toEqual([decodeCheckRequest(bytes)]);
    method.handle(Buffer.from([0x0a, 0x05, 0x01]), call);
    expect(seen).toHaveLength(1);
    expect(failures).toEqual([{ code: 13, details: expect.stringMatching(/^Error deserializing request: /) }]);
  });
});
