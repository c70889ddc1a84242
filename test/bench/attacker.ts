/**
 * One attack vector (attack-vectors.ts) from a few connections, in a child
 * process of the bench (attacks.ts forks it), so that the normal client's
 * event loop is not the one flooding. Driven over IPC:
 *   parent → { prepare }   connect, send the preface, read the server's SETTINGS and ACK them;
 *   child  → { ready }
 *   parent → { go }        attack for durationMs, then read what the server sent for a moment, and close;
 *   child  → { result }    and exit.
 *
 * The attacker is a peer real enough to be an attack: it ACKs the server's
 * SETTINGS and PINGs (when its vector reads), keeps within the server's
 * connection window and stream limit where its vector sends DATA or holds
 * streams, and writes only while its socket takes the writes. A connection
 * the server closes is not opened again: the report says it was closed.
 */
import * as net from 'node:net';
import { FLAG, FRAME, rawFrame } from '../support/raw-h2-frames';
import { vectorById, type AttackState, type AttackVector } from './attack-vectors';

export interface AttackPrepare {
  type: 'prepare';
  vector: string;
  address: string;
  connections: number;
  /** The Check message, base64. */
  checkFrame: string;
}

export interface AttackGo {
  type: 'go';
  durationMs: number;
}

export interface AttackConnectionResult {
  frames: number;
  streams: number;
  bytes: number;
  /** The server's GOAWAY, if one was read (a vector that never reads sees it only in the moment after the attack). */
  goaway?: { code: number; lastStreamId: number };
  /** When the server closed the socket, from the start of the attack (negative: before it). */
  closedAtMs?: number;
}

export interface AttackResult {
  type: 'result';
  durationMs: number;
  connections: AttackConnectionResult[];
}

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
/** The window the attacker grants, so that a server's answers never wait on it (but in zero window). */
const OPEN_WINDOW = 1 << 30;
/** Bytes gathered into one socket write. */
const WRITE_BATCH_BYTES = 64 * 1024;
/** Slow read: this many bytes every SLOW_READ_EVERY_MS, a trickle (12.8 kB/s) against answers at thousands per second. */
const SLOW_READ_BYTES = 64;
const SLOW_READ_EVERY_MS = 5;
/** After the attack: how long the attacker reads what the server sent (its GOAWAY), writing nothing, before it closes. */
export const AFTER_ATTACK_READ_MS = 200;
const SETTINGS_MAX_CONCURRENT_STREAMS = 0x3;
const DEFAULT_WINDOW = 65_535;

class AttackConnection {
  readonly result: AttackConnectionResult = { frames: 0, streams: 0, bytes: 0 };
  private readonly state: AttackState;
  private inbox = Buffer.alloc(0);
  private received = 0;
  private attacking = false;
  private attackStartMs = 0;
  private closingOurselves = false;
  private waitingForDrain = false;
  private slowReader: NodeJS.Timeout | undefined;
  private settingsSeen: (() => void) | undefined;

  constructor(
    private readonly socket: net.Socket,
    private readonly vector: AttackVector,
    checkFrame: Buffer,
  ) {
    this.state = {
      nextStreamId: 1,
      openStreams: new Set(),
      serverMaxStreams: Number.POSITIVE_INFINITY,
      sendWindow: DEFAULT_WINDOW,
      checkFrame,
    };
    socket.on('error', () => undefined);
    socket.on('close', () => this.onClosed());
    // A server's FIN: it closed its side, and reads no more.
    socket.on('end', () => this.onClosed());
    socket.on('data', this.onData);
  }

