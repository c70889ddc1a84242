/**
 * A gRPC server on HTTP/2 of its own (http2/connection.ts) for the few methods this service
 * serves: unary and server-streaming calls (one request message), and
 * bidirectional-streaming calls (request messages handed over one by one as
 * they complete; a client-streaming method is one of these that answers
 * with respond()). It follows gRPC over HTTP/2 (grpc/doc/PROTOCOL-HTTP2.md)
 * as far as those need; what it refuses, and how, is listed in
 * docs/design/transport.md.
 *
 * Why not grpc-js: its server spends most of a no-op Check's CPU on per-call
 * machinery (interceptor objects, metadata conversion, status metadata
 * clones); this is one object per call. Why not node:http2: see
 * http2/connection.ts. The measurements are in docs/design/transport.md.
 */
import * as net from 'node:net';
import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import { DeadlineSweeper } from './deadline-sweeper';
import type { AttackBudget } from './http2/attack-budgets';
import { Http2Connection, type ServerStream, type StreamListener } from './http2/connection';
import { ErrorCode } from './http2/frames';
import { readIntoOneBuffer } from './accepted-socket';
import { encodeHeaderBlock, OK_TRAILERS_BLOCK, RESPONSE_HEADERS_BLOCK } from './http2/hpack-encoder';
import { percentEncodeGrpcMessage, quotedClientValue } from './grpc-message';
import { parseGrpcTimeoutMs } from './grpc-timeout';
import { GrpcStatus, type RpcError } from './status';

/** How a method's call is answered. Every method gets exactly one request message. */
export interface UnaryCall {
  /** When the caller gives up (`grpc-timeout` on receipt, system clock, epoch ms), Infinity without one. */
  readonly deadlineMs: number;
  /** True once the call has ended: answered, cancelled by the client, past its deadline, or the server closed. */
  readonly finished: boolean;
  /**
   * The request metadata named in GrpcServerSettings.keptMetadata, as name/value pairs in the order sent; undefined
   * when none of it came (or nothing is kept). The rest of the call's headers are not kept past its start.
   */
  readonly metadata: readonly string[] | undefined;
  /** Answers with one message, given as a length-prefixed frame (see frameMessage), then status OK. */
  respond(frame: Buffer): void;
  /** Answers with an error status (Trailers-Only). */
  fail(error: RpcError): void;
}

export interface ServerStreamingCall extends UnaryCall {
  /** Sends one message (a length-prefixed frame) and keeps the call open. */
  write(frame: Buffer): void;
  /** Ends the call with this status after the messages written. */
  end(status: RpcError): void;
  /** Runs once when the call ends for any reason. */
  onFinished(listener: () => void): void;
}

export interface BidiStreamingCall extends ServerStreamingCall {
  /**
   * Refuses the call before anything was answered: RST_STREAM(REFUSED_STREAM).
   * gRPC clients report it UNAVAILABLE, and it tells a proxy that nothing was
   * processed, so it may retry the call elsewhere (Envoy: retry_on
   * refused-stream). After a first answer it ends the call UNAVAILABLE instead.
   */
  refuse(): void;
}

/** Why a bidi-streaming call ended without its handler ending it. */
export type CallAbort =
  /** The client reset the stream (RST_STREAM), or its connection went away. */
  | 'cancelled'
  /** Its grpc-timeout passed: answered DEADLINE_EXCEEDED. */
  | 'deadline'
  /** The transport answered an error of its own: a message it refuses (too large, compressed, cut off), or a handler that threw. */
  | 'failed'
  /** The server closed (close()) before the call ended: answered UNAVAILABLE. */
  | 'shutdown';

/** What a bidi-streaming handler is told about its call's request side. Each method runs synchronously, in order. */
export interface RequestStream {
  /** One request message, as soon as it is complete; the buffer may be a view into a read the next one overwrites, so copy what is kept. */
  message(message: Buffer): void;
  /** The client half-closed (END_STREAM): no more messages. The call stays open until the handler ends it. */
  halfClosed(): void;
  /** The call ended without the handler ending it. Runs at most once, before the call's onFinished listeners. */
  aborted(reason: CallAbort): void;
}

export type MethodHandler =
  | { kind: 'unary'; handle(message: Buffer, call: UnaryCall): void }
  | { kind: 'server-streaming'; handle(message: Buffer, call: ServerStreamingCall): void }
  /** `start` runs when the call's HEADERS arrive, before any message; undefined when it has ended (refused) the call at once. */
  | { kind: 'bidi-streaming'; start(call: BidiStreamingCall): RequestStream | undefined };

