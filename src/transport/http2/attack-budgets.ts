/**
 * What one HTTP/2 connection may cost this side before it is told
 * ENHANCE_YOUR_CALM and closed: the budgets mature stacks keep against
 * rapid reset (CVE-2023-44487), reset floods and empty frames (CVE-2019-9514,
 * 9518). Plain integer counters, touched once per frame at most; the only
 * clock read is the caller's, once per socket read (`tick`). The operators'
 * view of them is docs/design/http2-attack-budgets.md.
 */

/** The budget a connection overran: the label of its count. */
export type AttackBudget = 'client_resets' | 'local_resets' | 'empty_frames' | 'control_frames' | 'header_block';

/** The windowed budgets (local resets, empty frames) start afresh this often. */
const BUDGET_WINDOW_MS = 10_000;
/**
 * client_resets trips once the client has reset at least this many streams, and more than half of those it opened,
 * as Envoy's premature-reset check does (over 50 % reset), but judged from 100 resets rather than Envoy's 500
 * requests: a stream reset here has often started its Check (a Redis call) already, and 500 of those from each of a
 * few attacking connections held the other connections' Checks past 50 ms in `npm run bench -- --attacks`. A share, not a rate: Envoy cancels an
 * ext_authz call (RST_STREAM CANCEL) whenever its downstream request goes away first, so the resets of a busy,
 * honest connection grow with its traffic, and a rate (nghttp2's 33/s after a burst of 1,000) would cut a gateway
 * doing 5,000 Checks/s with 1 % of them cancelled. A connection whose streams are mostly reset does no useful work.
 */
const MIN_CLIENT_RESETS_JUDGED = 100;
/** The stream window of client_resets: at this many streams both counts are halved, so old traffic fades (no clock). */
const RESET_WINDOW_STREAMS = 1000;
/**
 * local_resets: streams this side refuses or resets for the client's fault (malformed, over the stream limit, over
 * the header list limit, flow control), per window. hyperium/h2 allows 1,024 per connection. Envoy never sends a
 * malformed request, nor more streams than SETTINGS_MAX_CONCURRENT_STREAMS once it has read them; 1,000 leaves a
 * client that raced the SETTINGS at connect time its whole first burst (Envoy's circuit breaker stops at 1,024).
 */
const MAX_LOCAL_RESETS_PER_WINDOW = 1000;
/**
 * A stream refused for its header block counts one local reset per this many octets of the block (and one at least):
 * decoding is the work such a stream costs, and a block may be 4 × SETTINGS_MAX_HEADER_LIST_SIZE on the wire, all of it
 * read to keep the HPACK table in step. So 1,000 small malformed requests close a connection, and about 30 blocks of
 * 16 KiB or 8 of 64 KiB do (512 KiB of refused blocks): at one reset per 2 KiB, the 2 MiB that four connections each
 * sent of empty names or of references to a large entry before they were closed held the other connections' Checks
 * at about 50 ms for the first 100 ms of the flood in `npm run bench -- --attacks`. Envoy never sends a block this
 * side refuses.
 */
export const HEADER_BLOCK_OCTETS_PER_RESET = 512;
/**
 * empty_frames: DATA without payload or END_STREAM, HEADERS or CONTINUATION fragments without bytes or END_HEADERS,
 * per window. No client sends them but by accident (Envoy allows one in a row, Apache Traffic Server a configured
 * number per minute); each still costs a frame's handling, and a flood of them is CVE-2019-9518.
 */
const MAX_EMPTY_FRAMES_PER_WINDOW = 100;
/**
 * control_frames: PINGs and SETTINGS that ask for an ACK, per window. Each ACK is output the client may never read
 * (CVE-2019-9512, 9515); reading stops once 1 MiB of output waits, which protects memory but leaves the flooding
 * connection open forever. nghttp2 closes a connection with more than 1,000 ACKs queued; a well-behaved client sends a
 * keepalive PING every few seconds at most (Envoy's `connection_keepalive`, gRPC's keepalive, which grpc-go itself
 * polices at one per 5 minutes by default) and SETTINGS a handful of times per connection.
 */
const MAX_CONTROL_FRAMES_PER_WINDOW = 1000;

export class AttackBudgets {
  private windowStartMs = -BUDGET_WINDOW_MS;
  private localResets = 0;
  private emptyFrames = 0;
  private controlFrames = 0;
  /** Streams the client opened and streams it reset, both halved at RESET_WINDOW_STREAMS: their ratio is what counts. */
  private streams = 0;
  private clientResets = 0;

  /** Once per socket read, with a coarse clock: a window that is over starts afresh. */
  tick(nowMs: number): void {
    if (nowMs - this.windowStartMs < BUDGET_WINDOW_MS) return;
    this.windowStartMs = nowMs;
    this.localResets = 0;
    this.emptyFrames = 0;
    this.controlFrames = 0;
  }

  /** The client opened a stream (served, refused or reset by this side alike). */
  streamOpened(): void {
    this.streams += 1;
    if (this.streams >= RESET_WINDOW_STREAMS) {
      this.streams >>= 1;
      this.clientResets >>= 1;
    }
  }

  /** The client reset a stream; false when that overruns client_resets. */
  clientReset(): boolean {
    this.clientResets += 1;
    return this.clientResets < MIN_CLIENT_RESETS_JUDGED || this.clientResets * 2 <= this.streams;
  }

  /** This side refused or reset a stream for the client's fault; false when that overruns local_resets. */
  localReset(weight = 1): boolean {
    this.localResets += weight;
    return this.localResets <= MAX_LOCAL_RESETS_PER_WINDOW;
  }

  /** A frame that carries nothing; false when that overruns empty_frames. */
  emptyFrame(): boolean {
    this.emptyFrames += 1;
    return this.emptyFrames <= MAX_EMPTY_FRAMES_PER_WINDOW;
  }

  /** A PING or SETTINGS that asks for an ACK; false when that overruns control_frames. */
  controlFrame(): boolean {
    this.controlFrames += 1;
    return this.controlFrames <= MAX_CONTROL_FRAMES_PER_WINDOW;
  }
}

/**
 * Fairness: a connection handles at most this many frames, or this many bytes, per turn of the event loop, then
 * leaves the rest of its read for a later turn (setImmediate) so that the other connections' reads come first; Node
 * hands over up to 2 MiB of one socket per turn, which a flood fills. A busy Envoy connection brings about 64 Checks
 * in a read, each a HEADERS and a DATA frame of a few hundred bytes to a few KiB, so one such read stays one turn;
 * 512 of the cheapest frames that cost work (a stream opened and reset) take about a millisecond.
 */
export const MAX_FRAMES_PER_TURN = 512;
export const MAX_BYTES_PER_TURN = 256 * 1024;
