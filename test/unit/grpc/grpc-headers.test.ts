import fc from 'fast-check';
import { percentEncodeGrpcMessage } from '../../../src/transport/grpc-message';
import { parseGrpcTimeoutMs } from '../../../src/transport/grpc-timeout';

describe('grpc-timeout', () => {
  it.each([
    ['1H', 3_600_000],
    ['2M', 120_000],
    ['3S', 3_000],
    ['200m', 200],
    ['0m', 0],
    ['1500u', 2],
    ['1000u', 1],
    ['1n', 1],
    ['99999999H', 99_999_999 * 3_600_000],
    ['00000200m', 200], // leading zeros count among the 8 digits
    ['000000200m', undefined],
    ['12345678m', 12_345_678],
  ])('%s → %s ms', (value, ms) => {
    expect(parseGrpcTimeoutMs(value)).toBe(ms);
  });

  it.each(['', 'm', '5', '5s', '5h', '5 m', '-5m', '+5m', '5.0S', '5mm', 'x5m', '123456789S', '５m'])('refuses %p', (value) => {
    expect(parseGrpcTimeoutMs(value)).toBeUndefined();
  });

  it('never gives a call less time than it asked for', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 99_999_999 }), fc.constantFrom('S', 'm', 'u', 'n'), (amount, unit) => {
        const perUnitNs = { S: 1e9, m: 1e6, u: 1e3, n: 1 }[unit];
        const ms = parseGrpcTimeoutMs(`${amount}${unit}`)!;
        expect(ms * 1e6).toBeGreaterThanOrEqual(amount * perUnitNs);
        expect(ms * 1e6 - amount * perUnitNs).toBeLessThan(1e6);
      }),
    );
  });
});

describe('grpc-message', () => {
  it('passes printable ASCII except % unchanged, as the same string', () => {
    const text = 'overloaded: 256 Checks in flight (MAX_CHECKS_IN_FLIGHT); try another replica';
    expect(percentEncodeGrpcMessage(text)).toBe(text);
  });

  it('percent-encodes %, control characters and every byte of non-ASCII UTF-8', () => {
    expect(percentEncodeGrpcMessage('100%')).toBe('100%25');
    expect(percentEncodeGrpcMessage('a\nb\tc\u0000\u007f')).toBe('a%0Ab%09c%00%7F');
    expect(percentEncodeGrpcMessage('ü✓日')).toBe('%C3%BC%E2%9C%93%E6%97%A5');
    expect(percentEncodeGrpcMessage('😀')).toBe('%F0%9F%98%80');
  });

  it('gives a valid header value that decodes back to the text, for any text', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme' }), (text) => {
        const encoded = percentEncodeGrpcMessage(text);
        expect(encoded).toMatch(/^[\x20-\x7e]*$/);
        expect(decodeURIComponent(encoded)).toBe(text);
      }),
    );
  });
});