/** The methods that get exactly one request message. */
export type SingleMessageMethodHandler = Exclude<MethodHandler, { kind: 'bidi-streaming' }>;

export interface GrpcServerSettings {
  host: string;
  port: number;
  /** RESOURCE_EXHAUSTED for a request message above this (grpc-js's default: 4 MiB). */
  maxReceiveMessageBytes: number;
  /** A PING on every connection this often; no ACK within keepaliveTimeoutMs closes it. */
  keepaliveTimeMs: number;
  keepaliveTimeoutMs: number;
  /** Connections are drained (GOAWAY) after this age, ±10 % jitter, and closed maxConnectionAgeGraceMs later. */
  maxConnectionAgeMs: number;
  maxConnectionAgeGraceMs: number;
  /**
   * A connection drained at max age that still carries bidi-streaming calls
   * when maxConnectionAgeGraceMs ends is kept until they end, at most this
   * long after its GOAWAY. Process calls last as long as the answer they
   * meter: Envoy ends each within its route timeout (600 s in envoy.yaml)
   * and deferred_close_timeout (5 s), so cutting them at the grace period
   * would lose the usage of every long answer that straddles a recycle.
   */
  maxStreamingCallDrainMs: number;
  /** close(): how long in-flight calls may take before the connections are destroyed. */
  shutdownTimeoutMs: number;
  /** SETTINGS_MAX_CONCURRENT_STREAMS advertised per connection. */
  maxConcurrentStreams: number;
  /** SETTINGS_MAX_HEADER_LIST_SIZE advertised: a request whose headers decode to more is reset (ENHANCE_YOUR_CALM). */
  maxHeaderListBytes: number;
  /** Lower-case names of request metadata handed to the handlers (UnaryCall.metadata); absent: none. */
  keptMetadata?: ReadonlySet<string>;
  /** Where the max-age jitter comes from, in [0, 1): Math.random unless a test sets it. */
  random?: () => number;
}

/** A connection's max age: ±10 % around maxConnectionAgeMs, so that connections opened together (after a restart) are not all recycled together. */
export function jitteredConnectionAgeMs(maxConnectionAgeMs: number, random: number): number {
  return Math.round(maxConnectionAgeMs * (0.9 + 0.2 * random));
}

export const DEFAULT_GRPC_SERVER_SETTINGS: Omit<GrpcServerSettings, 'host' | 'port'> = {
  maxReceiveMessageBytes: 4 * 1024 * 1024,
  keepaliveTimeMs: 30_000,
  keepaliveTimeoutMs: 10_000,
  maxConnectionAgeMs: 300_000,
  maxConnectionAgeGraceMs: 30_000,
  maxStreamingCallDrainMs: 610_000,
  shutdownTimeoutMs: 10_000,
  maxConcurrentStreams: 1000,
  maxHeaderListBytes: 16 * 1024,
};

/** A gRPC message's prefix: the compressed flag and the big-endian length. */
export const MESSAGE_PREFIX_BYTES = 5;

/** The prefix (uncompressed) and the message, in one buffer. */
export function frameMessage(message: Buffer): Buffer {
  const frame = Buffer.allocUnsafe(MESSAGE_PREFIX_BYTES + message.length);
  frame[0] = 0;
  frame.writeUInt32BE(message.length, 1);
  message.copy(frame, MESSAGE_PREFIX_BYTES);
  return frame;
}

/** Node's timers take at most 2^31 − 1 ms; a longer deadline is as good as none. */
const MAX_TIMER_MS = 2 ** 31 - 1;
/**
 * Distinct grpc-timeout values that get a DeadlineSweeper of their own (an
 * Envoy sends the same one on every Check); calls with any other value get a
 * timer each, so a client cannot make the server keep a sweeper per value.
 */
const MAX_DEADLINE_SWEEPERS = 16;
/** GOAWAY's "any stream you may have sent": the first of the two GOAWAYs of a drain (RFC 9113 §6.8). */
const ALL_STREAMS = 2 ** 31 - 1;
/** How long a drain waits for the ACK of the PING that follows its first GOAWAY. */
const DRAIN_PING_TIMEOUT_MS = 1000;

/** `application/grpc`, optionally `+proto` and parameters; anything else that starts like it is another encoding. */
function contentSubtypeOf(contentType: string): string | undefined {
  if (!contentType.startsWith('application/grpc')) return undefined;
  const rest = contentType.slice('application/grpc'.length);
  if (rest === '' || rest.startsWith(';')) return 'proto';
  if (!rest.startsWith('+')) return undefined;
  const end = rest.indexOf(';');
  return rest.slice(1, end === -1 ? undefined : end);
}

