/**
 * The server side of one HTTP/2 connection (RFC 9113) on a `net` socket:
 * frames in and out, HPACK, stream states and flow control, for a gRPC
 * server. What gRPC does with a stream is the caller's (grpc-server.ts);
 * this module knows nothing of it.
 *
 * Why not node:http2: it hands every request header to JavaScript as a new
 * external string, which V8 allocates in old space, so each request leaves
 * old-space garbage that only a mark-compact collects (docs/design/transport.md).
 * Here header values come out of the HPACK dynamic table as the strings it
 * already holds, and the answers of one turn of the event loop leave in one
 * socket write.
 */
import type * as net from 'node:net';
import { performance } from 'node:perf_hooks';
import { AttackBudgets, MAX_BYTES_PER_TURN, MAX_FRAMES_PER_TURN, HEADER_BLOCK_OCTETS_PER_RESET, type AttackBudget } from './attack-budgets';
import { HpackDecoder, HpackError } from './hpack-decoder';
import { TABLE_SIZE_UPDATE_ZERO } from './hpack-encoder';
import {
  CLIENT_PREFACE,
  DEFAULT_MAX_FRAME_BYTES,
  DEFAULT_WINDOW_BYTES,
  ErrorCode,
  Flag,
  FRAME_HEADER_BYTES,
  FrameType,
  MAX_FRAME_BYTES_LIMIT,
  MAX_WINDOW_BYTES,
  Setting,
  writeFrameHeader,
} from './frames';

export interface ConnectionSettings {
  /** SETTINGS_MAX_CONCURRENT_STREAMS: a stream past it is refused (REFUSED_STREAM). */
  maxConcurrentStreams: number;
  /** SETTINGS_MAX_HEADER_LIST_SIZE: a request whose headers decode to more is reset (ENHANCE_YOUR_CALM). */
  maxHeaderListBytes: number;
}

/** What the connection tells about one stream. Each runs synchronously, at most once per event except data. */
export interface StreamListener {
  /** A DATA frame's payload, padding removed: a view into the socket's read, which the next read overwrites, so copy what is kept. */
  onData(chunk: Buffer): void;
  /** The client's END_STREAM. */
  onEnd(): void;
  /** The stream is closed: both sides ended, reset by either side, or the connection is gone. */
  onClose(): void;
}

export interface ConnectionEvents {
  /**
   * A new stream's request headers: name, value, name, value, … (valid only
   * during the call). Returns how its frames are heard; undefined when the
   * stream was answered (and ended or reset) on the spot. A listener returned
   * for a stream that closed meanwhile hears onClose at once.
   */
  stream(stream: ServerStream, headers: readonly string[]): StreamListener | undefined;
  /** The connection is gone (socket closed); every stream has been closed first. */
  closed(connection: Http2Connection): void;
  /**
   * A protocol error or a socket error (the peer's doing: worth a debug line), or, `internal`, an exception of
   * this side's own code while it read a frame (a bug: the connection is closed INTERNAL_ERROR).
   */
  error(error: Error, internal?: boolean): void;
  /** The connection overran one of its attack budgets (attack-budgets.ts): GOAWAY(ENHANCE_YOUR_CALM) is sent, and it closes. */
  calmed?(budget: AttackBudget): void;
}

/** The windows this side grants: large, so a 4 MiB message needs no round trip per 64 KiB. */
const STREAM_RECEIVE_WINDOW = 1 << 20;
const CONNECTION_RECEIVE_WINDOW = 16 << 20;
/** A header block's compressed bytes may not exceed this many times the header list limit (HPACK is never that dense here). */
const HEADER_BLOCK_LIMIT_FACTOR = 4;
/** CONTINUATION frames per header block: a flood of tiny ones is an attack (CVE-2024-27316 and kin). */
const MAX_CONTINUATIONS = 64;
/** Staging for one turn's output; a staging buffer grown past this is dropped after its flush. */
const STAGING_BYTES = 16 * 1024;
const MAX_KEPT_STAGING_BYTES = 1 << 20;
/** Written but not yet taken by the kernel: past this, the connection stops reading until the peer catches up. */
const MAX_UNSENT_BYTES = 1 << 20;
/** How long an ended socket waits for the peer to close its side before it is destroyed. */
const LINGER_MS = 1000;
/**
 * How many of the client's latest streams (odd ids) the closed-stream record covers; a power of two, as it is indexed
 * by id. The record only decides between dropping a frame on a closed stream (always safe: what the RFC asks for
 * frames in flight after this side's reset) and the error the RFC asks for a frame the client sent after it closed the
 * stream itself, or on a stream it skipped. A stream older than the window is forgotten and its frames dropped (§5.1
 * lets an endpoint limit how long it remembers), so the bound costs only the error answer to a broken client's late
 * frame, never a well-behaved client's call. 512 is more streams than a connection opens in a round trip short of
 * 500 new calls per round trip, for 2.5 KiB per connection (its output staging alone is 16 KiB), allocated at its
 * first closed stream.
 */
const CLOSED_RECORD_STREAMS = 512;
/** How a recently closed stream closed (the record's entries), and what a lookup may answer besides. */
const CLOSED_BY_THIS_SIDE = 1; // reset by this side (an early answer included), or never served: frames in flight are dropped
const CLOSED_BY_CLIENT_RESET = 2;
const CLOSED_BY_BOTH_ENDS = 3;
const NEVER_OPENED = 4; // skipped by the client: closed by its first use of a higher id (§5.1.1)
const FORGOTTEN = 5;
/** ServerStream.contentLengthLeft of a request without content-length (and checkRequestFields' answer for one). */
const NO_CONTENT_LENGTH = -1;
/** checkRequestFields' answer for a malformed request. */
const MALFORMED_REQUEST = -2;
/**
 * A connection told ENHANCE_YOUR_CALM keeps its streams in flight this long, so that their Checks finish (Envoy's
 * ext_authz timeout is 250 ms), then it is destroyed whatever is left.
 */
const CALM_GRACE_MS = 1000;

const EMPTY = Buffer.alloc(0);
const NO_LISTENER: StreamListener = { onData() {}, onEnd() {}, onClose() {} };

class ConnectionError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

/** One request stream, as the gRPC layer answers it. Writes after the stream closed are ignored. */
export class ServerStream {
  listener: StreamListener = NO_LISTENER;
  /** The client's END_STREAM arrived. */
  remoteEnded = false;
  /** This side's END_STREAM is written or queued. */
  localEnded = false;
  /** No frame may be sent on it any more. */
  closed = false;
  /** This side sent RST_STREAM: the client's frames still in flight are dropped (§5.1). */
  private resetSent = false;
  private resetByClient = false;
  /** The request's content-length less the DATA payload received so far, or NO_CONTENT_LENGTH. */
  contentLengthLeft = NO_CONTENT_LENGTH;
  sendWindow: number;
  receiveWindow = STREAM_RECEIVE_WINDOW;
  private receivedUnacked = 0;
  /** DATA waiting for flow-control window, then the trailers' block. */
  private queued: Buffer[] | undefined;
  private queuedTrailers: Buffer | undefined;

