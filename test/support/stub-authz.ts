/**
 * A stub ext_authz server built from Envoy's OFFICIAL protos (as Envoy's own
 * client is), answering whatever the current test says: for tests of the
 * Envoy-faithful front (test/e2e/envoy-front*.test.ts).
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

import { OFFICIAL_EXTERNAL_AUTH_PROTO, OFFICIAL_LOADER_OPTIONS, type EnvoyCheckRequest } from './envoy-official-client';

export type StubAuthzHandler = (
  request: EnvoyCheckRequest,
  call: grpc.ServerUnaryCall<EnvoyCheckRequest, object>,
) => Promise<object | grpc.StatusObject>;

export interface StubAuthz {
  address: string;
  handler: StubAuthzHandler;
  close(): Promise<void>;
}

export const ALLOW = { status: { code: 0, message: '' }, ok_response: {} };

export async function startStubAuthz(): Promise<StubAuthz> {
  const definition = protoLoader.loadSync(OFFICIAL_EXTERNAL_AUTH_PROTO, OFFICIAL_LOADER_OPTIONS);
  const loaded = grpc.loadPackageDefinition(definition) as unknown as {
    envoy: { service: { auth: { v3: { Authorization: grpc.ServiceClientConstructor } } } };
  };
  const service = loaded.envoy.service.auth.v3.Authorization.service;
  const server = new grpc.Server();
  const stub: StubAuthz = {
    address: '',
    handler: async () => ALLOW,
    close: () =>
      new Promise<void>((resolve) => {
        server.forceShutdown();
        resolve();
      }),
  };
  server.addService(service, {
    Check: (call: grpc.ServerUnaryCall<EnvoyCheckRequest, object>, callback: grpc.sendUnaryData<object>) => {
      stub
        .handler(call.request, call)
        .then((answer) => ('code' in answer && 'details' in answer ? callback(answer) : callback(null, answer)))
        .catch((err: Error) => callback({ code: grpc.status.INTERNAL, details: err.message }));
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, bound) => (err ? reject(err) : resolve(bound))),
  );
  stub.address = `127.0.0.1:${port}`;
  return stub;
}
