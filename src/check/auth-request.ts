/**
 * What the pipeline needs to know about one HTTP request, independent of
 * Envoy's wire format (the gRPC adapter builds it from a CheckRequest).
 */
export interface AuthRequest {
  method: string;
  /** The request target as Envoy passes it: path plus query, undecoded. */
  path: string;
  /**
   * Lower-case header names; duplicates already comma-joined (Envoy does this).
   * Adapters may hold only the headers the pipeline reads (pipeline/headers-read.ts).
   */
  headers: Readonly<Record<string, string>>;
  /** From x-request-id, echoed in error bodies; empty when absent. */
  requestId: string;
  /**
   * The request body, only when Envoy's ext_authz sends it (`with_request_body`;
   * off in the shipped envoy.yaml): read for the model a chat-completions or
   * messages request names. May be cut short (`allow_partial_message`).
   */
  body?: Uint8Array;
  /**
   * The caller's address as Envoy reports it (`attributes.source.address.socket_address.address`): with
   * `use_remote_address`, the peer of Envoy's own connection or what `xff_num_trusted_hops` lets it trust, never a
   * header the client chose. Absent when Envoy sent none (a pipe, an internal address).
   */
  sourceAddress?: string;
}
