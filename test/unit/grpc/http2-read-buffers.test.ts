import type * as net from 'node:net';
import { Duplex } from 'node:stream';
import { Http2Connection, type ServerStream, type StreamListener } from '../../../src/transport/http2/connection';
import { CLIENT_PREFACE } from '../../../src/transport/http2/frames';
import { grpcFrame } from '../../support/raw-grpc';
import { FLAG, FRAME, grpcRequestBlock, rawFrame } from '../../support/raw-h2-frames';

/**
 * What the connection keeps of the socket's reads. Node hands each read over in a buffer of its own (up to 64 KiB)
 * that the connection may not keep past the read: under load, a view kept until the connection's next read lives
 * through scavenges, is promoted, and its whole buffer is freed only by a mark-compact. These tests hand the
 * connection reads through a socket of their own, then overwrite each read once it has been handed over: whatever
 * the connection kept of it as a view would change under it.
 */
class ScriptedSocket extends Duplex {
  readonly written: Buffer[] = [];
  override _read(): void {}
  override _write(chunk: Buffer, _encoding: BufferEncoding, done: () => void): void {
    this.written.push(chunk);
    done();
  }
  /** One read: handed to the connection, then scribbled over. */
  deliver(bytes: Buffer): void {
    const read = Buffer.from(bytes);
    this.emit('data', read);
    read.fill(0xee);
  }
}

interface Heard {
  paths: string[];
  messages: Buffer[];
}

function connectionOn(socket: ScriptedSocket): Heard {
  const heard: Heard = { paths: [], messages: [] };
  new Http2Connection(
    socket as unknown as net.Socket,
    { maxConcurrentStreams: 100, maxHeaderListBytes: 16_384 },
    {
      stream(_stream: ServerStream, headers: readonly string[]): StreamListener {
        heard.paths.push(headers[headers.indexOf(':path') + 1]!);
        return {
          onData: (chunk) => heard.messages.push(Buffer.from(chunk)),
          onEnd: () => undefined,
          onClose: () => undefined,
        };
      },
      closed: () => undefined,
      error: (error) => {
        throw error;
      },
    },
  );
  return heard;
}

function request(streamId: number, body: string): Buffer {
  return Buffer.concat([
    rawFrame(FRAME.HEADERS, FLAG.END_HEADERS, streamId, grpcRequestBlock(`/test.Echo/Call${streamId}`)),
    rawFrame(FRAME.DATA, FLAG.END_STREAM, streamId, grpcFrame(Buffer.from(body))),
  ]);
}

const opening = Buffer.concat([CLIENT_PREFACE, rawFrame(FRAME.SETTINGS, 0, 0)]);

describe('the reads a connection keeps', () => {
  it.each([
    ['in its frame header', 4],
    ['in its payload', 30],
  ])('copies a frame a read cut %s, so the next read completes it whole', (_where, cutAfter) => {
    const socket = new ScriptedSocket();
    const heard = connectionOn(socket);
    const bytes = Buffer.concat([opening, request(1, 'first'), request(3, 'second')]);
    const cut = opening.length + request(1, 'first').length + cutAfter;
    socket.deliver(bytes.subarray(0, cut));
    socket.deliver(bytes.subarray(cut));
    expect(heard.paths).toEqual(['/test.Echo/Call1', '/test.Echo/Call3']);
    expect(heard.messages.map((message) => message.subarray(5).toString())).toEqual(['first', 'second']);
  });

  it('reads every frame of a request cut into reads of every size, each read overwritten once handed over', () => {
    const bytes = Buffer.concat([opening, ...Array.from({ length: 20 }, (_, i) => request(2 * i + 1, `message ${i}`))]);
    for (const size of [1, 2, 3, 7, 9, 10, 17, 64, 100, 333]) {
      const socket = new ScriptedSocket();
      const heard = connectionOn(socket);
      for (let at = 0; at < bytes.length; at += size) socket.deliver(bytes.subarray(at, at + size));
      expect(heard.messages.map((message) => message.subarray(5).toString())).toEqual(Array.from({ length: 20 }, (_, i) => `message ${i}`));
    }
  });
});
