/**
 * Loads our trimmed, wire-compatible copy of Envoy's ext_authz v3 API from
 * <repo>/proto (see proto/README.md). Only field numbers/types and the
 * service path travel on the wire; test/proto/wire-compat.test.ts guards the
 * copy against Envoy's official protos.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

import type * as ProtoLoader from '@grpc/proto-loader';

/** Entry file of the ext_authz service, relative to PROTO_ROOT. */
export const EXTERNAL_AUTH_PROTO = 'envoy/service/auth/v3/external_auth.proto';

/** Fully-qualified service name; gRPC path is `/${AUTHORIZATION_SERVICE_NAME}/Check`. */
export const AUTHORIZATION_SERVICE_NAME = 'envoy.service.auth.v3.Authorization';

function findProtoRoot(): string {
  // src/check/ (ts-jest) and dist/check/ (compiled) are both two levels below
  // the repo root. Walk upwards anyway, so a different nesting still works.
  let dir = __dirname;
  for (let i = 0; i < 6; i++) {
    const candidate = path.join(dir, 'proto');
    if (fs.existsSync(path.join(candidate, EXTERNAL_AUTH_PROTO))) {
      return candidate;
    }
    const parent = path.dirname(dir);
    if (parent === dir) break;
    dir = parent;
  }
  return path.resolve(__dirname, '..', '..', 'proto');
}

/** Absolute path to <repo>/proto. */
export const PROTO_ROOT: string = findProtoRoot();

/**
 * proto-loader options. keepCase keeps snake_case field names as in the
 * .proto files (e.g. `denied_response`, `append_action`); int64 values are
 * strings; enums are names (numbers are accepted on input too).
 */
export const LOADER_OPTIONS: ProtoLoader.Options = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [PROTO_ROOT],
};

/**
 * Loads the envoy.service.auth.v3.Authorization service definition: each
 * method's path and protobufjs (de)serializers. grpc-js clients and servers
 * take it as it is (the CLI's check client, the bench's no-op baseline); our
 * server uses its response serializer for answers the fast encoder does not
 * know.
 */
export function loadAuthorizationService(): {
  service: ProtoLoader.ServiceDefinition;
  packageDefinition: ProtoLoader.PackageDefinition;
} {
  // Loaded here, on first use, not with this module: the server encodes its answers itself, so a replica that never
  // meets an answer that encoder does not know never loads proto-loader and protobufjs (5–8 MB of RSS at start).
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- a synchronous load on first use
  const protoLoader = require('@grpc/proto-loader') as typeof ProtoLoader;
  const packageDefinition = protoLoader.loadSync(EXTERNAL_AUTH_PROTO, LOADER_OPTIONS);
  const service = packageDefinition[AUTHORIZATION_SERVICE_NAME] as ProtoLoader.ServiceDefinition | undefined;
  if (!service || typeof service.Check?.responseSerialize !== 'function') {
    throw new Error(`${AUTHORIZATION_SERVICE_NAME} not found in ${path.join(PROTO_ROOT, EXTERNAL_AUTH_PROTO)}`);
  }
  return { service, packageDefinition };
}
