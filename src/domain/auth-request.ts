/**
 * What the pipeline needs to know about one HTTP request, independent of
 * Envoy's wire format (the gRPC adapter builds it from a CheckRequest).
 */
export interface AuthRequest {
  method: string;
  /** The request target as Envoy passes it: path plus query, undecoded. */
  path: string;
  /** Lower-case header names; duplicates already comma-joined (Envoy does this). */
  headers: Readonly<Record<string, string>>;
  /** From x-request-id, echoed in error bodies; empty when absent. */
  requestId: string;
}