const READING = 0;
const HANDLING = 1;
const FINISHED = 2;

/** One call, from its HEADERS to its status. */
class ServerCall implements BidiStreamingCall, StreamListener {
  private state = READING;
  private headersSent = false;
  /** Bytes of a message prefix or body split across DATA frames. */
  private partial: Buffer[] | undefined;
  private partialBytes = 0;
  /** Length of the message being received in pieces; -1 while reading a prefix. */
  private expected = -1;
  /** Unary and server-streaming: the one request message, handled at END_STREAM. */
  private message: Buffer | undefined;
  /** Bidi-streaming: where each message goes as it completes. */
  private requestStream: RequestStream | undefined;
  /** Performance.now() ms when the call's grpc-timeout passes (Infinity without one). */
  readonly deadline: number;
  /** Watches the deadline with the other calls of the same grpc-timeout; or a timer of its own (deadlineTimer). */
  private readonly deadlineSweeper: DeadlineSweeper<ServerCall> | undefined;
  private deadlineTimer: NodeJS.Timeout | undefined;
  private finishListeners: (() => void)[] | undefined;

  constructor(
    private readonly server: GrpcServer,
    private readonly stream: ServerStream,
    private readonly path: string,
    private readonly handler: MethodHandler,
    readonly deadlineMs: number,
    timeoutMs: number,
    private readonly encoding: string | undefined,
    private readonly connection: SessionState | undefined,
    readonly metadata: readonly string[] | undefined,
  ) {
    if (connection) {
      connection.openCalls += 1;
      if (handler.kind === 'bidi-streaming') connection.openBidiCalls += 1;
    }
    server.callOpened();
    this.deadline = performance.now() + timeoutMs;
    if (timeoutMs < MAX_TIMER_MS) {
      this.deadlineSweeper = server.deadlineSweeperFor(timeoutMs);
      if (this.deadlineSweeper) this.deadlineSweeper.add(this);
      else this.deadlineTimer = setTimeout(() => this.deadlinePassed(), timeoutMs);
    }
  }

  get finished(): boolean {
    return this.state === FINISHED;
  }

  /** For the DeadlineSweeper: nothing left to expire. */
  get settled(): boolean {
    return this.state === FINISHED;
  }

  /** Bidi-streaming: hands the call to its handler as soon as its HEADERS are in. */
  startStreaming(): void {
    if (this.handler.kind !== 'bidi-streaming') return;
    try {
      const requestStream = this.handler.start(this);
      // A handler may refuse or end the call in start().
      if (this.state !== FINISHED) this.requestStream = requestStream;
    } catch (error) {
      this.server.logger.error({ err: error, path: this.path }, 'gRPC handler failed');
      this.abort({ code: GrpcStatus.INTERNAL, details: 'internal error' }, 'failed');
    }
  }

  onData(chunk: Buffer): void {
    if (this.state !== READING) return;
    let data = chunk;
    if (this.partial && this.expected === -1) {
      // A prefix split across frames (rare): join the few bytes.
      this.partial.push(chunk);
      data = Buffer.concat(this.partial);
      this.partial = undefined;
      this.partialBytes = 0;
    }
    let offset = 0;
    while (offset < data.length && this.state === READING) {
      if (this.expected >= 0) {
        const take = Math.min(this.expected - this.partialBytes, data.length - offset);
        const piece = data.subarray(offset, offset + take);
        this.partialBytes += take;
        offset += take;
        // A piece kept for a later frame is copied: the read it came in is overwritten by the next one.
        this.partial!.push(this.partialBytes === this.expected ? piece : Buffer.from(piece));
        if (this.partialBytes === this.expected) {
          const message = Buffer.concat(this.partial!, this.expected);
          this.partial = undefined;
          this.partialBytes = 0;
          this.expected = -1;
          this.received(message);
        }
        continue;
      }
      if (data.length - offset < MESSAGE_PREFIX_BYTES) {
        this.partial = [Buffer.from(data.subarray(offset))];
        return;
      }
      const flag = data[offset]!;
      const length = data.readUInt32BE(offset + 1);
      offset += MESSAGE_PREFIX_BYTES;
      if (!this.acceptPrefix(flag, length)) return;
      if (data.length - offset >= length) {
        this.received(data.subarray(offset, offset + length));
        offset += length;
      } else {
        // The length is checked before any of the body is kept.
        this.expected = length;
        this.partial = [];
      }
    }
  }

