import type { HeaderNames } from '../routes/header-names';

/**
 * Every request header a step of the pipeline reads: the credential headers
 * in every spelling (taken, or scanned for upstream keys), the version
 * headers, and the generative-style key headers that route a models request.
 * An adapter may leave every other header out of AuthRequest.headers; the
 * gRPC adapter does, and so never decodes them.
 * test/pipeline/headers-read.test.ts watches every header the pipeline reads
 * on every Envoy-shaped fixture, so a step that starts reading another header
 * fails there until it is added here.
 */
export function headersThePipelineReads(names: HeaderNames): readonly string[] {
  return [...new Set([...names.allCredentialHeaders, ...names.versionHeaders, ...names.vendorgKeyHeaders])];
}
