import { DEFAULT_EXT_PROC_MAX_STREAMS, loadSettings } from '../../../src/platform/settings';
import { problemsOf } from '../../support/settings-results';

describe('EXT_PROC_MAX_STREAMS', () => {
  it('defaults to 5,000 when unset or blank', () => {
    expect(DEFAULT_EXT_PROC_MAX_STREAMS).toBe(5_000);
    for (const env of [{}, { EXT_PROC_MAX_STREAMS: '' }, { EXT_PROC_MAX_STREAMS: ' ' }]) {
      const result = loadSettings(env);
      expect(result.ok && result.settings.extProcMaxStreams).toBe(5_000);
    }
  });

  it.each([['1'], ['1000000'], ['2500']])('accepts %s', (value) => {
    const result = loadSettings({ EXT_PROC_MAX_STREAMS: value });
    expect(result.ok && result.settings.extProcMaxStreams).toBe(Number(value));
  });

  it.each([
    ['0', 'EXT_PROC_MAX_STREAMS: Too small: expected number to be >=1'],
    ['1000001', 'EXT_PROC_MAX_STREAMS: Too big: expected number to be <=1000000'],
    ['1.5', 'EXT_PROC_MAX_STREAMS: Invalid input: expected int, received number'],
    ['many', 'EXT_PROC_MAX_STREAMS: Invalid input: expected number, received NaN'],
  ])('refuses %s, naming the setting, with the other problems at once', (value, message) => {
    expect(problemsOf({ EXT_PROC_MAX_STREAMS: value, LOG_LEVEL: 'loud' })).toEqual([expect.stringMatching(/^LOG_LEVEL: /), message]);
  });
});