  private acceptPrefix(flag: number, length: number): boolean {
    if (flag === 1) {
      // compression.md: a compressed message needs grpc-encoding; identity is all this server accepts.
      if (this.encoding === undefined || this.encoding === 'identity') {
        this.abort({ code: GrpcStatus.INTERNAL, details: 'Compressed message received without a grpc-encoding' }, 'failed');
      } else {
        this.abort(
          { code: GrpcStatus.UNIMPLEMENTED, details: `Message encoding ${quotedClientValue(this.encoding)} is not supported` },
          'failed',
          ACCEPT_IDENTITY,
        );
      }
      return false;
    }
    if (flag !== 0) {
      this.abort({ code: GrpcStatus.INTERNAL, details: `Invalid message flag ${flag}` }, 'failed');
      return false;
    }
    const limit = this.server.settings.maxReceiveMessageBytes;
    if (length > limit) {
      this.abort({ code: GrpcStatus.RESOURCE_EXHAUSTED, details: `Received message larger than max (${length} vs. ${limit})` }, 'failed');
      return false;
    }
    if (this.message !== undefined) {
      this.abort({ code: GrpcStatus.UNIMPLEMENTED, details: `More than one request message for ${this.path}` }, 'failed');
      return false;
    }
    return true;
  }

  private received(message: Buffer): void {
    if (this.handler.kind !== 'bidi-streaming') {
      // A view into the read is valid until the read is handled. A stream that ended in it (a Check's one DATA frame
      // with END_STREAM) is handled before then; one still open keeps a copy for its END_STREAM in a later read.
      this.message = this.stream.remoteEnded ? message : Buffer.from(message);
      return;
    }
    const requestStream = this.requestStream;
    if (!requestStream) return;
    try {
      requestStream.message(message);
    } catch (error) {
      this.server.logger.error({ err: error, path: this.path }, 'gRPC handler failed');
      this.abort({ code: GrpcStatus.INTERNAL, details: 'internal error' }, 'failed');
    }
  }

  onEnd(): void {
    if (this.state !== READING) return;
    if (this.partial) {
      this.abort({ code: GrpcStatus.INTERNAL, details: 'The request ended inside a message' }, 'failed');
      return;
    }
    if (this.handler.kind === 'bidi-streaming') {
      this.state = HANDLING;
      try {
        this.requestStream?.halfClosed();
      } catch (error) {
        this.server.logger.error({ err: error, path: this.path }, 'gRPC handler failed');
        this.abort({ code: GrpcStatus.INTERNAL, details: 'internal error' }, 'failed');
      }
      return;
    }
    const message = this.message;
    if (message === undefined) {
      this.fail({ code: GrpcStatus.UNIMPLEMENTED, details: `No request message for ${this.path}` });
      return;
    }
    this.message = undefined;
    this.state = HANDLING;
    try {
      this.handler.handle(message, this);
    } catch (error) {
      this.server.logger.error({ err: error, path: this.path }, 'gRPC handler failed');
      this.fail({ code: GrpcStatus.INTERNAL, details: 'internal error' });
    }
  }

  /** The stream is gone: answered, reset by the client (RST_STREAM), or its connection closed. */
  onClose(): void {
    if (this.connection) {
      this.connection.openCalls -= 1;
      if (this.handler.kind === 'bidi-streaming') this.connection.openBidiCalls -= 1;
    }
    this.server.callClosed();
    if (this.state !== FINISHED) this.finish('cancelled');
    else if (this.deadlineTimer) clearTimeout(this.deadlineTimer);
  }

  respond(frame: Buffer): void {
    if (this.state === FINISHED || !this.open()) return;
    this.finish();
    this.stream.respond(RESPONSE_HEADERS_BLOCK, frame, OK_TRAILERS_BLOCK);
  }

  write(frame: Buffer): void {
    if (this.state === FINISHED || !this.open()) return;
    if (!this.headersSent) {
      this.headersSent = true;
      this.stream.sendHeaders(RESPONSE_HEADERS_BLOCK);
    }
    this.stream.sendData(frame);
  }

  end(status: RpcError): void {
    this.fail(status);
  }

  fail(error: RpcError): void {
    this.sendStatus(error, undefined, undefined);
  }

  refuse(): void {
    if (this.state === FINISHED || !this.open()) return;
    if (this.headersSent) {
      this.fail({ code: GrpcStatus.UNAVAILABLE, details: 'refused' });
      return;
    }
    this.finish();
    this.stream.reset(ErrorCode.REFUSED_STREAM);
  }

  onFinished(listener: () => void): void {
    if (this.state === FINISHED) listener();
    else (this.finishListeners ??= []).push(listener);
  }

