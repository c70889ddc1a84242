/**
 * `grpc-timeout` (PROTOCOL-HTTP2.md): 1 to 8 ASCII digits and one unit,
 * H M S m u n. Returns the timeout in milliseconds, or undefined when the
 * value is malformed (the caller answers INTERNAL, as grpc-js and grpc-go do).
 *
 * Stricter than grpc-js, whose unanchored pattern takes "200mabc" or "x1S";
 * like grpc-go, which reads the whole value.
 */
const MS_PER_UNIT: Readonly<Record<string, number>> = {
  H: 3_600_000,
  M: 60_000,
  S: 1_000,
  m: 1,
  u: 0.001,
  n: 0.000_001,
};

export function parseGrpcTimeoutMs(value: string): number | undefined {
  const length = value.length;
  if (length < 2 || length > 9) return undefined;
  const perUnit = MS_PER_UNIT[value[length - 1]!];
  if (perUnit === undefined) return undefined;
  let amount = 0;
  for (let i = 0; i < length - 1; i += 1) {
    const digit = value.charCodeAt(i) - 48;
    if (digit < 0 || digit > 9) return undefined;
    amount = amount * 10 + digit;
  }
  // Sub-millisecond remainders round up: a call is never given less time than it asked for.
  return Math.ceil(amount * perUnit);
}
