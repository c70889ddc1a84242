/**
 * What a usage processor reads from one recorded ext_proc side stream, done
 * the way gateway-authz's processor is meant to: the route family, method
 * and path from the request headers ext_authz left, the status and content
 * headers from the response headers, then every response body chunk into
 * the real extractor (src/metering/). Tests use it to show that what the
 * front sends is enough to meter an answer.
 */
import type { RouteFamily } from '../../src/check/routes/route';
import type { UsageReading } from '../../src/metering/usage';
import { createUsageExtractor } from '../../src/metering/usage-extractor';
import { IDENTITY_HEADERS } from '../../src/check/responses/identity-headers';
import { headerValue } from './ext-proc-protocol';
import type { RecordedSideStream } from './ext-proc-recorder';

export function usageReadingOf(stream: RecordedSideStream): UsageReading {
  const request = stream.messages.find((m) => m.request === 'request_headers')?.request_headers?.headers;
  const response = stream.messages.find((m) => m.request === 'response_headers')?.response_headers?.headers;
  const extractor = createUsageExtractor({
    family: (headerValue(request, IDENTITY_HEADERS.routeFamily) ?? 'other') as RouteFamily,
    method: headerValue(request, ':method') ?? '',
    path: (headerValue(request, ':path') ?? '').split('?', 1)[0]!,
    status: Number(headerValue(response, ':status') ?? 0),
    contentType: headerValue(response, 'content-type'),
    contentEncoding: headerValue(response, 'content-encoding'),
  });
  for (const message of stream.messages) if (message.request === 'response_body') extractor.write(message.response_body!.body);
  return extractor.finish();
}
