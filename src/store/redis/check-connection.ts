import * as net from 'node:net';
import { performance } from 'node:perf_hooks';
import * as tls from 'node:tls';
import type { CheckPathOperation, CheckPathTimer } from '../../check/ports';
import { StoreUnavailableError } from '../../ports/store';
import { DeadlineSweeper, type Expiring } from '../../transport/deadline-sweeper';
import { DeadlineExceededError, withinDeadline } from './deadline';
import { RedisReplyError, RespReader, argumentBulk, bulk, command, type RespReply, type ScriptArgument } from './resp';

/**
 * The Check path's connection to Redis: one pipelined socket for the
 * authorize script and the key-index GET, with as little between the
 * caller and the socket as measured necessary (test/bench/redis-check-path.ts:
 * a third of ioredis's client CPU per decision). Per command: one entry in
 * the in-order reply queue, one promise, the command text. Commands issued
 * in one turn of the event loop leave together, up to FLUSH_AT_COMMANDS in
 * a write (see flush). One DeadlineSweeper fails commands past the
 * deadline instead of a timer each. The timing hook reports each command's
 * time (metrics), so no wrapper promise is needed for that either.
 *
 * Used for standalone Redis and for a Sentinel-managed master (the address
 * comes from `locate`: the URL as ioredis reads it, or the master Sentinel
 * names). A Redis Cluster is served by ioredis (cluster-check-channel.ts).
 */
export interface CheckChannel {
  /**
   * EVALSHA (EVAL when Redis lacks the script), its reply read by `parse` (a throw rejects). `late`, if given, is told
   * the parsed reply of a call that failed at its deadline and was answered after all: the script ran, and what it
   * wrote may need undoing (a credit hold).
   */
  script<T>(
    script: LuaSource,
    keys: readonly string[],
    args: readonly ScriptArgument[],
    parse: (reply: unknown) => T,
    operation: CheckPathOperation,
    late?: (value: T) => void,
  ): Promise<T>;
  get<T>(key: string, parse: (reply: unknown) => T, operation: CheckPathOperation): Promise<T>;
  /** PING, with its own deadline (health probes). */
  ping(deadlineMs: number): Promise<void>;
  /** Reports each command's time; metrics set it once. */
  timeWith(timer: CheckPathTimer): void;
  close(): Promise<void>;
}

export interface LuaSource {
  readonly lua: string;
  readonly sha: string;
}

/** Where to connect, as ioredis would: host, port, credentials, database, TLS. */
export interface RedisAddress {
  host: string;
  port: number;
  username?: string;
  password?: string;
  db?: number;
  tls?: tls.ConnectionOptions;
  family?: number;
  /** Connected to a Sentinel's pick: confirm with ROLE that it is the master. */
  mustBeMaster?: boolean;
}

export interface PipelinedConnectionOptions {
  /** Finds the server to connect to; asked again before each reconnect. */
  locate: () => Promise<RedisAddress>;
  /** Every Check command's deadline from the moment it is issued. */
  deadlineMs: number;
  connectTimeoutMs: number;
  /** Pause before reconnect attempt n (from 1). */
  reconnectDelayMs: (attempt: number) => number;
}

interface Pending extends Expiring {
  readonly startedAt: number;
  readonly operation: CheckPathOperation | undefined;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: Error) => void;
  readonly parse: (reply: unknown) => unknown;
  /** The command as sent (EVAL instead of EVALSHA after NOSCRIPT). */
  text: string;
  /** For a script call: its source (NOSCRIPT is answered by sending EVAL), its text after the SHA and how many parts that is. */
  readonly script: LuaSource | undefined;
  readonly tail: string;
  readonly tailParts: number;
  /** For a script call: the load (see loadedScripts) its EVALSHA counted on, or that its EVAL is. */
  load: number;
  /** Told the parsed reply if it comes after the call failed at its deadline (CheckChannel.script). */
  readonly late: ((value: unknown) => void) | undefined;
}

