import type { HeaderNames } from '../routes/header-names';
import { REQUEST_SIZE_HEADER } from './hold-step';

/**
 * Every request header a step of the pipeline reads: the credential headers
 * in every spelling (taken, or scanned for upstream keys), the version
 * headers, the generative-style key headers that route a models request, and
 * the request's size (a credit hold's input estimate, hold-step.ts).
 * An adapter may leave every other header out of AuthRequest.headers; the
 * gRPC adapter does, and so never decodes them.
 * test/pipeline/headers-read.test.ts watches every header the pipeline reads
 * on every Envoy-shaped fixture, so a step that starts reading another header
 * fails there until it is added here.
 */
export function headersThePipelineReads(names: HeaderNames): readonly string[] {
  return [...new Set([...names.allCredentialHeaders, ...names.versionHeaders, ...names.vendorgKeyHeaders, REQUEST_SIZE_HEADER])];
}
