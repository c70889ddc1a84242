import type { AuthRequest } from './auth-request';
import { headersThePipelineReads } from './pipeline/headers-read';
import type { HeaderNames } from './routes/header-names';
import { HeaderSelection } from './header-selection';

/** The parts of Envoy's CheckRequest we read (proto-loader object, keepCase). */
export interface CheckRequestMessage {
  attributes?: {
    /** The downstream peer: `source.address.socket_address.address` is the caller's IP as Envoy sees it. */
    source?: { address?: { socket_address?: { address?: string } } };
    request?: {
      http?: {
        method?: string;
        path?: string;
        headers?: Record<string, string>;
        header_map?: { headers?: { key?: string; value?: string; raw_value?: Buffer | Uint8Array }[] };
        /** The request body, when ext_authz has `with_request_body` (UTF-8 text). */
        body?: string;
        /** The same, as bytes, with `with_request_body.pack_as_bytes`. */
        raw_body?: Buffer | Uint8Array;
      };
    };
  };
}

/**
 * Envoy sends headers in `headers` (lower-case, duplicates comma-joined), or
 * in `header_map` with raw values when `encode_raw_headers` is on; both are
 * folded into the same lower-case, comma-joined map. Missing attributes give
 * empty strings, which the pipeline treats as a keyless unknown route.
 * A body comes only when Envoy is configured to send one; an empty body is
 * no body.
 */
export function toAuthRequest(message: CheckRequestMessage): AuthRequest {
  const http = message.attributes?.request?.http ?? {};
  const given = http.headers;
  const rawHeaders = http.header_map?.headers ?? NO_RAW_HEADERS;
  let headers: Record<string, string>;
  if (given && rawHeaders.length === 0 && Object.getPrototypeOf(given) === null && allLowerCase(given)) {
    // The decoder's own map (decodeCheckRequest: null prototype, later entries already won) with lower-case
    // names is exactly the copy below would build: adopted, not copied (3 µs of a Check's CPU, cpu-profile.ts).
    // The message is not used after this.
    headers = given;
  } else {
    headers = Object.create(null) as Record<string, string>;
    if (given) {
      for (const name in given) {
        if (Object.prototype.hasOwnProperty.call(given, name)) appendHeader(headers, name, given[name]!);
      }
    }
  }
  for (const entry of rawHeaders) {
    if (!entry.key) continue;
    const value = entry.raw_value && entry.raw_value.length > 0 ? Buffer.from(entry.raw_value).toString('utf8') : (entry.value ?? '');
    appendHeader(headers, entry.key, value);
  }
  const request: AuthRequest = {
    method: (http.method || headers[':method'] || '').toUpperCase(),
    path: http.path || headers[':path'] || '',
    headers,
    requestId: headers['x-request-id'] ?? '',
  };
  if (http.raw_body && http.raw_body.length > 0) request.body = http.raw_body;
  else if (http.body) request.body = Buffer.from(http.body, 'utf8');
  const sourceAddress = message.attributes?.source?.address?.socket_address?.address;
  if (sourceAddress) request.sourceAddress = sourceAddress;
  return request;
}

/** The headers toAuthRequest reads itself: the pseudo-headers stand in for a missing method or path. */
const HEADERS_READ_HERE = [':method', ':path', 'x-request-id'];

/**
 * The headers a Check's decoder keeps: those the pipeline reads, and those toAuthRequest does; with tracing on, the
 * trace headers too (only then: a header kept is a string made for every Check that carries it).
 */
export function checkRequestHeaderSelection(names: HeaderNames, traceHeaders: readonly string[] = []): HeaderSelection {
  return new HeaderSelection([...headersThePipelineReads(names), ...HEADERS_READ_HERE, ...traceHeaders]);
}

/**
 * toLowerCase() returns a new string even when nothing changes, and Envoy's
 * names are already lower case: only names with an ASCII capital or any
 * non-ASCII character (which toLowerCase might change) are converted.
 */
const UPPER_CASE = /[A-Z\u0080-\uffff]/;

const NO_RAW_HEADERS: readonly never[] = Object.freeze([]);

function allLowerCase(headers: Record<string, string>): boolean {
  for (const name in headers) if (UPPER_CASE.test(name)) return false;
  return true;
}

function appendHeader(headers: Record<string, string>, name: string, value: string): void {
  const key = UPPER_CASE.test(name) ? name.toLowerCase() : name;
  const existing = headers[key];
  headers[key] = existing === undefined ? value : `${existing},${value}`;
}