/**
 * Commands written at once, at most. A burst of Checks (Envoy's connections
 * all ready in one turn of the event loop) would otherwise reach Redis only
 * after the last of them was decoded, and Redis would start on the first
 * only then: its time and this process's added up. Writing every 16th
 * command at once lets Redis work through the first ones while the rest are
 * decoded. Measured (test/bench/gc-profile.ts, h2load's bursts of 120 Checks;
 * test/bench/cpu-profile.ts at saturation): the authorize round trip's
 * median 1.90–2.04 → 1.63–1.70 ms, about a tenth more decisions a second at
 * saturation, the same client CPU per decision, and Redis CPU up 0.4 µs
 * on average (0.8 at most, within the noise).
 */
export const FLUSH_AT_COMMANDS = 16;
const identity = (reply: unknown): unknown => reply;

/** A pipelined RESP connection that reconnects by itself; commands fail at once while it is down. */
export class PipelinedConnection implements CheckChannel {
  private socket: net.Socket | undefined;
  private ready = false;
  private closing = false;
  private reconnectAttempt = 0;
  private reconnectTimer: NodeJS.Timeout | undefined;
  /** Written and waiting for their replies, in order. */
  private waiting: (Pending | undefined)[] = [];
  private waitingHead = 0;
  /** Issued, not yet written: they go in the next write. */
  private unsent: Pending[] = [];
  private flushScheduled = false;
  private timer: CheckPathTimer | undefined;
  private readonly reader = new RespReader((reply) => this.onReply(reply));
  private readonly sweeper = new DeadlineSweeper<Pending>((entry) => this.expire(entry));
  /**
   * Scripts sent with EVAL on the current socket, so Redis has them: EVALSHA
   * from then on, even before the EVAL is answered (Redis reads the socket
   * in order). Each SHA maps to its load, a number unique to the EVAL that
   * sent it, so a NOSCRIPT tells whether Redis lost that load (restart, SCRIPT
   * FLUSH: the first NOSCRIPT since) or a newer load is already on its way.
   */
  private loadedScripts = new Map<string, number>();
  private scriptLoads = 0;
  /** Why the connection is down, for the errors of commands refused meanwhile. */
  private downReason = 'not connected yet';

  private constructor(private readonly options: PipelinedConnectionOptions) {}

  /** Connects (and on failure throws), then stays connected, reconnecting as needed, until close(). */
  static async open(options: PipelinedConnectionOptions): Promise<PipelinedConnection> {
    const connection = new PipelinedConnection(options);
    await connection.connect();
    return connection;
  }

  timeWith(timer: CheckPathTimer): void {
    this.timer = timer;
  }

  /** Commands written and not answered yet (failed at their deadline included); for tests. */
  get awaitingReplies(): number {
    return this.waiting.length - this.waitingHead;
  }

  script<T>(
    script: LuaSource,
    keys: readonly string[],
    args: readonly ScriptArgument[],
    parse: (reply: unknown) => T,
    operation: CheckPathOperation,
    late?: (value: T) => void,
  ): Promise<T> {
    let tail = `$${String(keys.length).length}\r\n${keys.length}\r\n`;
    for (const key of keys) tail += bulk(key);
    for (const arg of args) tail += argumentBulk(arg);
    const tailParts = 1 + keys.length + args.length;
    return this.issue('', parse, operation, script, tail, tailParts, late as ((value: unknown) => void) | undefined) as Promise<T>;
  }

  get<T>(key: string, parse: (reply: unknown) => T, operation: CheckPathOperation): Promise<T> {
    return this.issue(`*2\r\n$3\r\nGET\r\n${bulk(key)}`, parse, operation, undefined, '', 0) as Promise<T>;
  }

  async ping(deadlineMs: number): Promise<void> {
    if (!this.ready) throw this.downError();
    const reply = await withinDeadline(this.internal(['PING']), deadlineMs);
    if (reply !== 'PONG') {
      throw new StoreUnavailableError(`unexpected PING reply from Redis: ${reply instanceof Error ? reply.message : String(reply)}`);
    }
  }

