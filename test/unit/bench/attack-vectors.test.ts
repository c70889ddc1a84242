import { HpackDecoder } from '../../../src/transport/http2/hpack-decoder';
import { FLAG, FRAME } from '../../support/raw-h2-frames';
import { MAX_FRAME_PAYLOAD, vectorById, type AttackState, type AttackUnit } from '../../bench/attack-vectors';
import { REQUEST_HEADERS } from '../../bench/h2-driver';

/**
 * The bench's attack vectors write the frames they are named for: decoded
 * back frame by frame, and their header blocks by the service's own HPACK
 * decoder, each holding the connection's table as a server would.
 */

interface Frame {
  type: number;
  flags: number;
  streamId: number;
  payload: Buffer;
}

function framesOf(unit: AttackUnit): Frame[] {
  const frames: Frame[] = [];
  for (let at = 0; at < unit.bytes.length;) {
    const length = unit.bytes.readUIntBE(at, 3);
    frames.push({
      type: unit.bytes[at + 3]!,
      flags: unit.bytes[at + 4]!,
      streamId: unit.bytes.readUInt32BE(at + 5),
      payload: unit.bytes.subarray(at + 9, at + 9 + length),
    });
    at += 9 + length;
  }
  expect(frames).toHaveLength(unit.frames);
  return frames;
}

const CHECK_FRAME = Buffer.from([0, 0, 0, 0, 3, 1, 2, 3]);
const newState = (): AttackState => ({
  nextStreamId: 1,
  openStreams: new Set(),
  serverMaxStreams: Number.POSITIVE_INFINITY,
  sendWindow: 65_535,
  checkFrame: CHECK_FRAME,
});

/** The header list of a HEADERS frame and its CONTINUATIONs, which must end with END_HEADERS. */
function headerList(decoder: HpackDecoder, frames: Frame[]): [string, string][] {
  expect(frames[0]!.type).toBe(FRAME.HEADERS);
  frames.slice(1).forEach((frame) => expect(frame.type).toBe(FRAME.CONTINUATION));
  frames.forEach((frame, index) => expect((frame.flags & FLAG.END_HEADERS) !== 0).toBe(index === frames.length - 1));
  const block = Buffer.concat(frames.map((frame) => frame.payload));
  const flat: string[] = [];
  decoder.decode(block, 0, block.length, flat);
  return Array.from({ length: flat.length / 2 }, (_, i) => [flat[2 * i]!, flat[2 * i + 1]!]);
}

const check = REQUEST_HEADERS.map(([name, value]) => [name, value]);

it('rapid reset with the Check message: a Check and its RST_STREAM CANCEL per stream, within the connection window', () => {
  const vector = vectorById('rapid-reset-check');
  const state = newState();
  const decoder = new HpackDecoder();
  for (const streamId of [1, 3]) {
    const [headers, data, reset] = framesOf(vector.next(state)!);
    expect(headerList(decoder, [headers!])).toEqual(check);
    expect(headers!.streamId).toBe(streamId);
    expect(data).toMatchObject({ type: FRAME.DATA, flags: FLAG.END_STREAM, streamId, payload: CHECK_FRAME });
    expect(reset).toMatchObject({ type: FRAME.RST_STREAM, streamId });
    expect(reset!.payload.readUInt32BE(0)).toBe(0x8);
  }
  state.sendWindow = CHECK_FRAME.length - 1;
  expect(vector.next(state)).toBeUndefined();
});

it('rapid reset, headers only: HEADERS without END_STREAM, then RST_STREAM', () => {
  const [headers, reset] = framesOf(vectorById('rapid-reset-headers').next(newState())!);
  expect(headerList(new HpackDecoder(), [headers!])).toEqual(check);
  expect(headers!.flags & FLAG.END_STREAM).toBe(0);
  expect(reset).toMatchObject({ type: FRAME.RST_STREAM, streamId: 1 });
});

it('malformed requests: one without :path, one with the pseudo-headers after a regular field', () => {
  const vector = vectorById('malformed-requests');
  const state = newState();
  const decoder = new HpackDecoder();
  const first = headerList(decoder, framesOf(vector.next(state)!));
  const second = headerList(decoder, framesOf(vector.next(state)!));
  expect(first.map(([name]) => name)).not.toContain(':path');
  expect(first.map(([name]) => name)).toContain(':method');
  const firstPseudo = second.findIndex(([name]) => name.startsWith(':'));
  expect(firstPseudo).toBeGreaterThan(0);
  expect(second.slice(0, firstPseudo).every(([name]) => !name.startsWith(':'))).toBe(true);
});

