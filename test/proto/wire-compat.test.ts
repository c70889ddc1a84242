/**
 * Guards proto/ (our trimmed copy of Envoy's ext_authz v3 API) against
 * Envoy's official protos bundled in @grpc/grpc-js-xds/deps:
 *  - fully populated messages survive official -> ours and ours -> official
 *    with identical decoded objects and byte-identical re-encoding;
 *  - every field of every message in our copy exists in the official message
 *    with the same number, type, label, map key type and oneof;
 *  - enums (incl. the whole envoy.type.v3.StatusCode) match value for value;
 *  - src/check/proto-loading.ts exposes /envoy.service.auth.v3.Authorization/Check.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

import * as protobuf from 'protobufjs';

import {
  AUTHORIZATION_SERVICE_NAME,
  LOADER_OPTIONS,
  PROTO_ROOT,
  loadAuthorizationService,
} from '../../src/check/proto-loading';
import {
  OFFICIAL_EXTERNAL_AUTH_PROTO,
  OFFICIAL_INCLUDE_DIRS,
  type OfficialCheckResponse,
  type OfficialDeniedResponse,
} from '../support/envoy-official-client';

/** The fields of a decoded CheckRequest that these tests read. */
interface DecodedCheckRequest {
  attributes: {
    source: { address: { address: string } };
    request: { http: { size: string; raw_body: string; headers: Record<string, string>; header_map: { headers: unknown[] } } };
    tls_session: { sni: string };
    route_metadata_context: { filter_metadata: Record<string, unknown> };
    context_extensions: Record<string, string>;
  };
}

const PROTOBUFJS_DIR = path.dirname(require.resolve('protobufjs/package.json'));

/**
 * Fields in our copy that are newer than the official snapshot in
 * @grpc/grpc-js-xds/deps. If the snapshot has them, they are checked like any
 * other field; if not, they must be absent there (not renumbered).
 */
const NEWER_THAN_DEPS_SNAPSHOT = new Set<string>([
  'envoy.service.auth.v3.CheckResponse.error_response', // = 5, Envoy main late 2025/2026
  'envoy.config.core.v3.SocketAddress.network_namespace_filepath', // = 7
]);

function loadRoot(files: string[], includeDirs: string[]): protobuf.Root {
  const root = new protobuf.Root();
  const originalResolvePath = root.resolvePath.bind(root);
  root.resolvePath = (origin: string, target: string): string | null => {
    if (path.isAbsolute(target)) return target;
    for (const dir of includeDirs) {
      const full = path.join(dir, target);
      if (fs.existsSync(full)) return full;
    }
    return originalResolvePath(origin, target);
  };
  root.loadSync(files, { keepCase: true });
  root.resolveAll();
  return root;
}

// protobufjs ships google/protobuf/{any,struct,timestamp,wrappers} as bundled
// "common" definitions; descriptor.proto (needed by PGV) is a file in its dir.
const official = loadRoot([OFFICIAL_EXTERNAL_AUTH_PROTO], [...OFFICIAL_INCLUDE_DIRS, PROTOBUFJS_DIR]);
const ours = loadRoot(
  [
    'envoy/service/auth/v3/external_auth.proto',
    'envoy/service/auth/v3/attribute_context.proto',
    'envoy/config/core/v3/base.proto',
    'envoy/config/core/v3/address.proto',
    'envoy/type/v3/http_status.proto',
    'google/rpc/status.proto',
  ],
  [PROTO_ROOT],
);

const CONVERSION: protobuf.IConversionOptions = {
  longs: String,
  enums: String,
  bytes: String,
  defaults: true,
  oneofs: true,
};