  async close(): Promise<void> {
    this.closing = true;
    if (this.reconnectTimer !== undefined) clearTimeout(this.reconnectTimer);
    const socket = this.socket;
    if (socket && this.ready) {
      try {
        await withinDeadline(this.internal(['QUIT']), 500);
      } catch {
        // Dropped below either way.
      }
    }
    socket?.destroy();
    this.failAll('the store is closed');
    this.sweeper.stop();
  }

  private issue(
    text: string,
    parse: (reply: unknown) => unknown,
    operation: CheckPathOperation,
    script: LuaSource | undefined,
    tail: string,
    tailParts: number,
    late?: (value: unknown) => void,
  ): Promise<unknown> {
    if (!this.ready) {
      this.timer?.(operation, 0, true);
      return Promise.reject(this.downError());
    }
    return new Promise((resolve, reject) => {
      const startedAt = performance.now();
      const entry: Pending = {
        deadline: startedAt + this.options.deadlineMs,
        settled: false,
        startedAt,
        operation,
        resolve,
        reject,
        parse,
        text,
        script,
        tail,
        tailParts,
        load: 0,
        late,
      };
      this.send(entry, script === undefined ? text : this.scriptCommand(entry, script));
      this.sweeper.add(entry);
    });
  }

  /** A command outside the Check deadline (handshake, PING, QUIT): its raw reply, an error reply included. */
  private internal(parts: readonly string[]): Promise<RespReply> {
    return new Promise((resolve, reject) => {
      const entry: Pending = {
        deadline: Number.POSITIVE_INFINITY,
        settled: false,
        startedAt: performance.now(),
        operation: undefined,
        resolve: resolve as (value: unknown) => void,
        reject,
        parse: identity,
        text: command(parts),
        script: undefined,
        tail: '',
        tailParts: 0,
        load: 0,
        late: undefined,
      };
      this.send(entry, entry.text);
    });
  }

  /**
   * EVALSHA when an EVAL of the script is ahead of it on this socket; else
   * EVAL, the script itself (one round trip, as ioredis does), which every
   * later call then counts on: the first call on a socket, or the first
   * after Redis lost its scripts, is the only one that carries the body.
   */
  private scriptCommand(entry: Pending, script: LuaSource): string {
    const load = this.loadedScripts.get(script.sha);
    if (load !== undefined) {
      entry.load = load;
      return `*${2 + entry.tailParts}\r\n$7\r\nEVALSHA\r\n$40\r\n${script.sha}\r\n${entry.tail}`;
    }
    this.scriptLoads += 1;
    entry.load = this.scriptLoads;
    this.loadedScripts.set(script.sha, entry.load);
    return `*${2 + entry.tailParts}\r\n$4\r\nEVAL\r\n${bulk(script.lua)}${entry.tail}`;
  }