  /** Ends a call the server is closing (server-streaming and bidi-streaming calls stay open otherwise). */
  shutDown(): void {
    this.abort({ code: GrpcStatus.UNAVAILABLE, details: 'the server is shutting down' }, 'shutdown');
  }

  /** An answer of the transport's own: the handler did not end the call, and a bidi handler is told why. */
  private abort(error: RpcError, reason: CallAbort, extraHeaders?: readonly string[]): void {
    this.sendStatus(error, extraHeaders, reason);
  }

  private sendStatus(error: RpcError, extraHeaders: readonly string[] | undefined, abort: CallAbort | undefined): void {
    if (this.state === FINISHED || !this.open()) return;
    this.finish(abort);
    if (this.headersSent) {
      this.stream.sendTrailers(encodeHeaderBlock(statusFields(error)));
      return;
    }
    sendTrailersOnly(this.stream, 200, error, extraHeaders);
  }

  private open(): boolean {
    if (this.stream.closed || this.stream.localEnded) {
      if (this.state !== FINISHED) this.finish('cancelled');
      return false;
    }
    return true;
  }

  /** The grpc-timeout passed (from the call's own timer or its sweeper). */
  deadlinePassed(): void {
    this.deadlineTimer = undefined;
    if (this.state === FINISHED) return;
    this.abort({ code: GrpcStatus.DEADLINE_EXCEEDED, details: 'Deadline exceeded' }, 'deadline');
  }

  /** `abort`: why the call ended when its handler did not end it (told to a bidi handler). */
  private finish(abort?: CallAbort): void {
    this.state = FINISHED;
    if (this.deadlineTimer) {
      clearTimeout(this.deadlineTimer);
      this.deadlineTimer = undefined;
    }
    // Drops the finished calls at the front, so the sweeper holds only calls in flight.
    this.deadlineSweeper?.settled();
    this.server.callFinished(this);
    const requestStream = this.requestStream;
    this.requestStream = undefined;
    if (abort !== undefined && requestStream) {
      try {
        requestStream.aborted(abort);
      } catch (error) {
        this.server.logger.error({ err: error, path: this.path }, 'gRPC handler failed');
      }
    }
    const listeners = this.finishListeners;
    if (!listeners) return;
    this.finishListeners = undefined;
    for (const listener of listeners) {
      try {
        listener();
      } catch (error) {
        this.server.logger.error({ err: error, path: this.path }, 'gRPC call listener failed');
      }
    }
  }
}

const ACCEPT_IDENTITY = Object.freeze(['grpc-accept-encoding', 'identity']);

function statusFields(error: RpcError): string[] {
  return ['grpc-status', String(error.code), 'grpc-message', percentEncodeGrpcMessage(error.details)];
}

/**
 * The Trailers-Only blocks of frozen errors. A frozen error is one a caller answers again and again (a shed Check's
 * answer is built once), so its block is encoded once: under overload, a block made for each shed answer was much
 * of what the process allocated. The encoder keeps no table, so one block serves every connection.
 */
const FROZEN_ERROR_BLOCKS = new WeakMap<RpcError, Buffer>();

/**
 * Trailers-Only: one HEADERS frame with END_STREAM, with a non-200 HTTP
 * status where the protocol calls for one. An answer before the client's
 * END_STREAM is followed by RST_STREAM(NO_ERROR) (the stream's doing): the rest is not read.
 */
function sendTrailersOnly(stream: ServerStream, httpStatus: number, error: RpcError, extraHeaders?: readonly string[]): void {
  const kept = httpStatus === 200 && extraHeaders === undefined && Object.isFrozen(error);
  let block = kept ? FROZEN_ERROR_BLOCKS.get(error) : undefined;
  if (block === undefined) {
    const fields = [':status', String(httpStatus), 'content-type', 'application/grpc', ...(extraHeaders ?? []), ...statusFields(error)];
    block = encodeHeaderBlock(fields);
    if (kept) FROZEN_ERROR_BLOCKS.set(error, block);
  }
  stream.sendTrailers(block);
}

interface SessionState {
  /** Calls started on this connection and not yet closed. */
  openCalls: number;
  /** Of those, bidi-streaming calls: a drain waits longer for them (maxStreamingCallDrainMs). */
  openBidiCalls: number;
  keepalive?: NodeJS.Timeout;
  pingTimeout?: NodeJS.Timeout;
  maxAge?: NodeJS.Timeout;
  grace?: NodeJS.Timeout;
  /** A drain's wait for the ACK of its PING. */
  drainPing?: NodeJS.Timeout;
  draining?: boolean;
}