  constructor(
    readonly connection: Http2Connection,
    readonly id: number,
  ) {
    this.sendWindow = connection.peerInitialWindow;
  }

  /** HEADERS with this block, the stream left open (a streaming answer's first). */
  sendHeaders(block: Buffer): void {
    if (this.closed || this.localEnded) return;
    this.connection.writeHeaders(this.id, block, false);
  }

  /** DATA (length-prefixed gRPC messages), in window-sized frames; what the windows hold back waits for WINDOW_UPDATE. */
  sendData(data: Buffer): void {
    if (this.closed || this.localEnded) return;
    if (this.queued) {
      this.queued.push(data);
      return;
    }
    const sent = this.connection.writeData(this, data, 0);
    if (sent < data.length) {
      this.queued = [data.subarray(sent)];
      this.connection.blocked(this);
    }
  }

  /** HEADERS with END_STREAM after whatever DATA was sent or is waiting: trailers, or Trailers-Only. */
  sendTrailers(block: Buffer): void {
    if (this.closed || this.localEnded) return;
    this.localEnded = true;
    if (this.queued) {
      this.queuedTrailers = block;
      return;
    }
    this.connection.writeHeaders(this.id, block, true);
    this.closeAfterTrailers();
  }

  /** The common unary answer: HEADERS, one DATA, trailers, in one go when the windows allow. */
  respond(headers: Buffer, data: Buffer, trailers: Buffer): void {
    this.sendHeaders(headers);
    this.sendData(data);
    this.sendTrailers(trailers);
  }

  /** RST_STREAM: the stream ends at once; anything waiting to be sent is dropped. */
  reset(code: number): void {
    if (this.closed) return;
    this.connection.writeReset(this.id, code);
    this.resetSent = true;
    this.close();
  }

  /** The client's RST_STREAM. */
  closeOnClientReset(): void {
    this.resetByClient = true;
    this.close();
  }

  /** How it closed, for the connection's closed-stream record. */
  get closedBy(): number {
    if (this.resetByClient) return CLOSED_BY_CLIENT_RESET;
    return !this.resetSent && this.remoteEnded && this.localEnded ? CLOSED_BY_BOTH_ENDS : CLOSED_BY_THIS_SIDE;
  }

  /** Sends what the windows now allow; true when nothing is left waiting. */
  resume(): boolean {
    const queued = this.queued;
    if (!queued || this.closed) return true;
    while (queued.length > 0) {
      const head = queued[0]!;
      const sent = this.connection.writeData(this, head, 0);
      if (sent < head.length) {
        queued[0] = head.subarray(sent);
        return false;
      }
      queued.shift();
    }
    this.queued = undefined;
    const trailers = this.queuedTrailers;
    if (trailers) {
      this.queuedTrailers = undefined;
      this.connection.writeHeaders(this.id, trailers, true);
      this.closeAfterTrailers();
    }
    return true;
  }

  /** Accounts a DATA frame against this stream's window; false when the client sent more than it was granted. */
  received(bytes: number): boolean {
    this.receiveWindow -= bytes;
    if (this.receiveWindow < 0) return false;
    this.receivedUnacked += bytes;
    // Consumed at once, so granted back once half the window is used (not for a stream about to end).
    if (this.receivedUnacked >= STREAM_RECEIVE_WINDOW / 2 && !this.remoteEnded) {
      this.connection.writeWindowUpdate(this.id, this.receivedUnacked);
      this.receiveWindow += this.receivedUnacked;
      this.receivedUnacked = 0;
    }
    return true;
  }

  /**
   * The answer is complete. Before the client's END_STREAM, RST_STREAM(NO_ERROR) follows the trailers
   * (PROTOCOL-HTTP2.md, "Early Server Closure"; RFC 9113 §8.1): the rest of the request is not wanted, and the
   * stream would otherwise stay open, and count against SETTINGS_MAX_CONCURRENT_STREAMS, until the client ends it.
   */
  private closeAfterTrailers(): void {
    if (!this.remoteEnded) {
      this.connection.writeReset(this.id, ErrorCode.NO_ERROR);
      this.resetSent = true;
    }
    this.close();
  }

  closeIfDone(): void {
    if (this.localEnded && this.remoteEnded && !this.queued) this.close();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.queued = undefined;
    this.queuedTrailers = undefined;
    this.connection.streamClosed(this);
    const listener = this.listener;
    this.listener = NO_LISTENER;
    listener.onClose();
  }
}

const AWAITING_PREFACE = 0;
const AWAITING_SETTINGS = 1;
const OPEN = 2;
const GONE = 3;

export class Http2Connection {
  /** The client's SETTINGS_INITIAL_WINDOW_SIZE: each new stream's send window. */
  peerInitialWindow = DEFAULT_WINDOW_BYTES;
  private peerMaxFrameBytes = DEFAULT_MAX_FRAME_BYTES;
  private sendWindow = DEFAULT_WINDOW_BYTES;
  private receiveWindow = CONNECTION_RECEIVE_WINDOW;
  private receivedUnacked = 0;
  private state = AWAITING_PREFACE;
  private readonly decoder = new HpackDecoder();
  private readonly headerFields: string[] = [];
  private readonly streams = new Map<number, ServerStream>();
  private blockedStreams: Set<ServerStream> | undefined;
  private lastStreamId = 0;
  /**
   * How the client's latest closed streams closed, indexed by stream id modulo the window: ids[slot] is the stream the
   * slot describes, how[slot] one of the CLOSED_BY_ values. An id in the window whose slot names another stream was
   * never opened (every stream opened in the window is written on its close, and only an older id shares its slot).
   */
  private closedRecord: { ids: Int32Array; how: Uint8Array } | undefined;
  /** GOAWAY sent: streams above this id are not served. */
  private goawayLastStreamId = -1;
  /** No new streams: this side closes once the open ones end (close(), or the client's GOAWAY). */
  private closing = false;
  private finalGoawaySent = false;
  /**
   * Bytes of a frame (or the preface) cut by the socket's reads, each piece
   * copied, until `pendingNeed` bytes are in: a peer trickling a frame a byte
   * at a time costs two copies of it (the pieces, then the frame), not one
   * per byte.
   */
  private pendingParts: Buffer[] | undefined;
  private pendingBytes = 0;
  private pendingNeed = 0;
  /** Reading stopped until the peer takes what is written (it reads its answers slower than it sends requests). */
  private readPaused = false;
  /** What is left of a read past this turn's share (MAX_FRAMES_PER_TURN, MAX_BYTES_PER_TURN); the socket is paused meanwhile. */
  private backlog: Buffer | undefined;
  /** Requests ended by the read being handled, started once its frames are all handled (process). */
  private readonly endedInRead: ServerStream[] = [];
  private backlogScheduled = false;
  /** The peer ended its side while a backlog waited: the connection ends once it is read. */
  private endAfterBacklog = false;
  private readonly continueBacklog = (): void => this.readBacklog();
  private readonly budgets = new AttackBudgets();
  /** GOAWAY(ENHANCE_YOUR_CALM) sent for an overrun budget. */
  private calmed = false;
  /** Told to calm down with nothing more to read for the calls in flight: the rest of its flood is never read. */
  private readStopped = false;
  /** A header block arriving in CONTINUATION frames. */
  private continuation: { streamId: number; endStream: boolean; bytes: number; frames: number } | undefined;
  /**
   * Where a header block in CONTINUATION frames is put together, kept for the connection's next one (at most the
   * block limit, 4 × MAX_HEADER_LIST_SIZE): a buffer per frame and one more per block made a flood of such blocks a
   * flood of external memory, whose mark-compacts held every connection's Checks.
   */
  private continuationBlock: Buffer | undefined;
  private tableSizeChanged = false;
  /** PINGs sent and not yet ACKed: each told true on its ACK, false when the connection goes first. */
  private pings: Map<bigint, (ok: boolean) => void> | undefined;
  private pingCounter = 0n;
  private staging = Buffer.allocUnsafe(STAGING_BYTES);
  private staged = 0;
  private flushScheduled = false;
  private readonly flushNow = (): void => this.flush();