  static async open(address: string, vector: AttackVector, checkFrame: Buffer): Promise<AttackConnection> {
    const at = address.lastIndexOf(':');
    const socket = net.connect({ host: address.slice(0, at), port: Number(address.slice(at + 1)), noDelay: true });
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', reject);
    });
    const connection = new AttackConnection(socket, vector, checkFrame);
    await connection.sendPreface();
    return connection;
  }

  /** The preface, SETTINGS and (but in zero window) a connection WINDOW_UPDATE; resolves at the server's SETTINGS. */
  private sendPreface(): Promise<void> {
    const settings = Buffer.alloc(this.vector.settings.length * 6);
    this.vector.settings.forEach(([id, value], index) => {
      settings.writeUInt16BE(id, index * 6);
      settings.writeUInt32BE(value, index * 6 + 2);
    });
    const increment = Buffer.alloc(4);
    increment.writeUInt32BE(OPEN_WINDOW - DEFAULT_WINDOW, 0);
    this.socket.write(
      Buffer.concat([
        PREFACE,
        rawFrame(FRAME.SETTINGS, 0, 0, settings),
        ...(this.vector.openWindow ? [rawFrame(FRAME.WINDOW_UPDATE, 0, 0, increment)] : []),
      ]),
    );
    return new Promise((resolve, reject) => {
      this.settingsSeen = resolve;
      this.socket.once('close', () => reject(new Error('the server closed the connection before its SETTINGS')));
    });
  }

  start(startMs: number): void {
    this.attackStartMs = startMs;
    this.attacking = true;
    if (this.vector.reading !== 'all') {
      this.socket.off('data', this.onData);
      this.socket.pause();
    }
    if (this.vector.reading === 'slow') {
      this.slowReader = setInterval(() => {
        const chunk = this.socket.read(SLOW_READ_BYTES) as Buffer | null;
        if (chunk) this.onData(chunk);
      }, SLOW_READ_EVERY_MS);
    }
    if (this.vector.opening) this.write([this.vector.opening(this.state)]);
    this.pump();
  }

  /** Stops writing; reads whatever comes until the connection is closed. */
  stop(): void {
    this.attacking = false;
    if (this.slowReader) clearInterval(this.slowReader);
    if (this.vector.reading !== 'all') {
      this.socket.on('data', this.onData);
      this.socket.resume();
    }
  }

  close(): void {
    this.closingOurselves = true;
    this.socket.destroy();
  }

  private get open(): boolean {
    return this.result.closedAtMs === undefined && !this.socket.destroyed;
  }

  /** Units while the socket takes them, a batch per write; the next batch after the event loop has turned (reads). */
  private readonly pump = (): void => {
    if (!this.attacking || !this.open || this.waitingForDrain) return;
    const units = [];
    let bytes = 0;
    while (bytes < WRITE_BATCH_BYTES) {
      const next = this.vector.next(this.state);
      // Nothing may be sent until the server's frames say so: onData pumps again.
      if (!next) break;
      units.push(next);
      bytes += next.bytes.length;
    }
    if (units.length === 0) return;
    if (this.write(units)) setImmediate(this.pump);
    else {
      this.waitingForDrain = true;
      this.socket.once('drain', () => {
        this.waitingForDrain = false;
        this.pump();
      });
    }
  };

  private write(units: { bytes: Buffer; frames: number; streams: number }[]): boolean {
    for (const unit of units) {
      this.result.frames += unit.frames;
      this.result.streams += unit.streams;
      this.result.bytes += unit.bytes.length;
    }
    return this.socket.write(units.length === 1 ? units[0]!.bytes : Buffer.concat(units.map((unit) => unit.bytes)));
  }

  private onClosed(): void {
    if (this.closingOurselves || this.result.closedAtMs !== undefined) return;
    this.result.closedAtMs = this.attackStartMs === 0 ? -1 : Date.now() - this.attackStartMs;
  }

  private readonly onData = (chunk: Buffer): void => {
    let buffer = this.inbox.length > 0 ? Buffer.concat([this.inbox, chunk]) : chunk;
    let offset = 0;
    while (buffer.length - offset >= 9) {
      const length = buffer.readUIntBE(offset, 3);
      if (buffer.length - offset < 9 + length) break;
      this.onFrame(
        buffer[offset + 3]!,
        buffer[offset + 4]!,
        buffer.readUInt32BE(offset + 5) & 0x7fffffff,
        buffer.subarray(offset + 9, offset + 9 + length),
      );
      offset += 9 + length;
    }
    buffer = buffer.subarray(offset);
    this.inbox = buffer.length > 0 ? Buffer.from(buffer) : Buffer.alloc(0);
    if (this.attacking) this.pump();
  };

  private onFrame(type: number, flags: number, streamId: number, payload: Buffer): void {
    switch (type) {
      case FRAME.SETTINGS:
        if (flags & FLAG.ACK) return;
        for (let at = 0; at + 6 <= payload.length; at += 6) {
          if (payload.readUInt16BE(at) === SETTINGS_MAX_CONCURRENT_STREAMS) this.state.serverMaxStreams = payload.readUInt32BE(at + 2);
        }
        this.socket.write(rawFrame(FRAME.SETTINGS, FLAG.ACK, 0));
        this.settingsSeen?.();
        this.settingsSeen = undefined;
        return;
      case FRAME.PING:
        if (!(flags & FLAG.ACK)) this.socket.write(rawFrame(FRAME.PING, FLAG.ACK, 0, payload));
        return;
      case FRAME.WINDOW_UPDATE:
        if (streamId === 0) this.state.sendWindow += payload.readUInt32BE(0) & 0x7fffffff;
        return;
      case FRAME.GOAWAY:
        this.result.goaway ??= { code: payload.readUInt32BE(4), lastStreamId: payload.readUInt32BE(0) & 0x7fffffff };
        return;
      case FRAME.RST_STREAM:
        this.state.openStreams.delete(streamId);
        return;
      case FRAME.DATA:
        this.received += payload.length;
        if (this.vector.openWindow && this.received >= OPEN_WINDOW / 2) {
          const increment = Buffer.alloc(4);
          increment.writeUInt32BE(this.received, 0);
          this.socket.write(rawFrame(FRAME.WINDOW_UPDATE, 0, 0, increment));
          this.received = 0;
        }
        if (flags & FLAG.END_STREAM) this.state.openStreams.delete(streamId);
        return;
      case FRAME.HEADERS:
        if (flags & FLAG.END_STREAM) this.state.openStreams.delete(streamId);
        return;
      default:
        return;
    }
  }
}

