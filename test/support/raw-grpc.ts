/**
 * gRPC calls written by hand on node:http2's client, for what a real gRPC
 * client never sends (a wrong content-type, no `te`, a malformed
 * grpc-timeout, a compressed flag, a length prefix above the limit, frames
 * cut anywhere) and to see the answer's frames as they are: whether the
 * status came Trailers-Only (one HEADERS frame with END_STREAM), with DATA
 * and trailers, or as a reset.
 */
import * as http2 from 'node:http2';

export const CHECK = '/envoy.service.auth.v3.Authorization/Check';

export const GRPC_HEADERS: Readonly<http2.OutgoingHttpHeaders> = {
  ':method': 'POST',
  'content-type': 'application/grpc',
  te: 'trailers',
};

export interface RawAnswer {
  /** Response headers (the first HEADERS frame). */
  headers: http2.IncomingHttpHeaders;
  /** The first HEADERS frame ended the stream: Trailers-Only (or a plain HTTP error). */
  trailersOnly: boolean;
  /** The response body's bytes (length-prefixed messages). */
  data: Buffer;
  /** Trailers, when the answer had DATA then a trailing HEADERS frame. */
  trailers: http2.IncomingHttpHeaders | undefined;
  /** grpc-status from the trailers or the Trailers-Only headers. */
  grpcStatus: number | undefined;
  /** grpc-message as sent (still percent-encoded). */
  grpcMessage: string | undefined;
  /** RST_STREAM code the stream closed with (0 = NO_ERROR). */
  rstCode: number;
}

/** A gRPC frame: compressed flag, big-endian length, message. `length` may lie, to test the limit. */
export function grpcFrame(message: Buffer, options: { flag?: number; length?: number } = {}): Buffer {
  const prefix = Buffer.alloc(5);
  prefix[0] = options.flag ?? 0;
  prefix.writeUInt32BE(options.length ?? message.length, 1);
  return Buffer.concat([prefix, message]);
}

/** The messages of a response body. */
export function messagesOf(data: Buffer): Buffer[] {
  const out: Buffer[] = [];
  for (let offset = 0; offset + 5 <= data.length;) {
    const length = data.readUInt32BE(offset + 1);
    out.push(data.subarray(offset + 5, offset + 5 + length));
    offset += 5 + length;
  }
  return out;
}

export function connect(address: string, options?: http2.ClientSessionOptions): http2.ClientHttp2Session {
  const session = http2.connect(`http://${address}`, options);
  session.on('error', () => undefined);
  return session;
}

/**
 * One call. `body`: the chunks written one by one (each becomes at least one DATA frame); the request's
 * END_STREAM follows unless `endStream` is false. Resolves when the stream closes or `waitMs` passes.
 */
export function rawCall(
  session: http2.ClientHttp2Session,
  options: {
    path?: string;
    headers?: http2.OutgoingHttpHeaders;
    body?: Buffer[];
    endStream?: boolean;
    waitMs?: number;
  },
): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const stream = session.request({ ...GRPC_HEADERS, ':path': options.path ?? CHECK, ...options.headers }, { endStream: false });
    const answer: RawAnswer = {
      headers: {},
      trailersOnly: false,
      data: Buffer.alloc(0),
      trailers: undefined,
      grpcStatus: undefined,
      grpcMessage: undefined,
      rstCode: 0,
    };
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => reject(new Error(`no answer within ${options.waitMs ?? 5000} ms`)), options.waitMs ?? 5000);
    stream.on('response', (headers, flags) => {
      answer.headers = headers;
      answer.trailersOnly = (flags & http2.constants.NGHTTP2_FLAG_END_STREAM) !== 0;
      if (headers['grpc-status'] !== undefined) answer.grpcStatus = Number(headers['grpc-status']);
      if (headers['grpc-message'] !== undefined) answer.grpcMessage = String(headers['grpc-message']);
    });
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('trailers', (trailers: http2.IncomingHttpHeaders) => {
      answer.trailers = trailers;
      answer.grpcStatus = Number(trailers['grpc-status']);
      if (trailers['grpc-message'] !== undefined) answer.grpcMessage = String(trailers['grpc-message']);
    });
    stream.on('error', () => undefined);
    stream.on('close', () => {
      clearTimeout(timer);
      answer.data = Buffer.concat(chunks);
      answer.rstCode = stream.rstCode ?? 0;
      resolve(answer);
    });
    for (const chunk of options.body ?? []) stream.write(chunk);
    if (options.endStream !== false) stream.end();
  });
}