  constructor(
    private readonly socket: net.Socket,
    private readonly settings: ConnectionSettings,
    private readonly events: ConnectionEvents,
  ) {
    // Sockets that read into the shared buffer (accepted-socket.ts) emit no 'data': their owner calls receive().
    socket.on('data', (chunk: Buffer) => this.receive(chunk));
    socket.on('error', (error) => {
      this.events.error(error);
      this.destroy();
    });
    socket.on('end', () => {
      if (this.backlog) this.endAfterBacklog = true;
      else this.destroy();
    });
    socket.on('close', () => this.destroy());
    this.writeSettings();
    // The connection window starts at 65,535 whatever SETTINGS say; only WINDOW_UPDATE raises it.
    this.writeWindowUpdate(0, CONNECTION_RECEIVE_WINDOW - DEFAULT_WINDOW_BYTES);
  }

  get destroyed(): boolean {
    return this.state === GONE;
  }

  /**
   * GOAWAY with NO_ERROR or an error code. lastStreamId 2^31 − 1 tells the
   * client a drain is coming while every stream it may have sent is still
   * served (the first GOAWAY of a graceful drain, RFC 9113 §6.8).
   */
  goaway(code: number, lastStreamId: number, debugData: Buffer = EMPTY): void {
    if (this.state === GONE) return;
    // §6.8: never above an earlier GOAWAY's, whose streams above it the client has retried elsewhere (and
    // lastStreamId has counted the ones that crossed it, unserved).
    if (this.goawayLastStreamId >= 0 && lastStreamId > this.goawayLastStreamId) lastStreamId = this.goawayLastStreamId;
    this.goawayLastStreamId = lastStreamId;
    const payload = Buffer.allocUnsafe(8 + debugData.length);
    payload.writeUInt32BE(lastStreamId & 0x7fffffff, 0);
    payload.writeUInt32BE(code, 4);
    debugData.copy(payload, 8);
    this.writeFrame(FrameType.GOAWAY, 0, 0, payload);
  }

  /** Graceful close: GOAWAY naming the last stream taken; the socket ends once the streams are done. */
  close(): void {
    if (this.state === GONE) return;
    if (!this.finalGoawaySent) {
      this.finalGoawaySent = true;
      this.goaway(ErrorCode.NO_ERROR, this.lastStreamId);
    }
    this.closing = true;
    this.endIfIdle();
  }

  /** Ends everything now: every open stream closes (its listener hears it), the socket is destroyed. */
  destroy(): void {
    this.terminate(false);
  }

  /**
   * `flushFirst`: what is staged (a GOAWAY) is written and the socket ended,
   * then destroyed if the peer has not closed it within a second.
   */
  private terminate(flushFirst: boolean): void {
    if (this.state === GONE) {
      if (!flushFirst && !this.socket.destroyed) this.socket.destroy();
      return;
    }
    this.state = GONE;
    this.continuation = undefined;
    this.pendingParts = undefined;
    this.backlog = undefined;
    for (const stream of [...this.streams.values()]) stream.close();
    this.failPings();
    if (flushFirst && !this.socket.destroyed) {
      if (this.staged > 0) this.flush();
      this.socket.end();
      // Reading again (what comes is dropped: the connection is gone) sees the peer's FIN, which ends the socket now
      // rather than at LINGER_MS: a socket that reads into the shared buffer (accepted-socket.ts) stops reading as
      // soon as it is paused.
      this.socket.resume();
      setTimeout(() => this.socket.destroy(), LINGER_MS).unref();
    } else {
      this.staged = 0;
      this.socket.destroy();
    }
    this.events.closed(this);
  }

  /**
   * PING; `acked` runs with true on its ACK, with false if the connection goes first.
   * Returns false (and never calls back) when the connection is already gone.
   */
  ping(acked: (ok: boolean) => void): boolean {
    if (this.state === GONE) return false;
    this.pingCounter += 1n;
    const id = this.pingCounter;
    const payload = Buffer.allocUnsafe(8);
    payload.writeBigUInt64BE(id, 0);
    (this.pings ??= new Map()).set(id, acked);
    this.writeFrame(FrameType.PING, 0, 0, payload);
    return true;
  }

  // ---- reading ----

  /**
   * Bytes read from the socket, valid only during the call: the sockets the gRPC server accepted all read into one
   * buffer (accepted-socket.ts). Anything kept past the call is copied.
   */
  receive(chunk: Buffer): void {
    if (this.state === GONE || this.readStopped) return;
    if (this.backlog) {
      // A read already in the stream's hands when it was paused: it queues behind the backlog.
      this.backlog = Buffer.concat([this.backlog, chunk]);
      return;
    }
    let data = chunk;
    this.budgets.tick(performance.now());
    // Only the frame the last read cut is put together; the rest of this read is handled where it lies. Joining the
    // whole read to the cut piece copied every read, and the piece kept its own read's buffer alive until the next.
    while (this.pendingParts) {
      const missing = this.pendingNeed - this.pendingBytes;
      if (data.length < missing) {
        this.pendingParts.push(Buffer.from(data));
        this.pendingBytes += data.length;
        return;
      }
      this.pendingParts.push(data.subarray(0, missing));
      const joined = Buffer.concat(this.pendingParts, this.pendingNeed);
      this.pendingParts = undefined;
      data = data.subarray(missing);
      // The joined piece may complete only a frame's header; processing it then keeps the frame pending again.
      this.process(joined);
      if (this.state === GONE || this.readStopped) return;
      // One frame is within a turn's budget, so no backlog comes of it today; if one did, the rest must queue behind it.
      if (this.backlog) {
        if (data.length > 0) this.backlog = Buffer.concat([this.backlog, data]);
        return;
      }
    }
    if (data.length > 0) this.process(data);
  }