function roundTrip(typeName: string, input: Record<string, unknown>) {
  const officialType = official.lookupType(typeName);
  const ourType = ours.lookupType(typeName);

  // official -> ours
  const officialMsg = officialType.fromObject(input);
  const officialBytes = officialType.encode(officialMsg).finish();
  const decodedByOurs = ourType.decode(officialBytes);
  const oursReencoded = ourType.encode(decodedByOurs).finish();

  // ours -> official
  const ourMsg = ourType.fromObject(input);
  const ourBytes = ourType.encode(ourMsg).finish();
  const decodedByOfficial = officialType.decode(ourBytes);
  const officialReencoded = officialType.encode(decodedByOfficial).finish();

  return {
    officialBytes: Buffer.from(officialBytes),
    ourBytes: Buffer.from(ourBytes),
    oursReencoded: Buffer.from(oursReencoded),
    officialReencoded: Buffer.from(officialReencoded),
    officialObject: officialType.toObject(officialType.decode(officialBytes), CONVERSION),
    oursDecodedObject: ourType.toObject(decodedByOurs, CONVERSION),
    ourObject: ourType.toObject(ourType.decode(ourBytes), CONVERSION),
    officialDecodedObject: officialType.toObject(decodedByOfficial, CONVERSION),
  };
}

/** Allow-listed newer fields that the official snapshot does not have. */
const NOT_IN_SNAPSHOT = new Set(
  [...NEWER_THAN_DEPS_SNAPSHOT]
    .filter((q) => {
      const dot = q.lastIndexOf('.');
      return official.lookupType(q.slice(0, dot)).fields[q.slice(dot + 1)] === undefined;
    })
    .map((q) => q.slice(q.lastIndexOf('.') + 1)),
);

/**
 * toObject({defaults: true}) renders fields the official snapshot does not
 * know yet (e.g. SocketAddress.network_namespace_filepath) with their default
 * value in our objects only; drop those (default-valued only!) before comparing.
 */
function withoutNewerDefaults(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutNewerDefaults);
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    if (NOT_IN_SNAPSHOT.has(k) && (v === '' || v === 0 || v === false || v === null)) continue;
    out[k] = withoutNewerDefaults(v);
  }
  return out;
}

function expectWireCompatible(typeName: string, input: Record<string, unknown>) {
  const r = roundTrip(typeName, input);
  expect(r.officialBytes.length).toBeGreaterThan(0);
  // Same input encodes to the same bytes with either set of protos.
  expect(r.ourBytes.equals(r.officialBytes)).toBe(true);
  // official -> ours: identical object, byte-identical re-encoding.
  expect(withoutNewerDefaults(r.oursDecodedObject)).toEqual(r.officialObject);
  expect(r.oursReencoded.equals(r.officialBytes)).toBe(true);
  // ours -> official: identical object, byte-identical re-encoding.
  expect(r.officialDecodedObject).toEqual(withoutNewerDefaults(r.ourObject));
  expect(r.officialReencoded.equals(r.ourBytes)).toBe(true);
  return r;
}

// ---------------------------------------------------------------------------
// Fixtures (keepCase field names; google.protobuf.* come from protobufjs'
// bundled definitions, whose Struct/Value fields are camelCase: stringValue...)

const struct = (extra: Record<string, unknown> = {}) => ({
  fields: {
    plan: { stringValue: 'pro' },
    rpm: { numberValue: 600 },
    enabled: { boolValue: true },
    nothing: { nullValue: 'NULL_VALUE' },
    tags: { listValue: { values: [{ stringValue: 'a' }, { numberValue: 1.5 }] } },
    nested: { structValue: { fields: { customer_id: { stringValue: 'cus_123' } } } },
    ...extra,
  },
});

const anyOf = (typeUrl: string, bytes: Uint8Array) => ({ type_url: typeUrl, value: bytes });

const metadata = (ns: string) => ({
  filter_metadata: { [ns]: struct(), 'com.example.other': { fields: { k: { stringValue: 'v' } } } },
  typed_filter_metadata: {
    [ns]: anyOf('type.googleapis.com/google.protobuf.Struct', Buffer.from([0x0a, 0x00])),
  },
});

const peer = (address: Record<string, unknown>, who: string) => ({
  address,
  service: `${who}-service`,
  labels: { zone: 'eu-west-1a', [`${who}-label`]: 'yes' },
  principal: `spiffe://cluster.local/ns/default/sa/${who}`,
  certificate: '-----BEGIN%20CERTIFICATE-----%0AMIIB...',
});

