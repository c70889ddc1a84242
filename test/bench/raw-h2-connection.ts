/**
 * A minimal HTTP/2 client connection for unary gRPC calls, written against
 * the socket directly, in the spirit of h2load: on these 2-core machines the
 * load driver shares the CPU with the server it measures, and node:http2's
 * client costs several times the server's own per-request work. Here one
 * request is two frames copied into a batched write.
 *
 * What it does (RFC 9113): the client preface and SETTINGS (push off, big
 * windows), HEADERS + DATA(END_STREAM) per call with a constant header
 * block (HPACK literals, no dynamic table use, so nothing to keep in sync),
 * the server's connection-level send window, SETTINGS/PING acks,
 * WINDOW_UPDATE for what it receives, RST_STREAM and GOAWAY. Its request
 * headers are indexed as nghttp2 (Envoy's HTTP/2 codec) indexes them: every
 * field enters the HPACK dynamic table on the first request and is sent as
 * a one-byte index after it, except `:path`, which nghttp2 never indexes
 * (a literal with its name indexed, on every request). No Huffman coding.
 *
 * What it does not: decode the server's HPACK. A gRPC unary answer is
 * HEADERS, DATA, trailers on success and a trailers-only HEADERS on error
 * (the service's transport and grpc-js alike), so "DATA then END_STREAM" means grpc-status 0 and "END_STREAM
 * without DATA" means an RPC error. The DATA (the CheckResponse) is handed
 * back when asked for, to be decoded and checked.
 */
import * as net from 'node:net';
import { hpackInteger, hpackString } from '../support/hpack-encoding';
import { FLAG, FRAME } from '../support/raw-h2-frames';

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
const OUR_WINDOW = 1 << 30;

/**
 * `unprocessed`: the request never reached the server's application (refused by GOAWAY, or never sent), so it may be sent again.
 * `answered`: the server did answer, with a gRPC error (a trailers-only response: shed, past its deadline, internal…).
 * `overflow`: never sent: a queued request that `mayStartQueued` refused (the driver's model of Envoy's circuit breaker).
 */
export type RawCompletion =
  { ok: true; body?: Buffer } | { ok: false; error: string; unprocessed?: boolean; answered?: boolean; overflow?: boolean };

const OVERFLOW: RawCompletion = { ok: false, error: 'overflow (circuit breaker)', overflow: true };

interface Pending {
  done: (completion: RawCompletion) => void;
  keepBody: boolean;
  chunks: Buffer[] | undefined;
  gotData: boolean;
}

/** RFC 7541 Appendix A: `:path`'s name index. */
const PATH_NAME_INDEX = 4;
/** The first entry of the dynamic table (RFC 7541 §2.3.3). */
const FIRST_DYNAMIC_INDEX = 62;

/**
 * The first request's header block (each field but `:path` a literal with
 * incremental indexing, new name) and every later request's (one index per
 * field, most recently inserted = 62, and the `:path` literal).
 */
export function envoyLikeHeaderBlocks(headers: readonly (readonly [string, string])[]): { first: Buffer; next: Buffer } {
  const first: number[] = [];
  const next: number[] = [];
  const indexed = headers.filter(([name]) => name !== ':path').length;
  let inserted = 0;
  for (const [name, value] of headers) {
    if (name === ':path') {
      const literal = [...hpackInteger(PATH_NAME_INDEX, 4, 0x00), ...hpackString(value)];
      first.push(...literal);
      next.push(...literal);
      continue;
    }
    first.push(0x40, ...hpackString(name), ...hpackString(value));
    next.push(...hpackInteger(FIRST_DYNAMIC_INDEX + (indexed - 1 - inserted), 7, 0x80));
    inserted += 1;
  }
  return { first: Buffer.from(first), next: Buffer.from(next) };
}

function frameHeader(length: number, type: number, flags: number, streamId: number): Buffer {
  const header = Buffer.allocUnsafe(9);
  header.writeUIntBE(length, 0, 3);
  header.writeUInt8(type, 3);
  header.writeUInt8(flags, 4);
  header.writeUInt32BE(streamId & 0x7fffffff, 5);
  return header;
}

export class RawH2Connection {
  private readonly pending = new Map<number, Pending>();
  private nextStreamId = 1;
  /** What the server lets us send before its next WINDOW_UPDATE (connection level). */
  private sendWindow = 65_535;
  private streamWindow = 65_535;
  private maxConcurrent = Number.POSITIVE_INFINITY;
  private readonly queue: { frame: Buffer; entry: Pending }[] = [];
  private out: Buffer[] = [];
  private flushScheduled = false;
  private inbox: Buffer = Buffer.alloc(0);
  private received = 0;
  private closed: string | undefined;
  /** Called at the server's first SETTINGS: until then its stream limit is not known. */
  private onSettings: (() => void) | undefined;
  /** Asked before a queued request gets a stream; false answers it as an overflow, unsent (Envoy's max_requests). */
  mayStartQueued: (() => boolean) | undefined;