export class GrpcServer {
  readonly settings: GrpcServerSettings;
  private readonly server: net.Server;
  private readonly methods = new Map<string, MethodHandler>();
  private readonly sessions = new Map<Http2Connection, SessionState>();
  /** Server-streaming calls in progress, ended by close() at once. */
  private readonly streamingCalls = new Set<ServerCall>();
  /** Bidi-streaming calls in progress, ended by close() when shutdownTimeoutMs has passed. */
  private readonly bidiCalls = new Set<ServerCall>();
  private closing: Promise<void> | undefined;
  /** While closing: resolves close() once the listener and every connection are closed (the net.Server counts none of them). */
  private closedIfDone: (() => void) | undefined;
  /** Calls whose stream has not closed, over every connection: kept apart from SessionState, which goes with its connection. */
  private callsOpen = 0;
  /** By grpc-timeout in ms: calls with the same one have deadlines in the order they started. */
  private readonly deadlineSweepers = new Map<number, DeadlineSweeper<ServerCall>>();
  /** Connections closed ENHANCE_YOUR_CALM since the start, by the attack budget they overran (http2/attack-budgets.ts). */
  readonly budgetClosures: Record<AttackBudget, number> = {
    client_resets: 0,
    local_resets: 0,
    empty_frames: 0,
    control_frames: 0,
    header_block: 0,
  };
  private readonly connectionEvents = {
    stream: (stream: ServerStream, headers: readonly string[]) => this.onStream(stream, headers),
    closed: (connection: Http2Connection) => this.onConnectionClosed(connection),
    error: (error: Error, internal?: boolean) =>
      internal
        ? this.logger.error({ err: error }, 'HTTP/2 connection closed: internal error')
        : this.logger.debug({ err: error }, 'HTTP/2 connection error'),
    calmed: (budget: AttackBudget) => {
      this.budgetClosures[budget] += 1;
      // Debug, as protocol errors: under attack there is one per attacking connection; the count is the signal.
      this.logger.debug({ budget }, 'HTTP/2 connection over its attack budget: GOAWAY(ENHANCE_YOUR_CALM)');
    },
  };

  constructor(
    settings: Partial<GrpcServerSettings> & Pick<GrpcServerSettings, 'host' | 'port'>,
    readonly logger: Logger,
  ) {
    this.settings = Object.assign({}, DEFAULT_GRPC_SERVER_SETTINGS, settings);
    // Answers are small and leave once per turn of the event loop (connection.ts batches them): Nagle would only delay them.
    // Paused on connect: nothing is read before onConnection hands the connection to a socket that reads into the shared buffer.
    this.server = net.createServer({ noDelay: true, pauseOnConnect: true }, (socket) => this.onConnection(socket));
  }

  /** Registers a method at its path, `/<package>.<Service>/<Method>`. */
  addMethod(path: string, handler: MethodHandler): void {
    this.methods.set(path, handler);
  }

  listen(): Promise<number> {
    return new Promise((resolve, reject) => {
      const onError = (error: Error) => reject(error);
      this.server.once('error', onError);
      this.server.listen(this.settings.port, this.settings.host, () => {
        this.server.off('error', onError);
        this.server.on('error', (error) => this.logger.error({ err: error }, 'gRPC server error'));
        const address = this.server.address();
        resolve(typeof address === 'object' && address ? address.port : this.settings.port);
      });
    });
  }

  /**
   * Graceful close: no new connections; every connection gets GOAWAY (twice,
   * see drain) and its calls in flight may finish; server-streaming calls
   * (Health/Watch) end UNAVAILABLE at once, as they never end by themselves.
   * After shutdownTimeoutMs, bidi-streaming calls still open end UNAVAILABLE
   * (their handlers are told, 'shutdown'), and connections still open are
   * destroyed.
   */
  close(): Promise<void> {
    this.closing ??= new Promise<void>((resolve) => {
      for (const call of [...this.streamingCalls]) call.shutDown();
      const force = setTimeout(() => {
        for (const call of [...this.bidiCalls]) call.shutDown();
        for (const connection of [...this.sessions.keys()]) connection.destroy();
      }, this.settings.shutdownTimeoutMs);
      let listenerClosed = false;
      this.closedIfDone = () => {
        if (!listenerClosed || this.sessions.size > 0) return;
        this.closedIfDone = undefined;
        clearTimeout(force);
        for (const sweeper of this.deadlineSweepers.values()) sweeper.stop();
        resolve();
      };
      this.server.close(() => {
        listenerClosed = true;
        this.closedIfDone?.();
      });
      for (const connection of [...this.sessions.keys()]) this.drain(connection, 'shutdown');
    });
    return this.closing;
  }

  /** Connections open now (for tests and metrics). */
  get connectionCount(): number {
    return this.sessions.size;
  }