function fullCheckRequest(
  sourceAddress: Record<string, unknown>,
  destinationAddress: Record<string, unknown>,
): Record<string, unknown> {
  return {
    attributes: {
      source: peer(sourceAddress, 'client'),
      destination: peer(destinationAddress, 'gateway'),
      request: {
        time: { seconds: '1767225600', nanos: 123456789 },
        http: {
          id: '13541286942453012367',
          method: 'POST',
          headers: {
            ':authority': 'api.example.com',
            ':method': 'POST',
            ':path': '/v1/chat/completions?stream=true',
            ':scheme': 'https',
            authorization: 'Bearer sk-test',
            'x-request-id': '0b7c1f7e-1b0c-4d47-9a8e-3c1f3f0a1b2c',
            'x-forwarded-proto': 'https',
          },
          header_map: {
            headers: [
              { key: ':authority', value: '', raw_value: Buffer.from('api.example.com') },
              { key: 'x-binary', value: 'v', raw_value: Buffer.from([0x00, 0xff, 0xfe, 0x80]) },
              { key: 'x-binary', value: 'second', raw_value: Buffer.alloc(0) },
            ],
          },
          path: '/v1/chat/completions?stream=true',
          host: 'api.example.com',
          scheme: 'https',
          query: 'ignored-by-envoy',
          fragment: 'frag',
          size: '9007199254740993', // > 2^53: must survive as an exact int64
          protocol: 'HTTP/2',
          body: '{"model":"m"}',
          raw_body: Buffer.from([0x7b, 0x00, 0xc3, 0x28, 0xff, 0x7d]),
        },
      },
      context_extensions: { plan_scope: 'api', virtual_host: 'api' },
      metadata_context: metadata('envoy.filters.http.jwt_authn'),
      route_metadata_context: metadata('envoy.filters.http.ext_authz'),
      tls_session: { sni: 'api.example.com' },
    },
  };
}

const headerOption = (key: string, value: string, extra: Record<string, unknown> = {}) => ({
  header: { key, value, raw_value: Buffer.from(`raw-${value}`) },
  append: { value: false },
  append_action: 'OVERWRITE_IF_EXISTS_OR_ADD',
  keep_empty_value: true,
  ...extra,
});

const status = (code: number, message: string) => ({
  code,
  message,
  details: [
    anyOf('type.googleapis.com/google.rpc.ErrorInfo', Buffer.from([0x0a, 0x03, 0x66, 0x6f, 0x6f])),
    anyOf('type.googleapis.com/google.rpc.Status', Buffer.from([0x08, 0x07])),
  ],
});

const deniedResponse = () => ({
  status: { code: 'Unauthorized' },
  headers: [
    headerOption('www-authenticate', 'Bearer realm="api"'),
    headerOption('set-cookie', 'a=1', { append: { value: true }, append_action: 'APPEND_IF_EXISTS_OR_ADD' }),
    headerOption('content-type', 'application/json', { append_action: 'ADD_IF_ABSENT', keep_empty_value: false }),
    headerOption('x-only-if-exists', 'x', { append_action: 'OVERWRITE_IF_EXISTS' }),
  ],
  body: '{"error":{"code":"invalid_api_key"}}',
});

const okResponse = () => ({
  headers: [headerOption('x-customer-id', 'cus_123'), headerOption('x-plan', 'pro', { append: { value: true } })],
  headers_to_remove: ['authorization', 'x-api-key'],
  dynamic_metadata: struct({ deprecated: { boolValue: true } }),
  response_headers_to_add: [headerOption('x-ratelimit-remaining', '599')],
  query_parameters_to_set: [
    { key: 'customer', value: 'cus_123' },
    { key: 'empty', value: '' },
  ],
  query_parameters_to_remove: ['api_key', 'key'],
});

// ---------------------------------------------------------------------------