  private constructor(
    private readonly socket: net.Socket,
    private headerBlock: Buffer,
    private readonly laterHeaderBlock: Buffer,
  ) {
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', (error) => this.fail(`connection error: ${error.message}`));
    socket.on('close', () => this.fail('connection closed'));
  }

  static connect(host: string, port: number, headers: readonly (readonly [string, string])[]): Promise<RawH2Connection> {
    return new Promise((resolve, reject) => {
      // Envoy sets TCP_NODELAY on its upstream connections.
      const socket = net.connect({ host, port, noDelay: true });
      socket.once('error', reject);
      socket.once('connect', () => {
        const blocks = envoyLikeHeaderBlocks(headers);
        const connection = new RawH2Connection(socket, blocks.first, blocks.next);
        // Ready at the server's SETTINGS (its preface), as Envoy's pool: a request sent before it could exceed a stream limit not yet seen.
        connection.onSettings = () => {
          socket.off('error', reject);
          resolve(connection);
        };
        // Closed before its SETTINGS (a server at its connection limit): no connection (a no-op once resolved).
        socket.once('close', () => reject(new Error('connection closed before the server sent its SETTINGS')));
        const settings = Buffer.alloc(12);
        settings.writeUInt16BE(0x2, 0); // ENABLE_PUSH
        settings.writeUInt32BE(0, 2);
        settings.writeUInt16BE(0x4, 6); // INITIAL_WINDOW_SIZE
        settings.writeUInt32BE(OUR_WINDOW, 8);
        const windowUpdate = Buffer.alloc(4);
        windowUpdate.writeUInt32BE(OUR_WINDOW - 65_535, 0);
        socket.write(
          Buffer.concat([
            PREFACE,
            frameHeader(12, FRAME.SETTINGS, 0, 0),
            settings,
            frameHeader(4, FRAME.WINDOW_UPDATE, 0, 0),
            windowUpdate,
          ]),
        );
      });
    });
  }

  get inFlight(): number {
    return this.pending.size + this.queue.length;
  }

  /** Streams open on this connection (sent, not yet answered). */
  get streams(): number {
    return this.pending.size;
  }

  /** A new request would be sent at once: under the server's SETTINGS_MAX_CONCURRENT_STREAMS, nothing queued here. */
  get hasRoom(): boolean {
    return this.queue.length === 0 && this.pending.size < this.maxConcurrent;
  }

  /** Streams this connection could start now (the server's limit less those open), nothing queued counted. */
  get room(): number {
    return Math.max(0, this.maxConcurrent - this.pending.size - this.queue.length);
  }

  /** Requests queued here for want of a stream, for another connection to send (as Envoy's pool dispatches a pending request). */
  get queued(): number {
    return this.queue.length;
  }

  /** Takes up to `count` queued requests off this connection and sends them on `other`, with their own callbacks. */
  handOver(count: number, other: RawH2Connection): void {
    // A request refused as an overflow takes no stream: the next one is tried (Envoy's onUpstreamReady loop).
    let handed = 0;
    while (handed < count && this.queue.length > 0) {
      const { frame, entry } = this.queue.shift()!;
      if (other.mayStartQueued && !other.mayStartQueued()) {
        entry.done(OVERFLOW);
        continue;
      }
      other.request(frame, entry.keepBody, entry.done);
      handed += 1;
    }
  }

  get isOpen(): boolean {
    return this.closed === undefined;
  }

  /** One unary call: `grpcFrame` is the 5-byte-prefixed request message. */
  request(grpcFrame: Buffer, keepBody: boolean, done: (completion: RawCompletion) => void): void {
    if (this.closed) {
      done({ ok: false, error: this.closed, unprocessed: true });
      return;
    }
    const entry: Pending = { done, keepBody, chunks: undefined, gotData: false };
    if (this.queue.length > 0 || !this.canSend(grpcFrame.length)) {
      this.queue.push({ frame: grpcFrame, entry });
      return;
    }
    this.start(grpcFrame, entry);
  }

  close(): void {
    this.closed ??= 'closed by the driver';
    this.socket.end();
  }

  private canSend(length: number): boolean {
    return length <= this.sendWindow && length <= this.streamWindow && this.pending.size < this.maxConcurrent;
  }

  private start(grpcFrame: Buffer, entry: Pending): void {
    const streamId = this.nextStreamId;
    this.nextStreamId += 2;
    this.sendWindow -= grpcFrame.length;
    this.pending.set(streamId, entry);
    const headerBlock = this.headerBlock;
    // Frames leave in the order they are queued, so the server's table has the first block's entries from here on.
    this.headerBlock = this.laterHeaderBlock;
    this.out.push(
      frameHeader(headerBlock.length, FRAME.HEADERS, FLAG.END_HEADERS, streamId),
      headerBlock,
      frameHeader(grpcFrame.length, FRAME.DATA, FLAG.END_STREAM, streamId),
      grpcFrame,
    );
    this.scheduleFlush();
  }