  /** Calls whose stream has not closed yet (for tests: once no connection is open, a call still counted has leaked). */
  get openCallCount(): number {
    return this.callsOpen;
  }

  callOpened(): void {
    this.callsOpen += 1;
  }

  callClosed(): void {
    this.callsOpen -= 1;
  }

  /** The sweeper for calls with this grpc-timeout; undefined once MAX_DEADLINE_SWEEPERS others exist. */
  deadlineSweeperFor(timeoutMs: number): DeadlineSweeper<ServerCall> | undefined {
    let sweeper = this.deadlineSweepers.get(timeoutMs);
    if (sweeper === undefined && this.deadlineSweepers.size < MAX_DEADLINE_SWEEPERS) {
      sweeper = new DeadlineSweeper<ServerCall>((call) => call.deadlinePassed());
      this.deadlineSweepers.set(timeoutMs, sweeper);
    }
    return sweeper;
  }

  callFinished(call: ServerCall): void {
    this.streamingCalls.delete(call);
    this.bidiCalls.delete(call);
  }

  private onConnection(accepted: net.Socket): void {
    // Reads begin on a later turn of the event loop, once the connection below exists.
    const socket = readIntoOneBuffer(accepted, (bytes) => connection.receive(bytes));
    if (socket === undefined) return;
    const connection = new Http2Connection(
      socket,
      { maxConcurrentStreams: this.settings.maxConcurrentStreams, maxHeaderListBytes: this.settings.maxHeaderListBytes },
      this.connectionEvents,
    );
    const timers: SessionState = { openCalls: 0, openBidiCalls: 0 };
    this.sessions.set(connection, timers);
    if (this.closing) {
      this.drain(connection, 'shutdown');
      return;
    }
    this.scheduleKeepalive(connection, timers);
    const { maxConnectionAgeMs, random = Math.random } = this.settings;
    const ageMs = jitteredConnectionAgeMs(maxConnectionAgeMs, random());
    timers.maxAge = setTimeout(() => this.drain(connection, 'max_age'), ageMs).unref();
  }

  private onConnectionClosed(connection: Http2Connection): void {
    const timers = this.sessions.get(connection);
    if (!timers) return;
    this.sessions.delete(connection);
    clearTimeout(timers.keepalive);
    clearTimeout(timers.pingTimeout);
    clearTimeout(timers.maxAge);
    clearTimeout(timers.grace);
    clearTimeout(timers.drainPing);
    this.closedIfDone?.();
  }

  private onStream(stream: ServerStream, headers: readonly string[]): StreamListener | undefined {
    try {
      return this.startCall(stream, headers);
    } catch (error) {
      this.logger.error({ err: error }, 'gRPC call setup failed');
      stream.reset(ErrorCode.INTERNAL_ERROR);
      return undefined;
    }
  }