  private send(entry: Pending, text: string): void {
    entry.text = text;
    this.unsent.push(entry);
    if (this.unsent.length >= FLUSH_AT_COMMANDS) {
      this.writeUnsent();
      return;
    }
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(this.flush);
    }
  }

  /**
   * Writes the commands issued since the last write in one write (Redis
   * reads them in one read), in the loop's check phase, which comes right
   * after the loop handled every socket that was ready: Checks that arrived
   * on several Envoy connections share it (send writes sooner once
   * FLUSH_AT_COMMANDS are waiting). Measured (test/bench): a third
   * less client CPU per authorize than one write per command. A command whose
   * deadline passed before its write is not sent. Writing every turn, rather
   * than holding commands until the previous batch is answered, keeps the
   * deadline's promise: while this process is busy, Redis still answers what
   * it was sent, and a reply that arrived counts. A command held back cannot
   * be answered meanwhile, so event-loop delay would turn into 503s (and the
   * hold-back variant measured the same Redis CPU at 4,400 decisions/s).
   */
  private readonly flush = (): void => {
    this.flushScheduled = false;
    this.writeUnsent();
  };

  private writeUnsent(): void {
    const socket = this.socket;
    if (!socket) return;
    const unsent = this.unsent;
    this.unsent = [];
    let text = '';
    for (const entry of unsent) {
      if (entry.settled) continue;
      text += entry.text;
      // Only its place in the reply order is needed from now on.
      entry.text = '';
      this.waiting.push(entry);
    }
    // Byte strings (resp.ts): one character, one byte.
    if (text !== '') socket.write(text, 'latin1');
  }

  private onReply(reply: RespReply): void {
    const entry = this.waiting[this.waitingHead];
    if (entry === undefined) {
      // More replies than commands: the stream cannot be trusted any more.
      this.socket?.destroy(new Error('Redis sent a reply nobody asked for'));
      return;
    }
    this.waiting[this.waitingHead] = undefined;
    this.waitingHead += 1;
    if (this.waitingHead === this.waiting.length) {
      this.waiting = [];
      this.waitingHead = 0;
    } else if (this.waitingHead > 1024 && this.waitingHead * 2 > this.waiting.length) {
      this.waiting = this.waiting.slice(this.waitingHead);
      this.waitingHead = 0;
    }
    if (entry.operation === undefined) {
      // Handshake, PING, QUIT: the caller reads the reply, error replies included.
      this.settle(entry, reply, undefined);
      return;
    }
    if (reply instanceof RedisReplyError) {
      if (reply.code === 'NOSCRIPT' && entry.script !== undefined) {
        // Redis restarted or flushed its scripts. The first NOSCRIPT since the load this call counted on marks the
        // script unloaded, so one EVAL loads it again; the calls refused after it go again as EVALSHA, behind that EVAL.
        if (this.loadedScripts.get(entry.script.sha) === entry.load) this.loadedScripts.delete(entry.script.sha);
        if (!entry.settled) {
          this.send(entry, this.scriptCommand(entry, entry.script));
          return;
        }
      }
      if (reply.code === 'READONLY') {
        // A replica now (failover): find the master again.
        this.settle(entry, undefined, reply);
        this.socket?.destroy(new Error(`Redis answered ${reply.message}`));
        return;
      }
      this.settle(entry, undefined, reply);
      return;
    }
    let value: unknown;
    try {
      value = entry.parse(reply);
    } catch (error) {
      this.settle(entry, undefined, error as Error);
      return;
    }
    if (entry.settled) entry.late?.(value);
    else this.settle(entry, value, undefined);
  }

  /**
   * Fails a command at its deadline. A Redis that answers nothing while its
   * socket stays up (stopped, hung, or cut off without a reset: TCP gives up
   * only after many minutes) would otherwise keep every command written to
   * it, and their bytes, until then: memory grows with each Check. Once the
   * oldest command has gone unanswered for as long as a connection may take
   * to set up, the connection counts as lost and is dropped (never resent:
   * a script may have run); reconnecting finds out whether Redis is back.
   */
  private expire(entry: Pending): void {
    this.settle(entry, undefined, new DeadlineExceededError(this.options.deadlineMs));
    const oldest = this.waiting[this.waitingHead];
    if (oldest !== undefined && performance.now() - oldest.startedAt >= this.options.connectTimeoutMs) {
      this.socket?.destroy(new Error(`Redis answered nothing for ${this.options.connectTimeoutMs} ms`));
    }
  }

  private settle(entry: Pending, value: unknown, error: Error | undefined): void {
    if (entry.settled) return;
    entry.settled = true;
    this.sweeper.settled();
    if (entry.operation !== undefined && this.timer !== undefined) {
      this.timer(entry.operation, (performance.now() - entry.startedAt) / 1000, error !== undefined);
    }
    if (error === undefined) entry.resolve(value);
    else if (entry.operation === undefined) entry.reject(error);
    else entry.reject(storeError(error));
  }

  private failAll(reason: string): void {
    const waiting = this.waiting.slice(this.waitingHead);
    const unsent = this.unsent;
    this.waiting = [];
    this.waitingHead = 0;
    this.unsent = [];
    for (const entry of [...waiting, ...unsent]) if (entry) this.settle(entry, undefined, new Error(reason));
  }

  private downError(): StoreUnavailableError {
    return new StoreUnavailableError(`Redis command failed: not connected to Redis (${this.downReason})`);
  }

  private async connect(): Promise<void> {
    const address = await this.options.locate();
    const socket = await openSocket(address, this.options.connectTimeoutMs);
    if (this.closing) {
      socket.destroy();
      throw new StoreUnavailableError('the store is closed');
    }
    this.socket = socket;
    this.loadedScripts = new Map();
    this.reader.reset();
    socket.on('data', (chunk: Buffer) => {
      try {
        this.reader.push(chunk);
      } catch (error) {
        socket.destroy(error as Error);
      }
    });
    socket.on('error', () => undefined);
    socket.once('close', () => this.onClose(socket));
    try {
      await withinDeadline(this.handshake(address), this.options.connectTimeoutMs);
    } catch (error) {
      // Not this connection's loss to handle (onClose): the caller retries, or start-up fails.
      this.socket = undefined;
      this.failAll('the connection setup failed');
      socket.destroy();
      throw error;
    }
    this.ready = true;
    this.reconnectAttempt = 0;
  }

  private async handshake(address: RedisAddress): Promise<void> {
    const steps: Promise<RespReply>[] = [];
    if (address.password !== undefined && address.password !== '') {
      steps.push(this.internal(address.username ? ['AUTH', address.username, address.password] : ['AUTH', address.password]));
    }
    if (address.db !== undefined && address.db !== 0) steps.push(this.internal(['SELECT', String(address.db)]));
    const role = address.mustBeMaster ? this.internal(['ROLE']) : undefined;
    // ROLE is awaited with the others: failed by the setup's deadline or the connection's loss, it must not be left unheard.
    const [, roleReply] = await Promise.all([Promise.all(steps.map((step) => step.then(failOnError))), role]);
    if (roleReply !== undefined) {
      const reply = failOnError(roleReply);
      if (!Array.isArray(reply) || reply[0] !== 'master') {
        throw new StoreUnavailableError(
          `the Redis at ${address.host}:${address.port} is not a master (ROLE ${String(Array.isArray(reply) ? reply[0] : reply)})`,
        );
      }
    }
  }

  private onClose(socket: net.Socket): void {
    if (this.socket !== socket) return;
    const wasReady = this.ready;
    this.socket = undefined;
    this.ready = false;
    this.downReason = 'the connection was lost';
    this.failAll('the connection to Redis was lost');
    // Lost during the setup, connect() fails and its caller retries: a second retry here would double the attempts
    // (and the sockets, sharing one reply queue) each time.
    if (!this.closing && wasReady) this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    this.reconnectAttempt += 1;
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      if (this.closing) return;
      this.connect().catch((error: unknown) => {
        this.downReason = `reconnecting: ${error instanceof Error ? error.message : String(error)}`;
        if (!this.closing && this.socket === undefined) this.scheduleReconnect();
      });
    }, this.options.reconnectDelayMs(this.reconnectAttempt));
    this.reconnectTimer.unref();
  }
}