  /** The backlog's turn: this turn's share of it, the rest left for the next; reading resumes once it is all read. */
  private readBacklog(): void {
    this.backlogScheduled = false;
    const data = this.backlog;
    // Paused for writes meanwhile: the drain schedules this again.
    if (!data || this.state === GONE || this.readPaused || this.readStopped) return;
    this.backlog = undefined;
    this.process(data);
    if (this.state === GONE || this.backlog) return;
    if (this.endAfterBacklog) this.destroy();
    else if (!this.readPaused) this.socket.resume();
  }

  private scheduleBacklog(): void {
    if (this.backlogScheduled) return;
    this.backlogScheduled = true;
    setImmediate(this.continueBacklog);
  }

  /**
   * The frames of one read (or of this turn's share of it), then the requests they ended: a stream that the same read
   * also resets (a rapid reset, CVE-2023-44487) is closed by then and never starts its Check, which is the work such
   * a flood would otherwise buy for the price of three frames.
   */
  private process(data: Buffer): void {
    try {
      this.processFrames(data);
    } finally {
      this.startEndedRequests();
    }
  }

  private startEndedRequests(): void {
    const ended = this.endedInRead;
    for (let i = 0; i < ended.length; i += 1) {
      const stream = ended[i]!;
      if (stream.closed) continue;
      stream.listener.onEnd();
      stream.closeIfDone();
    }
    ended.length = 0;
  }