async function attack(prepare: AttackPrepare, go: Promise<AttackGo>): Promise<AttackResult> {
  const vector = vectorById(prepare.vector);
  const checkFrame = Buffer.from(prepare.checkFrame, 'base64');
  const connections = await Promise.all(
    Array.from({ length: prepare.connections }, () => AttackConnection.open(prepare.address, vector, checkFrame)),
  );
  process.send!({ type: 'ready' });
  const { durationMs } = await go;
  const startMs = Date.now();
  for (const connection of connections) connection.start(startMs);
  await new Promise((resolve) => setTimeout(resolve, durationMs));
  for (const connection of connections) connection.stop();
  await new Promise((resolve) => setTimeout(resolve, AFTER_ATTACK_READ_MS));
  for (const connection of connections) connection.close();
  return { type: 'result', durationMs: Date.now() - startMs, connections: connections.map((connection) => connection.result) };
}

function main(): void {
  let resolveGo: (go: AttackGo) => void = () => undefined;
  const go = new Promise<AttackGo>((resolve) => (resolveGo = resolve));
  process.on('message', (message: AttackPrepare | AttackGo) => {
    if (message.type === 'go') resolveGo(message);
    else
      attack(message, go).then(
        (result) => process.send!(result, () => process.exit(0)),
        (error: Error) => {
          process.stderr.write(`attacker (${message.vector}): ${error.message}\n`);
          process.exit(1);
        },
      );
  });
  // The bench gone: nothing to attack for.
  process.on('disconnect', () => process.exit(0));
}

// Imported by attacks.ts for its types and constants: the attack runs only in the forked child.
if (require.main === module) main();