describe('wire compatibility of proto/ with Envoy official ext_authz v3 protos', () => {
  test.each([
    [
      'socket addresses (port_value)',
      {
        socket_address: {
          protocol: 'TCP',
          address: '203.0.113.7',
          port_value: 54321,
          resolver_name: 'envoy.resolvers.custom',
          ipv4_compat: true,
        },
      },
      { socket_address: { protocol: 'UDP', address: '10.0.0.2', port_value: 8080 } },
    ],
    [
      'named_port / pipe',
      { socket_address: { protocol: 'TCP', address: '::1', named_port: 'https', ipv4_compat: false } },
      { pipe: { path: '/var/run/envoy.sock', mode: 0o644 } },
    ],
    [
      'envoy_internal_address',
      { envoy_internal_address: { server_listener_name: 'internal_listener', endpoint_id: 'ep-1' } },
      { socket_address: { address: '0.0.0.0', port_value: 0 } },
    ],
  ])('CheckRequest, fully populated, %s', (_name, src, dst) => {
    const r = expectWireCompatible('envoy.service.auth.v3.CheckRequest', fullCheckRequest(src, dst));
    const http = (r.oursDecodedObject as DecodedCheckRequest).attributes.request.http;
    expect(http.size).toBe('9007199254740993');
    expect(http.raw_body).toBe(Buffer.from([0x7b, 0x00, 0xc3, 0x28, 0xff, 0x7d]).toString('base64'));
    expect(http.headers[':path']).toBe('/v1/chat/completions?stream=true');
    expect(http.header_map.headers).toHaveLength(3);
    expect((r.oursDecodedObject as DecodedCheckRequest).attributes.tls_session.sni).toBe('api.example.com');
    expect((r.oursDecodedObject as DecodedCheckRequest).attributes.route_metadata_context.filter_metadata).toHaveProperty([
      'envoy.filters.http.ext_authz',
      'fields',
      'plan',
      'stringValue',
    ]);
  });

  test('CheckRequest, empty', () => {
    const r = roundTrip('envoy.service.auth.v3.CheckRequest', {});
    expect(r.ourBytes.length).toBe(0);
    expect(r.oursDecodedObject).toEqual(r.officialObject);
  });

  test('CheckResponse with denied_response (401, headers with append BoolValue + append_action, body)', () => {
    const r = expectWireCompatible('envoy.service.auth.v3.CheckResponse', {
      status: status(16, 'invalid API key'),
      denied_response: deniedResponse(),
      dynamic_metadata: struct(),
    });
    const obj = r.oursDecodedObject as OfficialCheckResponse;
    expect(obj.http_response).toBe('denied_response');
    expect(obj.denied_response.status.code).toBe('Unauthorized');
    expect(obj.denied_response.headers[0]!.append).toEqual({ value: false });
    expect(obj.denied_response.headers[0]!.append_action).toBe('OVERWRITE_IF_EXISTS_OR_ADD');
    expect(obj.status.details[0]!.type_url).toBe('type.googleapis.com/google.rpc.ErrorInfo');
  });

  test('CheckResponse with denied_response 429 and 503', () => {
    for (const code of ['TooManyRequests', 'ServiceUnavailable', 'PaymentRequired', 'Forbidden']) {
      const r = expectWireCompatible('envoy.service.auth.v3.CheckResponse', {
        status: { code: 8, message: code },
        denied_response: { ...deniedResponse(), status: { code } },
      });
      expect((r.oursDecodedObject as OfficialCheckResponse).denied_response.status.code).toBe(code);
    }
  });

  test('CheckResponse with ok_response (all fields)', () => {
    const r = expectWireCompatible('envoy.service.auth.v3.CheckResponse', {
      status: status(0, ''),
      ok_response: okResponse(),
      dynamic_metadata: struct(),
    });
    const obj = r.oursDecodedObject as OfficialCheckResponse;
    expect(obj.http_response).toBe('ok_response');
    expect(obj.ok_response.headers_to_remove).toEqual(['authorization', 'x-api-key']);
    expect(obj.ok_response.query_parameters_to_set).toHaveLength(2);
    expect(obj.ok_response.dynamic_metadata.fields.deprecated).toEqual({ boolValue: true, kind: 'boolValue' });
  });

  test('CheckResponse without http_response', () => {
    const r = expectWireCompatible('envoy.service.auth.v3.CheckResponse', { status: { code: 0 } });
    expect((r.oursDecodedObject as OfficialCheckResponse).http_response).toBeUndefined();
  });

  test('CheckResponse with error_response (field 5)', () => {
    const input = {
      status: status(14, 'redis unavailable'),
      error_response: { ...deniedResponse(), status: { code: 'ServiceUnavailable' } },
      dynamic_metadata: struct(),
    };
    const ourType = ours.lookupType('envoy.service.auth.v3.CheckResponse');
    const officialType = official.lookupType('envoy.service.auth.v3.CheckResponse');
    expect(ourType.fields['error_response']?.id).toBe(5);
    expect(ourType.fields['error_response']?.partOf?.name).toBe('http_response');

    const ourBytes = ourType.encode(ourType.fromObject(input)).finish();
    const ourObject = ourType.toObject(ourType.decode(ourBytes), CONVERSION) as OfficialCheckResponse;
    expect(ourObject.http_response).toBe('error_response');
    expect(ourObject.error_response.status.code).toBe('ServiceUnavailable');
    expect(Buffer.from(ourType.encode(ourType.decode(ourBytes)).finish()).equals(Buffer.from(ourBytes))).toBe(true);

    const officialField = officialType.fields['error_response'];
    if (officialField !== undefined) {
      // The deps snapshot has caught up with Envoy main: full check.
      expectWireCompatible('envoy.service.auth.v3.CheckResponse', input);
    } else {
      // Older protos (like older Envoys) skip field 5 as unknown; everything
      // else still decodes, and nothing else is numbered 5.
      expect(officialType.fieldsById[5]).toBeUndefined();
      const decoded = officialType.toObject(officialType.decode(ourBytes), CONVERSION) as OfficialCheckResponse;
      expect(decoded.http_response).toBeUndefined();
      expect(decoded.status).toEqual(ourObject.status);
      expect(decoded.dynamic_metadata).toEqual(ourObject.dynamic_metadata);
    }
  });

  test('every StatusCode value encodes identically in DeniedHttpResponse.status', () => {
    const codes = ours.lookupEnum('envoy.type.v3.StatusCode').values;
    for (const [name, value] of Object.entries(codes)) {
      if (value === 0) continue;
      const r = expectWireCompatible('envoy.service.auth.v3.DeniedHttpResponse', { status: { code: value } });
      expect((r.oursDecodedObject as OfficialDeniedResponse).status.code).toBe(name);
    }
  });
});