  private processFrames(data: Buffer): void {
    let offset = 0;
    try {
      if (this.state === AWAITING_PREFACE) {
        const have = Math.min(data.length, CLIENT_PREFACE.length);
        if (data.compare(CLIENT_PREFACE, 0, have, 0, have) !== 0) {
          // Not HTTP/2 (an HTTP/1.1 request, or garbage): nothing to answer in a language it speaks.
          this.destroy();
          return;
        }
        if (have < CLIENT_PREFACE.length) {
          this.keepPending(data, CLIENT_PREFACE.length);
          return;
        }
        offset = CLIENT_PREFACE.length;
        this.state = AWAITING_SETTINGS;
      }
      const turnEnd = offset + MAX_BYTES_PER_TURN;
      let frames = 0;
      while (this.state !== GONE && !this.readStopped) {
        const available = data.length - offset;
        if (available < FRAME_HEADER_BYTES) break;
        if (frames === MAX_FRAMES_PER_TURN || offset >= turnEnd) {
          // This turn's share is used: the rest waits for the other connections' reads.
          // A copy: the read's bytes are overwritten by the next read.
          this.backlog = Buffer.from(data.subarray(offset));
          this.socket.pause();
          this.scheduleBacklog();
          return;
        }
        frames += 1;
        const length = (data[offset]! << 16) | (data[offset + 1]! << 8) | data[offset + 2]!;
        if (length > DEFAULT_MAX_FRAME_BYTES) {
          // This side never raises SETTINGS_MAX_FRAME_SIZE from its default.
          throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, `frame of ${length} bytes`);
        }
        if (available < FRAME_HEADER_BYTES + length) break;
        const type = data[offset + 3]!;
        const flags = data[offset + 4]!;
        const streamId = data.readUInt32BE(offset + 5) & 0x7fffffff;
        const start = offset + FRAME_HEADER_BYTES;
        offset = start + length;
        this.onFrame(type, flags, streamId, data, start, offset);
      }
    } catch (error) {
      this.connectionError(error);
      return;
    }
    if (this.state === GONE || this.readStopped || offset === data.length) return;
    const rest = data.subarray(offset);
    this.keepPending(
      rest,
      rest.length < FRAME_HEADER_BYTES ? FRAME_HEADER_BYTES : FRAME_HEADER_BYTES + ((rest[0]! << 16) | (rest[1]! << 8) | rest[2]!),
    );
  }

  private keepPending(bytes: Buffer, need: number): void {
    // A copy: a view would keep the whole read's buffer (64 KiB) alive until the next read, long enough under load to
    // be promoted and freed only by a mark-compact.
    this.pendingParts = [Buffer.from(bytes)];
    this.pendingBytes = bytes.length;
    this.pendingNeed = need;
  }

  private onFrame(type: number, flags: number, streamId: number, data: Buffer, start: number, end: number): void {
    if (this.continuation && type !== FrameType.CONTINUATION) {
      throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'a header block was interrupted by another frame');
    }
    if (this.state === AWAITING_SETTINGS && (type !== FrameType.SETTINGS || (flags & Flag.ACK) !== 0)) {
      throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'the connection preface must end with SETTINGS');
    }
    switch (type) {
      case FrameType.DATA:
        this.onData(flags, streamId, data, start, end);
        return;
      case FrameType.HEADERS:
        this.onHeaders(flags, streamId, data, start, end);
        return;
      case FrameType.CONTINUATION:
        this.onContinuation(flags, streamId, data, start, end);
        return;
      case FrameType.PRIORITY:
        if (streamId === 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'PRIORITY on stream 0');
        if (end - start !== 5) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'PRIORITY is 5 bytes');
        checkDependency(streamId, data, start);
        return;
      case FrameType.RST_STREAM:
        this.onReset(streamId, start, end);
        return;
      case FrameType.SETTINGS:
        this.onSettings(flags, streamId, data, start, end);
        return;
      case FrameType.PUSH_PROMISE:
        throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'a client sent PUSH_PROMISE');
      case FrameType.PING:
        this.onPing(flags, streamId, data, start, end);
        return;
      case FrameType.GOAWAY:
        if (streamId !== 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'GOAWAY on a stream');
        if (end - start < 8) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'GOAWAY of less than 8 bytes');
        // The client opens no more streams; the ones open finish, then the connection ends.
        this.closing = true;
        this.endIfIdle();
        return;
      case FrameType.WINDOW_UPDATE:
        this.onWindowUpdate(streamId, data, start, end);
        return;
      default:
      // RFC 9113 §4.1: frames of unknown types are ignored.
    }
  }

  private onData(flags: number, streamId: number, data: Buffer, start: number, end: number): void {
    if (streamId === 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'DATA on stream 0');
    const frameBytes = end - start;
    // Flow control counts the whole payload, padding included, even for a stream already gone.
    this.receiveWindow -= frameBytes;
    if (this.receiveWindow < 0) throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, 'DATA beyond the connection window');
    this.receivedUnacked += frameBytes;
    if (this.receivedUnacked >= CONNECTION_RECEIVE_WINDOW / 2) {
      this.writeWindowUpdate(0, this.receivedUnacked);
      this.receiveWindow += this.receivedUnacked;
      this.receivedUnacked = 0;
    }
    let payloadEnd = end;
    let payloadStart = start;
    if (flags & Flag.PADDED) {
      if (frameBytes < 1) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'PADDED DATA without its pad length');
      const pad = data[start]!;
      payloadStart = start + 1;
      payloadEnd = end - pad;
      if (payloadEnd < payloadStart) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'DATA padding longer than the frame');
    }
    if (payloadEnd === payloadStart && (flags & Flag.END_STREAM) === 0) this.countEmptyFrame();
    const stream = this.streams.get(streamId);
    if (!stream) {
      if (this.isIdle(streamId)) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `DATA on idle stream ${streamId}`);
      // §6.1: DATA on a closed stream is a stream error, unless this side closed it first (frames in flight).
      const how = this.closedHow(streamId);
      if (how !== CLOSED_BY_THIS_SIDE && how !== FORGOTTEN) this.refuseForFault(streamId, ErrorCode.STREAM_CLOSED);
      return;
    }
    if (stream.remoteEnded) {
      this.resetForFault(stream, ErrorCode.STREAM_CLOSED);
      return;
    }
    if (!stream.received(frameBytes)) {
      this.resetForFault(stream, ErrorCode.FLOW_CONTROL_ERROR);
      return;
    }
    const endStream = (flags & Flag.END_STREAM) !== 0;
    const contentLengthLeft = stream.contentLengthLeft;
    if (contentLengthLeft !== NO_CONTENT_LENGTH) {
      // §8.1.1: a body longer or shorter than its content-length makes the request malformed.
      const payloadBytes = payloadEnd - payloadStart;
      if (payloadBytes > contentLengthLeft || (endStream && payloadBytes < contentLengthLeft)) {
        this.resetForFault(stream, ErrorCode.PROTOCOL_ERROR);
        return;
      }
      stream.contentLengthLeft = contentLengthLeft - payloadBytes;
    }
    if (endStream) stream.remoteEnded = true;
    if (payloadEnd > payloadStart) stream.listener.onData(data.subarray(payloadStart, payloadEnd));
    if (endStream && !stream.closed) this.endedInRead.push(stream);
  }

  private onHeaders(flags: number, streamId: number, data: Buffer, start: number, end: number): void {
    if (streamId === 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'HEADERS on stream 0');
    let blockStart = start;
    let blockEnd = end;
    if (flags & Flag.PADDED) {
      if (end - start < 1) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'PADDED HEADERS without its pad length');
      blockEnd = end - data[start]!;
      blockStart += 1;
    }
    if (flags & Flag.PRIORITY) {
      if (blockStart + 5 <= blockEnd) checkDependency(streamId, data, blockStart);
      blockStart += 5;
    }
    if (blockEnd < blockStart) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'HEADERS padding longer than the frame');
    const endStream = (flags & Flag.END_STREAM) !== 0;
    if (flags & Flag.END_HEADERS) {
      this.onHeaderBlock(streamId, endStream, data, blockStart, blockEnd);
      return;
    }
    if (blockEnd === blockStart) this.countEmptyFrame();
    this.checkBlockSize(blockEnd - blockStart);
    this.continuation = { streamId, endStream, bytes: 0, frames: 0 };
    this.appendToBlock(this.continuation, data, blockStart, blockEnd);
  }

  private appendToBlock(continuation: { bytes: number }, data: Buffer, start: number, end: number): void {
    const bytes = continuation.bytes + (end - start);
    let block = this.continuationBlock;
    if (block === undefined || block.length < bytes) {
      const grown = Buffer.allocUnsafe(
        Math.min(Math.max(bytes, (block?.length ?? 0) * 2, 4096), this.settings.maxHeaderListBytes * HEADER_BLOCK_LIMIT_FACTOR),
      );
      if (block !== undefined) block.copy(grown, 0, 0, continuation.bytes);
      this.continuationBlock = block = grown;
    }
    data.copy(block, continuation.bytes, start, end);
    continuation.bytes = bytes;
  }

  private onContinuation(flags: number, streamId: number, data: Buffer, start: number, end: number): void {
    const continuation = this.continuation;
    if (!continuation || continuation.streamId !== streamId) {
      throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'CONTINUATION without the HEADERS it continues');
    }
    continuation.frames += 1;
    if (continuation.frames > MAX_CONTINUATIONS) {
      throw new ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, `more than ${MAX_CONTINUATIONS} CONTINUATION frames`);
    }
    this.checkBlockSize(continuation.bytes + (end - start));
    this.appendToBlock(continuation, data, start, end);
    if ((flags & Flag.END_HEADERS) === 0) {
      if (end === start) this.countEmptyFrame();
      return;
    }
    this.continuation = undefined;
    // The decoder keeps strings, never the buffer, so the block's buffer serves the next block.
    this.onHeaderBlock(streamId, continuation.endStream, this.continuationBlock!, 0, continuation.bytes);
  }

  private checkBlockSize(bytes: number): void {
    if (bytes > this.settings.maxHeaderListBytes * HEADER_BLOCK_LIMIT_FACTOR) {
      throw new ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, `a header block of more than ${bytes} bytes`);
    }
  }

  private onHeaderBlock(streamId: number, endStream: boolean, block: Buffer, start: number, end: number): void {
    const fields = this.headerFields;
    fields.length = 0;
    let listBytes: number;
    try {
      // Every block is decoded, even one for a stream that is refused: the table is shared by the connection.
      listBytes = this.decoder.decode(block, start, end, fields, this.settings.maxHeaderListBytes, true);
    } catch (error) {
      if (error instanceof HpackError) throw new ConnectionError(ErrorCode.COMPRESSION_ERROR, error.message);
      throw error;
    }
    const existing = this.streams.get(streamId);
    if (existing) {
      // Trailers: the request's last HEADERS, which must end the stream. gRPC requests have none to read.
      if (existing.remoteEnded) {
        this.resetForFault(existing, ErrorCode.STREAM_CLOSED);
        return;
      }
      // §8.1.1: trailers ending a body shorter than its content-length make the request malformed.
      if (!endStream || this.decoder.hasInvalidField || hasPseudoHeader(fields) || existing.contentLengthLeft > 0) {
        this.resetForFault(existing, ErrorCode.PROTOCOL_ERROR);
        return;
      }
      existing.remoteEnded = true;
      this.endedInRead.push(existing);
      return;
    }
    if (streamId % 2 === 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `HEADERS on server stream ${streamId}`);
    if (streamId <= this.lastStreamId) {
      this.onHeadersOnClosedStream(streamId);
      return;
    }
    this.lastStreamId = streamId;
    this.budgets.streamOpened();
    if ((this.goawayLastStreamId >= 0 && streamId > this.goawayLastStreamId) || this.closing) {
      // Past our GOAWAY (§6.8), or after the client's: not served, and its frames in flight are dropped.
      this.rememberClosed(streamId, CLOSED_BY_THIS_SIDE);
      return;
    }
    if (listBytes > this.settings.maxHeaderListBytes) {
      // As nghttp2 answers it: the stream, not the connection.
      this.refuseForFault(streamId, ErrorCode.ENHANCE_YOUR_CALM, headerBlockWeight(start, end));
      return;
    }
    if (this.streams.size >= this.settings.maxConcurrentStreams) {
      this.refuseForFault(streamId, ErrorCode.REFUSED_STREAM);
      return;
    }
    const contentLength = this.decoder.hasInvalidField ? MALFORMED_REQUEST : checkRequestFields(fields);
    // §8.1.1: a request that ends with its headers has no body, whatever its content-length says.
    if (contentLength === MALFORMED_REQUEST || (endStream && contentLength > 0)) {
      this.refuseForFault(streamId, ErrorCode.PROTOCOL_ERROR, headerBlockWeight(start, end));
      return;
    }
    const stream = new ServerStream(this, streamId);
    stream.contentLengthLeft = contentLength;
    this.streams.set(streamId, stream);
    if (endStream) stream.remoteEnded = true;
    const listener = this.events.stream(stream, fields);
    if (stream.closed) {
      // Closed while it was set up (a call refused or ended at once): the close went to no listener yet, and the
      // listener may hold something the close releases (the gRPC layer's count of open calls).
      listener?.onClose();
      return;
    }
    if (listener) stream.listener = listener;
    if (endStream) this.endedInRead.push(stream);
  }

  private onReset(streamId: number, start: number, end: number): void {
    if (streamId === 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'RST_STREAM on stream 0');
    if (end - start !== 4) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'RST_STREAM is 4 bytes');
    if (this.isIdle(streamId)) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `RST_STREAM on idle stream ${streamId}`);
    this.streams.get(streamId)?.closeOnClientReset();
    if (!this.budgets.clientReset()) this.calm('client_resets');
  }

  /** HEADERS on a stream id the client has used or skipped (the block is decoded: the HPACK table is the connection's). */
  private onHeadersOnClosedStream(streamId: number): void {
    switch (this.closedHow(streamId)) {
      case NEVER_OPENED:
        // §5.1.1: a new stream's id must be above every id the client used before.
        throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `HEADERS on stream ${streamId}, below the last opened ${this.lastStreamId}`);
      case CLOSED_BY_BOTH_ENDS:
        // §5.1: frames after the client's own END_STREAM on a closed stream are a connection error STREAM_CLOSED.
        throw new ConnectionError(ErrorCode.STREAM_CLOSED, `HEADERS on stream ${streamId}, closed`);
      case CLOSED_BY_CLIENT_RESET:
        // §5.1: after the client's RST_STREAM, a stream error STREAM_CLOSED.
        this.refuseForFault(streamId, ErrorCode.STREAM_CLOSED);
        return;
      default:
      // Reset by this side, or forgotten: the client's frames in flight are dropped (§5.1).
    }
  }

  /** RST_STREAM for a stream not (or no longer) open; the client's frames still in flight on it are then dropped. */
  private refuse(streamId: number, code: number): void {
    this.writeReset(streamId, code);
    this.rememberClosed(streamId, CLOSED_BY_THIS_SIDE);
  }

  private rememberClosed(streamId: number, how: number): void {
    if (streamId <= this.lastStreamId - 2 * CLOSED_RECORD_STREAMS) return;
    const record = (this.closedRecord ??= { ids: new Int32Array(CLOSED_RECORD_STREAMS), how: new Uint8Array(CLOSED_RECORD_STREAMS) });
    const slot = (streamId >>> 1) & (CLOSED_RECORD_STREAMS - 1);
    record.ids[slot] = streamId;
    record.how[slot] = how;
  }

  /** How a client stream id at or below lastStreamId, and not open, came to be closed. */
  private closedHow(streamId: number): number {
    if (streamId <= this.lastStreamId - 2 * CLOSED_RECORD_STREAMS) return FORGOTTEN;
    const slot = (streamId >>> 1) & (CLOSED_RECORD_STREAMS - 1);
    const record = this.closedRecord;
    if (record === undefined || record.ids[slot] !== streamId) return NEVER_OPENED;
    return record.how[slot]!;
  }

  /** A stream refused before it opened, for the client's fault: counted against local_resets. */
  private refuseForFault(streamId: number, code: number, weight = 1): void {
    this.refuse(streamId, code);
    if (!this.budgets.localReset(weight)) this.calm('local_resets');
  }

  /** An open stream reset for the client's fault: counted against local_resets. */
  private resetForFault(stream: ServerStream, code: number): void {
    stream.reset(code);
    if (!this.budgets.localReset()) this.calm('local_resets');
  }

  private countEmptyFrame(): void {
    if (!this.budgets.emptyFrame()) this.calm('empty_frames');
  }

  private countControlFrame(): void {
    if (!this.budgets.controlFrame()) this.calm('control_frames');
  }

  /**
   * A budget overrun: GOAWAY(ENHANCE_YOUR_CALM) naming the last stream taken, whose calls in flight may finish
   * within CALM_GRACE_MS; no new stream is served.
   */
  private calm(budget: AttackBudget): void {
    if (this.calmed || this.state === GONE) return;
    this.calmed = true;
    this.events.calmed?.(budget);
    this.finalGoawaySent = true;
    this.goaway(ErrorCode.ENHANCE_YOUR_CALM, this.lastStreamId, Buffer.from(`${budget} budget exceeded`, 'latin1'));
    this.closing = true;
    setTimeout(() => this.destroy(), CALM_GRACE_MS).unref();
    this.endIfIdle();
    if (this.state === GONE) return;
    for (const stream of this.streams.values()) if (!stream.remoteEnded) return;
    // Every call in flight has its whole request (a Check's answer needs no WINDOW_UPDATE): the flood goes unread.
    this.readStopped = true;
    this.backlog = undefined;
    this.pendingParts = undefined;
    this.socket.pause();
  }

  private onSettings(flags: number, streamId: number, data: Buffer, start: number, end: number): void {
    if (streamId !== 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'SETTINGS on a stream');
    if (flags & Flag.ACK) {
      if (end !== start) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'SETTINGS ACK with a payload');
      return;
    }
    if ((end - start) % 6 !== 0) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'SETTINGS not a multiple of 6 bytes');
    if (this.state === AWAITING_SETTINGS) this.state = OPEN;
    this.countControlFrame();
    for (let at = start; at < end; at += 6) {
      const id = data.readUInt16BE(at);
      const value = data.readUInt32BE(at + 2);
      switch (id) {
        case Setting.HEADER_TABLE_SIZE:
          this.tableSizeChanged = true;
          break;
        case Setting.ENABLE_PUSH:
          if (value > 1) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `SETTINGS_ENABLE_PUSH ${value}`);
          break;
        case Setting.INITIAL_WINDOW_SIZE: {
          if (value > MAX_WINDOW_BYTES) throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, `SETTINGS_INITIAL_WINDOW_SIZE ${value}`);
          const delta = value - this.peerInitialWindow;
          this.peerInitialWindow = value;
          for (const stream of this.streams.values()) {
            stream.sendWindow += delta;
            if (stream.sendWindow > MAX_WINDOW_BYTES)
              throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, 'a stream window above 2^31 − 1');
          }
          if (delta > 0) this.resumeBlocked();
          break;
        }
        case Setting.MAX_FRAME_SIZE:
          if (value < DEFAULT_MAX_FRAME_BYTES || value > MAX_FRAME_BYTES_LIMIT) {
            throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `SETTINGS_MAX_FRAME_SIZE ${value}`);
          }
          this.peerMaxFrameBytes = value;
          break;
        default:
        // MAX_CONCURRENT_STREAMS and MAX_HEADER_LIST_SIZE bound what this side sends first (nothing) or
        // its response headers (small); unknown settings are ignored (§6.5.2).
      }
    }
    this.writeFrame(FrameType.SETTINGS, Flag.ACK, 0, EMPTY);
  }

  private onPing(flags: number, streamId: number, data: Buffer, start: number, end: number): void {
    if (streamId !== 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'PING on a stream');
    if (end - start !== 8) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'PING is 8 bytes');
    if ((flags & Flag.ACK) === 0) {
      this.countControlFrame();
      this.writeFrame(FrameType.PING, Flag.ACK, 0, data.subarray(start, end));
      return;
    }
    const id = data.readBigUInt64BE(start);
    const acked = this.pings?.get(id);
    if (!acked) return;
    this.pings!.delete(id);
    acked(true);
  }

  private onWindowUpdate(streamId: number, data: Buffer, start: number, end: number): void {
    if (end - start !== 4) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'WINDOW_UPDATE is 4 bytes');
    const increment = data.readUInt32BE(start) & 0x7fffffff;
    if (streamId === 0) {
      if (increment === 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, 'WINDOW_UPDATE of 0');
      this.sendWindow += increment;
      if (this.sendWindow > MAX_WINDOW_BYTES) throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, 'connection window above 2^31 − 1');
      this.resumeBlocked();
      return;
    }
    const stream = this.streams.get(streamId);
    if (!stream) {
      // Closed streams' updates are in flight after a reset, and dropped; an idle stream has none to send (§5.1).
      if (this.isIdle(streamId)) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `WINDOW_UPDATE on idle stream ${streamId}`);
      return;
    }
    if (increment === 0) {
      this.resetForFault(stream, ErrorCode.PROTOCOL_ERROR);
      return;
    }
    stream.sendWindow += increment;
    if (stream.sendWindow > MAX_WINDOW_BYTES) {
      this.resetForFault(stream, ErrorCode.FLOW_CONTROL_ERROR);
      return;
    }
    if (stream.resume()) this.blockedStreams?.delete(stream);
  }

  /** §5.1: a stream the client has not opened (above its last, or even: those would be this side's, which opens none). */
  private isIdle(streamId: number): boolean {
    return streamId > this.lastStreamId || (streamId & 1) === 0;
  }

  private connectionError(error: unknown): void {
    const code = error instanceof ConnectionError ? error.code : ErrorCode.INTERNAL_ERROR;
    // The header block budgets (its size, its CONTINUATION frames) end the connection at once.
    if (code === ErrorCode.ENHANCE_YOUR_CALM && !this.calmed) this.events.calmed?.('header_block');
    this.events.error(error instanceof Error ? error : new Error(String(error)), !(error instanceof ConnectionError));
    this.goaway(code, this.lastStreamId, Buffer.from(error instanceof Error ? error.message : 'internal error', 'latin1'));
    this.terminate(true);
  }

  // ---- writing ----

  /** Streams waiting for window, in the order they blocked. */
  blocked(stream: ServerStream): void {
    (this.blockedStreams ??= new Set()).add(stream);
  }

  private resumeBlocked(): void {
    const blocked = this.blockedStreams;
    if (!blocked) return;
    for (const stream of blocked) {
      if (!stream.resume()) {
        if (this.sendWindow <= 0) return;
        continue;
      }
      blocked.delete(stream);
    }
  }

  streamClosed(stream: ServerStream): void {
    this.streams.delete(stream.id);
    this.rememberClosed(stream.id, stream.closedBy);
    this.blockedStreams?.delete(stream);
    if (this.closing) this.endIfIdle();
  }

  /** Writes as much of data[from…] as the windows allow, in frames of the peer's size; returns the bytes written. */
  writeData(stream: ServerStream, data: Buffer, from: number): number {
    if (this.state === GONE) return 0;
    let offset = from;
    while (offset < data.length) {
      const allowed = Math.min(this.sendWindow, stream.sendWindow, this.peerMaxFrameBytes, data.length - offset);
      if (allowed <= 0) break;
      this.reserve(FRAME_HEADER_BYTES + allowed);
      writeFrameHeader(this.staging, this.staged, allowed, FrameType.DATA, 0, stream.id);
      data.copy(this.staging, this.staged + FRAME_HEADER_BYTES, offset, offset + allowed);
      this.staged += FRAME_HEADER_BYTES + allowed;
      this.sendWindow -= allowed;
      stream.sendWindow -= allowed;
      offset += allowed;
    }
    this.scheduleFlush();
    return offset - from;
  }

  /** A header block as HEADERS, and CONTINUATION frames when it is longer than the peer's frame size. */
  writeHeaders(streamId: number, block: Buffer, endStream: boolean): void {
    if (this.state === GONE) return;
    const prefix = this.tableSizeChanged ? 1 : 0;
    this.tableSizeChanged = false;
    const total = prefix + block.length;
    const maxFrame = this.peerMaxFrameBytes;
    this.reserve(total + FRAME_HEADER_BYTES * (1 + Math.floor(total / maxFrame)));
    let written = 0;
    let first = true;
    while (first || written < total) {
      const length = Math.min(maxFrame, total - written);
      const last = written + length === total;
      const type = first ? FrameType.HEADERS : FrameType.CONTINUATION;
      const flags = (last ? Flag.END_HEADERS : 0) | (first && endStream ? Flag.END_STREAM : 0);
      writeFrameHeader(this.staging, this.staged, length, type, flags, streamId);
      let at = this.staged + FRAME_HEADER_BYTES;
      let from = written;
      if (prefix && from === 0 && length > 0) {
        this.staging[at++] = TABLE_SIZE_UPDATE_ZERO;
        from = 1;
      }
      block.copy(this.staging, at, from - prefix, written + length - prefix);
      this.staged += FRAME_HEADER_BYTES + length;
      written += length;
      first = false;
    }
    this.scheduleFlush();
  }

  writeReset(streamId: number, code: number): void {
    const payload = Buffer.allocUnsafe(4);
    payload.writeUInt32BE(code, 0);
    this.writeFrame(FrameType.RST_STREAM, 0, streamId, payload);
  }

  writeWindowUpdate(streamId: number, increment: number): void {
    const payload = Buffer.allocUnsafe(4);
    payload.writeUInt32BE(increment, 0);
    this.writeFrame(FrameType.WINDOW_UPDATE, 0, streamId, payload);
  }

  private writeSettings(): void {
    const entries: [number, number][] = [
      [Setting.MAX_CONCURRENT_STREAMS, this.settings.maxConcurrentStreams],
      [Setting.INITIAL_WINDOW_SIZE, STREAM_RECEIVE_WINDOW],
      [Setting.MAX_HEADER_LIST_SIZE, this.settings.maxHeaderListBytes],
    ];
    const payload = Buffer.allocUnsafe(entries.length * 6);
    entries.forEach(([id, value], index) => {
      payload.writeUInt16BE(id, index * 6);
      payload.writeUInt32BE(value, index * 6 + 2);
    });
    this.writeFrame(FrameType.SETTINGS, 0, 0, payload);
  }

  private writeFrame(type: number, flags: number, streamId: number, payload: Buffer): void {
    if (this.state === GONE) return;
    this.reserve(FRAME_HEADER_BYTES + payload.length);
    writeFrameHeader(this.staging, this.staged, payload.length, type, flags, streamId);
    payload.copy(this.staging, this.staged + FRAME_HEADER_BYTES);
    this.staged += FRAME_HEADER_BYTES + payload.length;
    this.scheduleFlush();
  }

  private reserve(bytes: number): void {
    const needed = this.staged + bytes;
    if (needed <= this.staging.length) return;
    const grown = Buffer.allocUnsafe(Math.max(needed, this.staging.length * 2));
    this.staging.copy(grown, 0, 0, this.staged);
    this.staging = grown;
  }

  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    // After the current turn's microtasks: every answer settled by one Redis read leaves in one write.
    process.nextTick(this.flushNow);
  }

  private flush(): void {
    this.flushScheduled = false;
    const bytes = this.staged;
    if (bytes === 0 || this.socket.destroyed || this.socket.writableEnded) {
      this.staged = 0;
      return;
    }
    const staging = this.staging;
    this.staged = 0;
    const drained = this.socket.write(staging.subarray(0, bytes));
    // Written whole at once (nothing left queued), the staging buffer is free again; otherwise Node holds it until it
    // is sent, and the next answers are staged in a new one. A copy per write was most of what the process allocated
    // outside the JS heap under overload, and what it kept after.
    if (this.socket.writableLength !== 0 || staging.length > MAX_KEPT_STAGING_BYTES) this.staging = Buffer.allocUnsafe(STAGING_BYTES);
    if (drained || this.readPaused || this.socket.writableLength < MAX_UNSENT_BYTES) return;
    // The peer is not reading its answers (and PING or SETTINGS ACKs, resets, Trailers-Only answers are not flow
    // controlled): read no more from it until what is written has gone, so its requests cannot grow this buffer.
    this.readPaused = true;
    this.socket.pause();
    this.socket.once('drain', () => {
      this.readPaused = false;
      if (this.state === GONE || this.readStopped) return;
      if (this.backlog) this.scheduleBacklog();
      else this.socket.resume();
    });
  }

  private endIfIdle(): void {
    if (this.state !== GONE && this.streams.size === 0) this.terminate(true);
  }

  private failPings(): void {
    const pings = this.pings;
    this.pings = undefined;
    if (pings) for (const acked of pings.values()) acked(false);
  }
}

