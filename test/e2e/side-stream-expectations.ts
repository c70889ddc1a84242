/**
 * For e2e tests that run the front's ext_proc filter against the recording
 * processor stub (startE2EWorld({ extProc: 'recorder' })): the processor was
 * sent the answer exactly as the upstream wrote it, under the identity
 * ext_authz set, ending once, and reads from it the usage the upstream
 * reported.
 */
import { IDENTITY_HEADERS } from '../../src/check/responses/identity-headers';
import { headerEntries } from '../support/ext-proc-protocol';
import { isFinalMessage, type RecordedSideStream } from '../support/ext-proc-recorder';
import { usageReadingOf } from '../support/side-stream-usage';
import type { E2EWorld } from './e2e-world';
import type { RecordedRequest } from './fake-upstream';

export async function expectMeteredAsUpstreamReported(world: E2EWorld, upstream: RecordedRequest): Promise<RecordedSideStream> {
  if (!world.processor) throw new Error("the world has no processor stub: start it with { extProc: 'recorder' }");
  const stream = await world.processor.streamFor(String(upstream.headers['x-request-id']));
  await stream.until((s) => s.sawFinalMessage, 5000, 'the final message');

  const requestHeaders = new Map(headerEntries(stream.messages[0]!.request_headers?.headers));
  for (const name of Object.values(IDENTITY_HEADERS))
    expect({ name, value: requestHeaders.get(name) }).toEqual({ name, value: upstream.headers[name] });
  expect(stream.messages.map((m) => m.observability_mode)).not.toContain(false);
  expect(stream.messages.filter(isFinalMessage)).toEqual([stream.messages[stream.messages.length - 1]]);
  expect(stream.responseBody().equals(Buffer.concat(upstream.responseChunks))).toBe(true);

  const reading = usageReadingOf(stream);
  if (upstream.reportedUsage) expect(reading).toMatchObject({ kind: 'reported', tokens: upstream.reportedUsage, streamComplete: true });
  else expect(reading.kind).toBe('none');
  return stream;
}