function failOnError(reply: RespReply): RespReply {
  if (reply instanceof RedisReplyError) throw new StoreUnavailableError(`Redis refused the connection setup: ${reply.message}`);
  return reply;
}

function storeError(error: Error): StoreUnavailableError {
  if (error instanceof StoreUnavailableError) return error;
  return new StoreUnavailableError(`Redis command failed: ${error.message}`, { cause: error });
}

function openSocket(address: RedisAddress, timeoutMs: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = address.tls
      ? tls.connect({
          host: address.host,
          port: address.port,
          servername: net.isIP(address.host) ? undefined : address.host,
          ...address.tls,
        })
      : net.connect({ host: address.host, port: address.port, ...(address.family ? { family: address.family } : {}) });
    const ready = address.tls ? 'secureConnect' : 'connect';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new StoreUnavailableError(`cannot reach Redis at ${address.host}:${address.port}: no connection within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.once(ready, () => {
      clearTimeout(timer);
      socket.removeListener('error', onError);
      socket.setNoDelay(true);
      socket.setKeepAlive(true);
      resolve(socket);
    });
    const onError = (error: Error) => {
      clearTimeout(timer);
      reject(new StoreUnavailableError(`cannot reach Redis at ${address.host}:${address.port}: ${error.message}`, { cause: error }));
    };
    socket.once('error', onError);
  });
}
