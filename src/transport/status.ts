/**
 * gRPC status codes (grpc/doc/statuscodes.md), the ones this server sends.
 * A call's status, not CheckResponse.status (that is google.rpc's code for
 * Envoy, see src/check/deny-reasons.ts RPC_CODE).
 */
export const GrpcStatus = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
} as const;

export type GrpcStatusCode = (typeof GrpcStatus)[keyof typeof GrpcStatus];

/** A call that ends without a message: its status code and grpc-message text. */
export interface RpcError {
  code: number;
  details: string;
}
