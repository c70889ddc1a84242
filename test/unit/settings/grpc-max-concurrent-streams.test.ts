import { DEFAULT_GRPC_MAX_CONCURRENT_STREAMS, loadSettings } from '../../../src/platform/settings';

describe('GRPC_MAX_CONCURRENT_STREAMS', () => {
  it('defaults to 100 (Envoy’s own downstream value, and RFC 9113’s recommended minimum) when unset or blank', () => {
    expect(DEFAULT_GRPC_MAX_CONCURRENT_STREAMS).toBe(100);
    for (const env of [{}, { GRPC_MAX_CONCURRENT_STREAMS: '' }]) {
      const result = loadSettings(env);
      expect(result.ok && result.settings.grpcMaxConcurrentStreams).toBe(100);
    }
  });

  it.each([['1'], ['10000'], ['32']])('accepts %s', (value) => {
    const result = loadSettings({ GRPC_MAX_CONCURRENT_STREAMS: value });
    expect(result.ok && result.settings.grpcMaxConcurrentStreams).toBe(Number(value));
  });

  it.each([
    ['0', 'GRPC_MAX_CONCURRENT_STREAMS: Too small: expected number to be >=1'],
    ['10001', 'GRPC_MAX_CONCURRENT_STREAMS: Too big: expected number to be <=10000'],
    ['2.5', 'GRPC_MAX_CONCURRENT_STREAMS: Invalid input: expected int, received number'],
    ['many', 'GRPC_MAX_CONCURRENT_STREAMS: Invalid input: expected number, received NaN'],
  ])('refuses %s, naming the setting', (value, message) => {
    const result = loadSettings({ GRPC_MAX_CONCURRENT_STREAMS: value });
    expect(result.ok ? [] : result.problems).toEqual([message]);
  });
});