  private drainQueue(): void {
    while (this.queue.length > 0 && this.canSend(this.queue[0]!.frame.length)) {
      const { frame, entry } = this.queue.shift()!;
      if (this.mayStartQueued && !this.mayStartQueued()) entry.done(OVERFLOW);
      else this.start(frame, entry);
    }
  }

  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    process.nextTick(() => {
      this.flushScheduled = false;
      if (this.out.length === 0 || this.closed) return;
      const chunk = Buffer.concat(this.out);
      this.out = [];
      this.socket.write(chunk);
    });
  }

  private control(frame: Buffer): void {
    this.out.push(frame);
    this.scheduleFlush();
  }

  private onData(chunk: Buffer): void {
    let buffer = this.inbox.length > 0 ? Buffer.concat([this.inbox, chunk]) : chunk;
    let offset = 0;
    while (buffer.length - offset >= 9) {
      const length = buffer.readUIntBE(offset, 3);
      if (buffer.length - offset < 9 + length) break;
      const type = buffer[offset + 3]!;
      const flags = buffer[offset + 4]!;
      const streamId = buffer.readUInt32BE(offset + 5) & 0x7fffffff;
      this.onFrame(type, flags, streamId, buffer.subarray(offset + 9, offset + 9 + length));
      offset += 9 + length;
    }
    buffer = buffer.subarray(offset);
    // Keep a copy only of an incomplete frame, so big chunks are not retained.
    this.inbox = buffer.length > 0 ? Buffer.from(buffer) : Buffer.alloc(0);
    this.drainQueue();
  }

  private onFrame(type: number, flags: number, streamId: number, payload: Buffer): void {
    switch (type) {
      case FRAME.DATA: {
        this.received += payload.length;
        if (this.received >= OUR_WINDOW / 2) {
          const increment = Buffer.alloc(4);
          increment.writeUInt32BE(this.received, 0);
          this.control(Buffer.concat([frameHeader(4, FRAME.WINDOW_UPDATE, 0, 0), increment]));
          this.received = 0;
        }
        const entry = this.pending.get(streamId);
        if (!entry) return;
        entry.gotData = true;
        if (entry.keepBody) {
          const start = flags & FLAG.PADDED ? 1 : 0;
          const end = flags & FLAG.PADDED ? payload.length - payload[0]! : payload.length;
          (entry.chunks ??= []).push(Buffer.from(payload.subarray(start, end)));
        }
        if (flags & FLAG.END_STREAM) this.finish(streamId, entry);
        return;
      }
      case FRAME.HEADERS:
      case FRAME.CONTINUATION: {
        const entry = this.pending.get(streamId);
        if (entry && flags & FLAG.END_STREAM) this.finish(streamId, entry);
        return;
      }
      case FRAME.RST_STREAM: {
        const entry = this.pending.get(streamId);
        if (entry) {
          this.pending.delete(streamId);
          entry.done({ ok: false, error: `RST_STREAM ${payload.readUInt32BE(0)}` });
        }
        return;
      }
      case FRAME.SETTINGS: {
        if (flags & FLAG.ACK) return;
        for (let at = 0; at + 6 <= payload.length; at += 6) {
          const id = payload.readUInt16BE(at);
          const value = payload.readUInt32BE(at + 2);
          if (id === 0x3) this.maxConcurrent = value;
          if (id === 0x4) this.streamWindow = value;
        }
        this.control(frameHeader(0, FRAME.SETTINGS, FLAG.ACK, 0));
        const settled = this.onSettings;
        this.onSettings = undefined;
        settled?.();
        return;
      }
      case FRAME.PING:
        if (!(flags & FLAG.ACK)) this.control(Buffer.concat([frameHeader(8, FRAME.PING, FLAG.ACK, 0), payload]));
        return;
      case FRAME.WINDOW_UPDATE:
        if (streamId === 0) this.sendWindow += payload.readUInt32BE(0) & 0x7fffffff;
        return;
      case FRAME.GOAWAY: {
        const lastStreamId = payload.readUInt32BE(0) & 0x7fffffff;
        this.closed = `GOAWAY (error ${payload.readUInt32BE(4)})`;
        // Streams up to lastStreamId still get their answers; later ones, and those never sent, were not processed.
        for (const [id, entry] of this.pending) {
          if (id > lastStreamId) {
            this.pending.delete(id);
            entry.done({ ok: false, error: this.closed, unprocessed: true });
          }
        }
        for (const { entry } of this.queue.splice(0)) entry.done({ ok: false, error: this.closed, unprocessed: true });
        return;
      }
      default:
        return;
    }
  }

  private finish(streamId: number, entry: Pending): void {
    this.pending.delete(streamId);
    if (!entry.gotData) {
      entry.done({ ok: false, error: 'gRPC error (trailers-only response)', answered: true });
      return;
    }
    entry.done(entry.keepBody ? { ok: true, body: Buffer.concat(entry.chunks ?? []) } : { ok: true });
  }

  private fail(reason: string): void {
    this.closed ??= reason;
    for (const [id, entry] of this.pending) {
      this.pending.delete(id);
      entry.done({ ok: false, error: reason });
    }
    for (const { entry } of this.queue.splice(0)) entry.done({ ok: false, error: reason, unprocessed: true });
  }
}