it('empty DATA: one stream opened, then zero-length DATA on it; a new stream once the server ended it', () => {
  const vector = vectorById('empty-data');
  const state = newState();
  const [headers, ...data] = framesOf(vector.next(state)!);
  expect(headers).toMatchObject({ type: FRAME.HEADERS, streamId: 1 });
  expect(headers!.flags & FLAG.END_STREAM).toBe(0);
  for (const frame of [...data, ...framesOf(vector.next(state)!)]) {
    expect(frame).toMatchObject({ type: FRAME.DATA, flags: 0, streamId: 1 });
    expect(frame.payload).toHaveLength(0);
  }
  state.openStreams.clear();
  expect(framesOf(vector.next(state)!)[0]).toMatchObject({ type: FRAME.HEADERS, streamId: 3 });
});

it('HPACK references: one large header inserted, then blocks that name it thousands of times, in frames a peer accepts', () => {
  const vector = vectorById('hpack-references');
  const state = newState();
  const decoder = new HpackDecoder();
  const inserted = headerList(decoder, framesOf(vector.opening!(state)));
  expect(inserted.at(-1)).toEqual(['x-large', 'v'.repeat(4_000)]);
  const frames = framesOf(vector.next(state)!);
  expect(frames.every((frame) => frame.payload.length <= MAX_FRAME_PAYLOAD && frame.streamId === 3)).toBe(true);
  const list = headerList(decoder, frames);
  expect(list.slice(0, check.length)).toEqual(check);
  const references = list.slice(check.length);
  expect(references.length).toBeGreaterThan(60_000);
  expect(references.every(([name, value]) => name === 'x-large' && value.length === 4_000)).toBe(true);
});

it('empty field names: a Check request, then thousands of empty names in one frame', () => {
  const decoder = new HpackDecoder();
  const frames = framesOf(vectorById('empty-field-names').next(newState())!);
  expect(frames).toHaveLength(1);
  const list = headerList(decoder, frames);
  expect(list.slice(0, check.length)).toEqual(check);
  expect(list.length - check.length).toBeGreaterThan(5_000);
  expect(list.slice(check.length).every(([name, value]) => name === '' && value === '')).toBe(true);
  expect(decoder.hasInvalidField).toBe(true);
});

it.each([
  ['continuation-flood', true],
  ['continuation-zero', false],
])('%s: HEADERS without END_HEADERS, then CONTINUATION on its stream that never ends the block', (id, full) => {
  const vector = vectorById(id);
  const state = newState();
  const [headers] = framesOf(vector.opening!(state));
  expect(headers).toMatchObject({ type: FRAME.HEADERS, streamId: 1 });
  expect(headers!.flags & FLAG.END_HEADERS).toBe(0);
  for (const frame of framesOf(vector.next(state)!)) {
    expect(frame).toMatchObject({ type: FRAME.CONTINUATION, flags: 0, streamId: 1 });
    expect(frame.payload.length > 0).toBe(full);
    expect(frame.payload.length).toBeLessThanOrEqual(MAX_FRAME_PAYLOAD);
  }
});

it('SETTINGS and PING floods: frames that each oblige an ACK, and the attacker does not read', () => {
  for (const [id, type, length] of [
    ['settings-flood', FRAME.SETTINGS, 6],
    ['ping-flood', FRAME.PING, 8],
  ] as const) {
    const vector = vectorById(id);
    expect(vector.reading).toBe('none');
    for (const frame of framesOf(vector.next(newState())!))
      expect(frame).toMatchObject({ type, flags: 0, streamId: 0, payload: expect.any(Buffer) });
    expect(framesOf(vector.next(newState())!)[0]!.payload).toHaveLength(length);
  }
});

it.each([
  ['zero-window', 'all', false],
  ['slow-read', 'slow', true],
])('%s: whole Checks up to the server stream limit, the window opened or not', (id, reading, openWindow) => {
  const vector = vectorById(id);
  expect(vector.reading).toBe(reading);
  expect(vector.openWindow).toBe(openWindow);
  if (!openWindow) expect(vector.settings).toContainEqual([0x4, 0]);
  const state = { ...newState(), serverMaxStreams: 2 };
  const decoder = new HpackDecoder();
  for (const streamId of [1, 3]) {
    const [headers, data] = framesOf(vector.next(state)!);
    expect(headerList(decoder, [headers!])).toEqual(check);
    expect(data).toMatchObject({ type: FRAME.DATA, flags: FLAG.END_STREAM, streamId, payload: CHECK_FRAME });
  }
  expect(vector.next(state)).toBeUndefined();
  state.openStreams.delete(1);
  expect(framesOf(vector.next(state)!)[0]!.streamId).toBe(5);
});
