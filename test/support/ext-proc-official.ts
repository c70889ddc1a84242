/**
 * envoy.service.ext_proc.v3.ExternalProcessor from Envoy's OFFICIAL protos
 * (the copy bundled in @grpc/grpc-js-xds/deps, loaded as the ext_authz client
 * in envoy-official-client.ts loads its own), never from anything of ours:
 * the processor's tests send the bytes Envoy sends and read them back as
 * protobufjs would.
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

import { OFFICIAL_LOADER_OPTIONS } from './envoy-official-client';

export const OFFICIAL_EXT_PROC_PROTO = 'envoy/service/ext_proc/v3/external_processor.proto';
export const PROCESS_PATH = '/envoy.service.ext_proc.v3.ExternalProcessor/Process';
/** Where Envoy puts the request_attributes / response_attributes it evaluated. */
export const EXT_PROC_ATTRIBUTES_KEY = 'envoy.filters.http.ext_proc';

let loaded: { definition: protoLoader.MethodDefinition<object, object>; client: grpc.ServiceClientConstructor } | undefined;

function load(): NonNullable<typeof loaded> {
  if (loaded === undefined) {
    const packageDefinition = protoLoader.loadSync(OFFICIAL_EXT_PROC_PROTO, OFFICIAL_LOADER_OPTIONS);
    const service = packageDefinition['envoy.service.ext_proc.v3.ExternalProcessor'] as protoLoader.ServiceDefinition;
    const pkg = grpc.loadPackageDefinition(packageDefinition) as {
      envoy?: { service?: { ext_proc?: { v3?: { ExternalProcessor?: grpc.ServiceClientConstructor } } } };
    };
    const client = pkg.envoy?.service?.ext_proc?.v3?.ExternalProcessor;
    if (typeof client !== 'function' || !service.Process) throw new Error('ExternalProcessor not found in the official protos');
    loaded = { definition: service.Process, client };
  }
  return loaded;
}

/** ProcessingRequest bytes as Envoy writes them (protobufjs with the official protos). */
export function serializeProcessingRequest(message: object): Buffer {
  return load().definition.requestSerialize(message);
}

/** ProcessingRequest as protobufjs reads it with the official protos (keepCase, defaults, oneofs). */
export function deserializeProcessingRequest(bytes: Buffer): OfficialProcessingRequest {
  return load().definition.requestDeserialize(bytes) as OfficialProcessingRequest;
}

export interface OfficialHeaderValue {
  key: string;
  value: string;
  raw_value: Buffer;
}

export interface OfficialStructValue {
  kind?: string;
  numberValue?: number;
  stringValue?: string;
  boolValue?: boolean;
  nullValue?: string;
}

export interface OfficialProcessingRequest {
  request?: string;
  request_headers?: { headers: { headers: OfficialHeaderValue[] } | null; end_of_stream: boolean } | null;
  response_headers?: { headers: { headers: OfficialHeaderValue[] } | null; end_of_stream: boolean } | null;
  request_body?: { body: Buffer; end_of_stream: boolean } | null;
  response_body?: { body: Buffer; end_of_stream: boolean } | null;
  request_trailers?: { trailers: { headers: OfficialHeaderValue[] } | null } | null;
  response_trailers?: { trailers: { headers: OfficialHeaderValue[] } | null } | null;
  attributes: Record<string, { fields: Record<string, OfficialStructValue> }>;
  observability_mode: boolean;
}

/** The official ExternalProcessor client, as Envoy's ext_proc filter calls it (one Process call per HTTP request). */
export interface ProcessClient {
  process(): grpc.ClientDuplexStream<object, object>;
  close(): void;
}

export function createProcessClient(address: string, options: grpc.ClientOptions = {}): ProcessClient {
  const Client = load().client;
  const client = new Client(address, grpc.credentials.createInsecure(), options) as unknown as grpc.Client & {
    Process(metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<object, object>;
  };
  return { process: () => client.Process(new grpc.Metadata()), close: () => client.close() };
}

/** A HeaderMap as current Envoy fills it: lower-case keys, only raw_value set, one entry per field line. */
export function headerMap(headers: readonly (readonly [string, string])[]): { headers: { key: string; raw_value: Buffer }[] } {
  return { headers: headers.map(([key, value]) => ({ key, raw_value: Buffer.from(value, 'utf8') })) };
}

/** What Envoy sends in observability mode: every message carries observability_mode (and an empty metadata_context). */
export function observed(message: object): object {
  return { ...message, metadata_context: {}, observability_mode: true };
}