// ---------------------------------------------------------------------------
// Reflection: field names/numbers/types vs. the official definitions.

function allTypes(ns: protobuf.NamespaceBase): protobuf.Type[] {
  const out: protobuf.Type[] = [];
  for (const nested of ns.nestedArray) {
    if (nested instanceof protobuf.Type) out.push(nested);
    if (nested instanceof protobuf.Namespace || nested instanceof protobuf.Type) {
      out.push(...allTypes(nested));
    }
  }
  return out;
}

function allEnums(ns: protobuf.NamespaceBase): protobuf.Enum[] {
  const out: protobuf.Enum[] = [];
  for (const nested of ns.nestedArray) {
    if (nested instanceof protobuf.Enum) out.push(nested);
    if (nested instanceof protobuf.Namespace || nested instanceof protobuf.Type) {
      out.push(...allEnums(nested));
    }
  }
  return out;
}

const strip = (fullName: string) => fullName.replace(/^\./, '');

/** Our messages and enums, excluding protobufjs' bundled google.protobuf.*. */
function ourDefinitions() {
  const own = (n: { fullName: string }) => !strip(n.fullName).startsWith('google.protobuf.');
  return { types: allTypes(ours).filter(own), enums: allEnums(ours).filter(own) };
}

function describeField(field: protobuf.Field) {
  field.resolve();
  const resolved = field.resolvedType;
  return {
    id: field.id,
    type: resolved ? strip(resolved.fullName) : field.type,
    keyType: field instanceof protobuf.MapField ? field.keyType : undefined,
    map: field.map,
    repeated: field.repeated,
    oneof: field.partOf?.name,
  };
}

