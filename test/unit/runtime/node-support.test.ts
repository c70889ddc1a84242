import { NODE_END_OF_LIFE, endOfLifeMessage, nodeSupport, runtimeVerdict } from '../../../src/platform/node-support';

const at = (iso: string) => Date.parse(iso);

describe('nodeSupport', () => {
  it('calls Node 20 end-of-life after its last day, and Node 24 supported', () => {
    expect(nodeSupport('20.20.2', at('2026-11-29T00:00:00Z'))).toEqual({ status: 'end-of-life', major: 20, endOfLife: '2026-04-30' });
    expect(nodeSupport('v24.22.3', at('2026-11-29T00:00:00Z'))).toEqual({ status: 'supported', major: 24, endOfLife: '2028-04-30' });
  });

  it('keeps a major supported through the whole of its last day (UTC) and not a millisecond after', () => {
    expect(nodeSupport('22.23.5', at('2027-04-30T23:59:59.999Z')).status).toBe('supported');
    expect(nodeSupport('22.23.5', at('2027-05-01T00:00:00.000Z')).status).toBe('end-of-life');
  });

  it('calls a major older than every listed one end-of-life, and one newer than the table unlisted', () => {
    const listed = Object.keys(NODE_END_OF_LIFE).map(Number);
    expect(nodeSupport(`${Math.min(...listed) - 2}.20.0`, at('2026-11-29T00:00:00Z'))).toEqual({
      status: 'end-of-life',
      major: Math.min(...listed) - 2,
      endOfLife: undefined,
    });
    expect(nodeSupport(`${Math.max(...listed) + 1}.0.0`, at('2026-11-29T00:00:00Z'))).toEqual({
      status: 'unlisted',
      major: Math.max(...listed) + 1,
    });
  });

  it('lists every date as a real calendar day', () => {
    for (const date of Object.values(NODE_END_OF_LIFE)) expect(new Date(`${date}T00:00:00Z`).toISOString().slice(0, 10)).toBe(date);
  });
});

describe('runtimeVerdict', () => {
  const eol = nodeSupport('20.20.2', at('2026-11-29T00:00:00Z'));
  const supported = nodeSupport('24.22.3', at('2026-11-29T00:00:00Z'));

  it.each([
    ['development, end-of-life', eol, { production: false, allowEndOfLifeNode: false }, 'warn'],
    ['production, end-of-life', eol, { production: true, allowEndOfLifeNode: false }, 'refuse'],
    ['production, end-of-life, allowed', eol, { production: true, allowEndOfLifeNode: true }, 'warn'],
    ['production, supported', supported, { production: true, allowEndOfLifeNode: false }, 'start'],
    ['production, unlisted (newer)', nodeSupport('99.0.0', 0), { production: true, allowEndOfLifeNode: false }, 'start'],
  ] as const)('%s: %s', (_name, support, policy, verdict) => {
    expect(runtimeVerdict(support, policy)).toBe(verdict);
  });

  it('names the version, the major and the day support ended', () => {
    if (eol.status !== 'end-of-life') throw new Error('expected end-of-life');
    expect(endOfLifeMessage(eol, '20.20.2')).toMatch(
      /Node\.js 20\.20\.2 is end-of-life: its major \(20\) stopped getting security fixes on 2026-04-30/,
    );
  });
});
