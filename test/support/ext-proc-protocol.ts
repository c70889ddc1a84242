/**
 * envoy.service.ext_proc.v3.ExternalProcessor from Envoy's OFFICIAL protos
 * (the copy bundled in @grpc/grpc-js-xds/deps, loaded like the ext_authz
 * client in envoy-official-client.ts), shared by the Envoy-faithful front's
 * ext_proc filter (test/e2e/ext-proc-tap.ts, the client) and the processor
 * stub (ext-proc-recorder.ts, the server). The types say how a
 * ProcessingRequest decodes with OFFICIAL_LOADER_OPTIONS (keepCase, enums as
 * strings, defaults, oneofs): every field present, unset messages null, bytes
 * as Buffers, and `request` naming the oneof member that is set.
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

import { OFFICIAL_LOADER_OPTIONS, type OfficialStruct } from './envoy-official-client';

export const OFFICIAL_EXT_PROC_PROTO = 'envoy/service/ext_proc/v3/external_processor.proto';

/** The key of ProcessingRequest.attributes under which Envoy puts the evaluated request/response attributes. */
export const EXT_PROC_ATTRIBUTES_KEY = 'envoy.filters.http.ext_proc';

export type ProcessingRequestKind =
  'request_headers' | 'response_headers' | 'request_body' | 'response_body' | 'request_trailers' | 'response_trailers';

/** Envoy (≥ 1.2x) fills only `raw_value`; `value` stays empty. */
export interface ExtProcHeaderValue {
  key: string;
  value: string;
  raw_value: Buffer;
}

export interface ExtProcHttpHeaders {
  headers: { headers: ExtProcHeaderValue[] } | null;
  end_of_stream: boolean;
}

export interface ExtProcHttpBody {
  body: Buffer;
  end_of_stream: boolean;
}

export interface ExtProcHttpTrailers {
  trailers: { headers: ExtProcHeaderValue[] } | null;
}

/** A ProcessingRequest as the processor decodes it. */
export interface ReceivedProcessingRequest {
  request: ProcessingRequestKind;
  request_headers: ExtProcHttpHeaders | null;
  response_headers: ExtProcHttpHeaders | null;
  request_body: ExtProcHttpBody | null;
  response_body: ExtProcHttpBody | null;
  request_trailers: ExtProcHttpTrailers | null;
  response_trailers: ExtProcHttpTrailers | null;
  metadata_context: { filter_metadata: Record<string, OfficialStruct>; typed_filter_metadata: Record<string, unknown> } | null;
  attributes: Record<string, OfficialStruct>;
  observability_mode: boolean;
}

let cachedService: { definition: grpc.ServiceDefinition; client: grpc.ServiceClientConstructor } | undefined;

/** The ExternalProcessor service (definition for a server, constructor for a client), loaded once. */
export function externalProcessorService(): { definition: grpc.ServiceDefinition; client: grpc.ServiceClientConstructor } {
  if (cachedService === undefined) {
    const definition = protoLoader.loadSync(OFFICIAL_EXT_PROC_PROTO, OFFICIAL_LOADER_OPTIONS);
    const loaded = grpc.loadPackageDefinition(definition) as {
      envoy?: { service?: { ext_proc?: { v3?: { ExternalProcessor?: grpc.ServiceClientConstructor } } } };
    };
    const client = loaded.envoy?.service?.ext_proc?.v3?.ExternalProcessor;
    if (typeof client !== 'function') throw new Error('envoy.service.ext_proc.v3.ExternalProcessor not found in the official protos');
    cachedService = { definition: client.service, client };
  }
  return cachedService;
}

/** The header entries of a headers or trailers message, in order, values decoded from raw_value. */
export function headerEntries(map: { headers: ExtProcHeaderValue[] } | null | undefined): [string, string][] {
  return (map?.headers ?? []).map((h) => [h.key, h.raw_value.length > 0 ? h.raw_value.toString('utf8') : h.value]);
}

/** The first value of a header in a headers message (keys are lower-case on the wire). */
export function headerValue(map: { headers: ExtProcHeaderValue[] } | null | undefined, name: string): string | undefined {
  return headerEntries(map).find(([key]) => key === name)?.[1];
}

/** One attribute Envoy evaluated (attributes["envoy.filters.http.ext_proc"]), as a number or string. */
export function attributeValue(message: ReceivedProcessingRequest, name: string): number | string | boolean | undefined {
  const field = message.attributes[EXT_PROC_ATTRIBUTES_KEY]?.fields[name];
  if (field === undefined) return undefined;
  return field.numberValue ?? field.stringValue ?? field.boolValue;
}