describe('proto/ definitions match the official ones field by field', () => {
  const { types, enums } = ourDefinitions();

  test('our copy contains the expected messages and enums', () => {
    const names = types.map((t) => strip(t.fullName)).sort();
    expect(names).toEqual(
      [
        'envoy.config.core.v3.Address',
        'envoy.config.core.v3.EnvoyInternalAddress',
        'envoy.config.core.v3.HeaderMap',
        'envoy.config.core.v3.HeaderValue',
        'envoy.config.core.v3.HeaderValueOption',
        'envoy.config.core.v3.Metadata',
        'envoy.config.core.v3.Pipe',
        'envoy.config.core.v3.QueryParameter',
        'envoy.config.core.v3.SocketAddress',
        'envoy.service.auth.v3.AttributeContext',
        'envoy.service.auth.v3.AttributeContext.HttpRequest',
        'envoy.service.auth.v3.AttributeContext.Peer',
        'envoy.service.auth.v3.AttributeContext.Request',
        'envoy.service.auth.v3.AttributeContext.TLSSession',
        'envoy.service.auth.v3.CheckRequest',
        'envoy.service.auth.v3.CheckResponse',
        'envoy.service.auth.v3.DeniedHttpResponse',
        'envoy.service.auth.v3.OkHttpResponse',
        'envoy.type.v3.HttpStatus',
        'google.rpc.Status',
      ].sort(),
    );
    expect(enums.map((e) => strip(e.fullName)).sort()).toEqual([
      'envoy.config.core.v3.HeaderValueOption.HeaderAppendAction',
      'envoy.config.core.v3.SocketAddress.Protocol',
      'envoy.type.v3.StatusCode',
    ]);
  });

  test('every allow-listed newer field really exists in our copy', () => {
    for (const qualified of NEWER_THAN_DEPS_SNAPSHOT) {
      const dot = qualified.lastIndexOf('.');
      const type = ours.lookupType(qualified.slice(0, dot));
      expect(type.fields[qualified.slice(dot + 1)]).toBeDefined();
    }
  });

  test.each(types.map((t) => [strip(t.fullName), t] as const))('%s', (name, ourType) => {
    const officialType = official.lookupType(name); // throws if the message name is wrong
    for (const field of ourType.fieldsArray) {
      const qualified = `${name}.${field.name}`;
      const officialField = officialType.fields[field.name];
      if (officialField === undefined && NEWER_THAN_DEPS_SNAPSHOT.has(qualified)) {
        // Not in the snapshot yet: its number must at least be free there.
        expect({ qualified, takenBy: officialType.fieldsById[field.id]?.name }).toEqual({
          qualified,
          takenBy: undefined,
        });
        continue;
      }
      expect({ qualified, exists: officialField !== undefined }).toEqual({ qualified, exists: true });
      expect({ qualified, ...describeField(field) }).toEqual({ qualified, ...describeField(officialField!) });
    }
    // Messages we keep are kept whole: no official field may be missing.
    const missing = officialType.fieldsArray.map((f) => f.name).filter((n) => ourType.fields[n] === undefined);
    expect({ name, missing }).toEqual({ name, missing: [] });
    // Same oneofs with the same members (for fields the snapshot knows).
    const oneofs = (t: protobuf.Type, known: (f: string) => boolean) =>
      Object.fromEntries(t.oneofsArray.map((o) => [o.name, o.oneof.filter(known).sort()]));
    const inOfficial = (f: string) => officialType.fields[f] !== undefined;
    expect(oneofs(ourType, inOfficial)).toEqual(oneofs(officialType, inOfficial));
  });

  test.each(enums.map((e) => [strip(e.fullName), e] as const))('enum %s', (name, ourEnum) => {
    const officialEnum = official.lookupEnum(name);
    expect(ourEnum.values).toEqual(officialEnum.values);
  });

  test('StatusCode is complete (copied verbatim)', () => {
    const values = ours.lookupEnum('envoy.type.v3.StatusCode').values;
    expect(Object.keys(values)).toHaveLength(Object.keys(official.lookupEnum('envoy.type.v3.StatusCode').values).length);
    expect(values).toMatchObject({
      Empty: 0,
      OK: 200,
      BadRequest: 400,
      Unauthorized: 401,
      PaymentRequired: 402,
      Forbidden: 403,
      NotFound: 404,
      PayloadTooLarge: 413,
      TooManyRequests: 429,
      RequestHeaderFieldsTooLarge: 431,
      InternalServerError: 500,
      ServiceUnavailable: 503,
      GatewayTimeout: 504,
      NetworkAuthenticationRequired: 511,
    });
  });

  test('Authorization service matches (package, service, method, request/response types)', () => {
    const summarize = (root: protobuf.Root) => {
      const svc = root.lookupService(AUTHORIZATION_SERVICE_NAME);
      return svc.methodsArray.map((m) => {
        m.resolve();
        return {
          name: m.name,
          request: strip(m.resolvedRequestType!.fullName),
          response: strip(m.resolvedResponseType!.fullName),
          requestStream: !!m.requestStream,
          responseStream: !!m.responseStream,
        };
      });
    };
    expect(summarize(ours)).toEqual(summarize(official));
    expect(summarize(ours)).toEqual([
      {
        name: 'Check',
        request: 'envoy.service.auth.v3.CheckRequest',
        response: 'envoy.service.auth.v3.CheckResponse',
        requestStream: false,
        responseStream: false,
      },
    ]);
  });
});