/**
 * RFC 9113 §8.3: a request has :method, :scheme and a non-empty :path once each (CONNECT aside, which gRPC never
 * sends), :authority at most once, no other pseudo-header, and none after a regular field (§8.3); te, if any, is
 * "trailers" (§8.2.2); anything else is malformed (§8.1.1). Returns MALFORMED_REQUEST, or the request's
 * content-length (NO_CONTENT_LENGTH without one: gRPC clients send none, so looking for it in the scan of the regular
 * fields costs a length comparison per field).
 */
function checkRequestFields(fields: readonly string[]): number {
  let found = 0;
  let i = 0;
  for (; i < fields.length; i += 2) {
    const name = fields[i]!;
    if (name.charCodeAt(0) !== 58) break; // ':'
    const bit = name === ':method' ? 1 : name === ':scheme' ? 2 : name === ':path' ? 4 : name === ':authority' ? 8 : 0;
    if (bit === 0 || (found & bit) !== 0) return MALFORMED_REQUEST;
    found |= bit;
    if (bit === 4 && fields[i + 1]!.length === 0) return MALFORMED_REQUEST;
  }
  if ((found & 7) !== 7) return MALFORMED_REQUEST;
  let contentLength = NO_CONTENT_LENGTH;
  for (; i < fields.length; i += 2) {
    const name = fields[i]!;
    if (name.charCodeAt(0) === 58) return MALFORMED_REQUEST;
    if (name.length === 14 && name === 'content-length') {
      // A second one, even of the same value, is refused rather than reconciled (RFC 9110 §8.6 allows either).
      if (contentLength !== NO_CONTENT_LENGTH) return MALFORMED_REQUEST;
      contentLength = parseContentLength(fields[i + 1]!);
    } else if (name.length === 2 && name === 'te' && fields[i + 1] !== 'trailers') {
      return MALFORMED_REQUEST;
    }
  }
  return contentLength;
}