  private startCall(stream: ServerStream, headers: readonly string[]): StreamListener | undefined {
    let method: string | undefined;
    let path = '';
    let contentType: string | undefined;
    let te: string | undefined;
    let timeout: string | undefined;
    let encoding: string | undefined;
    let metadata: string[] | undefined;
    const kept = this.settings.keptMetadata;
    for (let i = 0; i < headers.length; i += 2) {
      const value = headers[i + 1]!;
      switch (headers[i]) {
        case ':method':
          method = value;
          break;
        case ':path':
          path = value;
          break;
        case 'content-type':
          contentType = value;
          break;
        case 'te':
          te = value;
          break;
        case 'grpc-timeout':
          timeout = value;
          break;
        case 'grpc-encoding':
          encoding = value;
          break;
        default:
          if (kept !== undefined && kept.has(headers[i]!)) (metadata ??= []).push(headers[i]!, value);
      }
    }
    const subtype = contentType === undefined ? undefined : contentSubtypeOf(contentType);
    if (subtype === undefined) {
      // PROTOCOL-HTTP2.md: HTTP 415; with a gRPC status as well, as grpc-go does.
      sendTrailersOnly(stream, 415, {
        code: GrpcStatus.INVALID_ARGUMENT,
        details: `invalid gRPC request content-type ${quotedClientValue(contentType ?? '')}`,
      });
      return undefined;
    }
    if (method !== 'POST') {
      sendTrailersOnly(stream, 405, {
        code: GrpcStatus.INTERNAL,
        details: `gRPC requires :method POST, got ${quotedClientValue(String(method))}`,
      });
      return undefined;
    }
    if (te !== 'trailers') {
      // As gRPC C-core: te: trailers is how a client shows nothing between it and us drops trailers.
      sendTrailersOnly(stream, 200, { code: GrpcStatus.UNKNOWN, details: 'Missing or bad te header: gRPC needs "te: trailers"' });
      return undefined;
    }
    if (subtype !== 'proto') {
      sendTrailersOnly(stream, 200, {
        code: GrpcStatus.UNIMPLEMENTED,
        details: `content-type ${quotedClientValue(contentType ?? '')}: only protobuf messages are served`,
      });
      return undefined;
    }
    let timeoutMs = Infinity;
    if (timeout !== undefined) {
      const parsed = parseGrpcTimeoutMs(timeout);
      if (parsed === undefined) {
        sendTrailersOnly(stream, 200, { code: GrpcStatus.INTERNAL, details: `Invalid grpc-timeout value ${quotedClientValue(timeout)}` });
        return undefined;
      }
      timeoutMs = parsed;
    }
    const handler = this.methods.get(path);
    if (!handler) {
      sendTrailersOnly(stream, 200, {
        code: GrpcStatus.UNIMPLEMENTED,
        details: `The server does not implement the method ${quotedClientValue(path)}`,
      });
      return undefined;
    }
    const deadlineMs = timeoutMs === Infinity ? Infinity : Date.now() + timeoutMs;
    if (handler.kind === 'server-streaming' && this.closing) {
      // close() has ended the open ones; a new one would hold the drain until its timeout.
      sendTrailersOnly(stream, 200, { code: GrpcStatus.UNAVAILABLE, details: 'the server is shutting down' });
      return undefined;
    }
    const connection = this.sessions.get(stream.connection);
    const call = new ServerCall(this, stream, path, handler, deadlineMs, timeoutMs, encoding, connection, metadata);
    if (handler.kind === 'server-streaming') this.streamingCalls.add(call);
    else if (handler.kind === 'bidi-streaming') this.bidiCalls.add(call);
    call.startStreaming();
    return call;
  }

  /** A PING every keepaliveTimeMs; a peer that does not answer within keepaliveTimeoutMs is gone. */
  private scheduleKeepalive(connection: Http2Connection, timers: SessionState): void {
    timers.keepalive = setTimeout(() => {
      if (connection.destroyed) return;
      timers.pingTimeout = setTimeout(() => {
        this.logger.info(
          { event: 'keepalive_timeout', timeoutMs: this.settings.keepaliveTimeoutMs },
          'gRPC connection closed: no PING ACK',
        );
        connection.destroy();
      }, this.settings.keepaliveTimeoutMs).unref();
      connection.ping((acked) => {
        clearTimeout(timers.pingTimeout);
        if (acked) this.scheduleKeepalive(connection, timers);
      });
    }, this.settings.keepaliveTimeMs).unref();
  }

  /**
   * Graceful GOAWAY, as grpc-go drains: a first GOAWAY that still accepts
   * every stream the client may have sent, a PING, and on its ACK (one round
   * trip later: the client has seen the GOAWAY) the final GOAWAY naming the
   * last stream taken. Calls in flight finish; the connection closes when
   * they have, or is destroyed after the grace period.
   */
  private drain(connection: Http2Connection, reason: 'max_age' | 'shutdown'): void {
    const timers = this.sessions.get(connection);
    if (!timers || timers.draining || connection.destroyed) return;
    timers.draining = true;
    clearTimeout(timers.maxAge);
    if (reason === 'shutdown' && timers.openCalls === 0) {
      // Nothing to finish, and the traffic has been sent elsewhere (health went NOT_SERVING first): one GOAWAY.
      connection.close();
      return;
    }
    const drainStarted = Date.now();
    timers.grace = setTimeout(() => {
      const waitedMs = Date.now() - drainStarted;
      const { maxStreamingCallDrainMs } = this.settings;
      if (reason === 'max_age' && timers.openBidiCalls > 0 && waitedMs < maxStreamingCallDrainMs) {
        // Unary calls have had their grace; bidi calls (answers being metered) end with their answers.
        timers.grace = setTimeout(() => connection.destroy(), maxStreamingCallDrainMs - waitedMs).unref();
        return;
      }
      connection.destroy();
    }, this.settings.maxConnectionAgeGraceMs).unref();
    // A client that answers GOAWAY by closing at once never ACKs the PING: do not wait for it long.
    timers.drainPing = setTimeout(() => connection.close(), DRAIN_PING_TIMEOUT_MS).unref();
    connection.goaway(ErrorCode.NO_ERROR, ALL_STREAMS, Buffer.from(reason));
    connection.ping(() => {
      clearTimeout(timers.drainPing);
      connection.close();
    });
  }
}