// ---------------------------------------------------------------------------

describe('src/check/proto-loading.ts', () => {
  test('PROTO_ROOT is <repo>/proto and LOADER_OPTIONS are as agreed', () => {
    expect(path.isAbsolute(PROTO_ROOT)).toBe(true);
    expect(PROTO_ROOT).toBe(path.resolve(__dirname, '..', '..', 'proto'));
    expect(LOADER_OPTIONS).toMatchObject({
      keepCase: true,
      longs: String,
      enums: String,
      defaults: true,
      oneofs: true,
      includeDirs: [PROTO_ROOT],
    });
  });

  test('loads the Authorization service at /envoy.service.auth.v3.Authorization/Check', () => {
    const { service, packageDefinition } = loadAuthorizationService();
    expect(Object.keys(service)).toEqual(['Check']);
    const check = service['Check']!;
    expect(check.path).toBe('/envoy.service.auth.v3.Authorization/Check');
    expect(check.requestStream).toBe(false);
    expect(check.responseStream).toBe(false);
    expect(packageDefinition).toHaveProperty(['envoy.service.auth.v3.Authorization']);
    expect(packageDefinition).toHaveProperty(['envoy.service.auth.v3.CheckRequest']);
  });

  test("proto-loader (de)serializers interoperate with the official types", () => {
    const { service } = loadAuthorizationService();
    const check = service['Check']!;
    const officialReq = official.lookupType('envoy.service.auth.v3.CheckRequest');
    const officialRes = official.lookupType('envoy.service.auth.v3.CheckResponse');

    // Envoy -> us: official bytes are deserialized by our service definition.
    const req = fullCheckRequest({ socket_address: { address: '203.0.113.7', port_value: 1 } }, { pipe: { path: '/p' } });
    const reqBytes = Buffer.from(officialReq.encode(officialReq.fromObject(req)).finish());
    const decodedReq = check.requestDeserialize(reqBytes) as DecodedCheckRequest;
    expect(decodedReq.attributes.request.http.size).toBe('9007199254740993');
    expect(decodedReq.attributes.request.http.headers[':path']).toBe('/v1/chat/completions?stream=true');
    expect(decodedReq.attributes.source.address.address).toBe('socket_address');
    expect(decodedReq.attributes.context_extensions).toEqual({ plan_scope: 'api', virtual_host: 'api' });

    // us -> Envoy: what our handler returns (enum names, BoolValue wrapper) decodes officially.
    const resBytes = check.responseSerialize({
      status: { code: 7, message: 'denied' },
      denied_response: {
        status: { code: 'TooManyRequests' },
        headers: [{ header: { key: 'retry-after', value: '30' }, append: { value: false }, append_action: 2 }],
        body: '{"error":"rate_limited"}',
      },
    });
    const decodedRes = officialRes.toObject(officialRes.decode(resBytes), CONVERSION) as OfficialCheckResponse;
    expect(decodedRes.status).toEqual({ code: 7, message: 'denied', details: [] });
    expect(decodedRes.http_response).toBe('denied_response');
    expect(decodedRes.denied_response.status.code).toBe('TooManyRequests');
    expect(decodedRes.denied_response.headers[0]).toMatchObject({
      header: { key: 'retry-after', value: '30' },
      append: { value: false },
      append_action: 'OVERWRITE_IF_EXISTS_OR_ADD',
    });
  });
});