/** RFC 9110 §8.6: 1*DIGIT; at most 15 of them, so the number is exact (no gRPC message comes near). Else MALFORMED_REQUEST. */
function parseContentLength(value: string): number {
  if (value.length === 0 || value.length > 15) return MALFORMED_REQUEST;
  let length = 0;
  for (let i = 0; i < value.length; i += 1) {
    const digit = value.charCodeAt(i) - 48;
    if (digit < 0 || digit > 9) return MALFORMED_REQUEST;
    length = length * 10 + digit;
  }
  return length;
}

/**
 * RFC 9113 §5.3.1: a stream cannot depend on itself. A stream error, which this side makes a connection error, as
 * nghttp2 does: no client that means well sends it, and the priority it would carry is not read anyway.
 */
function checkDependency(streamId: number, data: Buffer, at: number): void {
  if ((data.readUInt32BE(at) & 0x7fffffff) === streamId) {
    throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `stream ${streamId} made to depend on itself`);
  }
}

/** What refusing a stream for its header block of [start, end) counts against local_resets: its decoding work. */
function headerBlockWeight(start: number, end: number): number {
  return 1 + Math.floor((end - start) / HEADER_BLOCK_OCTETS_PER_RESET);
}

/** §8.1: trailers carry no pseudo-headers. */
function hasPseudoHeader(fields: readonly string[]): boolean {
  for (let i = 0; i < fields.length; i += 2) if (fields[i]!.charCodeAt(0) === 58) return true;
  return false;
}
