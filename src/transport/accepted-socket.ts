import * as net from 'node:net';

/** What libuv asks for a stream read, and the size of the buffer Node allocates for each read by default. */
export const READ_BUFFER_BYTES = 64 * 1024;

/**
 * The one buffer every adopted socket reads into. Reads run one at a time on the event loop thread, and each is
 * handled before the next begins, so one buffer serves them all: a connection that reads nothing holds nothing.
 */
let sharedReadBuffer: Buffer | undefined;

/**
 * Takes over a connection a net.Server accepted with `pauseOnConnect` (so nothing was read yet): a new socket on the
 * same handle reads into one buffer shared by every such socket (Node's `onread` option) and hands each read to
 * `onRead`. The accepted socket lets go of the handle and is destroyed without closing the connection, so the
 * net.Server no longer counts it: the caller counts its own connections.
 *
 * Why: by default Node allocates 64 KiB for every read and keeps what was read as a new Buffer. Flooded with Checks,
 * that was over 100 MB/s through malloc; the buffers that lived through two scavenges waited for a mark-compact, and
 * the heap glibc grew for them stayed in RSS. net.Server takes no `onread`, hence the handover (`handle` is how Node
 * itself gives an accepted handle to a Socket).
 *
 * The bytes given to `onRead` are valid only during the call: the next read, on any connection, overwrites them, so
 * whatever is kept past it must be copied. Undefined when the connection is already gone.
 */
export function readIntoOneBuffer(accepted: net.Socket, onRead: (bytes: Buffer) => void): net.Socket | undefined {
  const wrapper = accepted as unknown as { _handle: object | null };
  const handle = wrapper._handle;
  if (handle === null || accepted.destroyed) {
    accepted.destroy();
    return undefined;
  }
  wrapper._handle = null;
  accepted.destroy();
  const buffer = (sharedReadBuffer ??= Buffer.allocUnsafe(READ_BUFFER_BYTES));
  const options: net.SocketConstructorOpts & { handle: object } = {
    handle,
    readable: true,
    writable: true,
    onread: {
      buffer,
      callback: (bytes) => {
        onRead(buffer.subarray(0, bytes));
        // Never false (which would pause): the reader pauses the socket itself when it must.
        return true;
      },
    },
  };
  return new net.Socket(options);
}
