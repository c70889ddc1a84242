import type { AllowDecision, DenyDecision } from '../../../src/check/decision';
import { logDecision, scrubPath, shouldLogDecision } from '../../../src/check/decision-log';
import { LogCapture } from '../../support/log-capture';

const route = { family: 'chat-completions', style: 'chat', pathWithoutQuery: '/v1/chat/completions' } as const;
const allow: AllowDecision = {
  kind: 'allow',
  route,
  identity: { accountId: 'acme', keyId: 'key_1', keyPrefix: 'gk_live_AbC4', environment: 'live' },
  strip: { headers: ['authorization'], queryParameters: [] },
};
const deny: DenyDecision = { kind: 'deny', route, reason: 'unknown_key', message: 'no', keyPrefix: 'gk_live_AbC4' };
const context = { requestId: 'req-1', method: 'POST', httpStatus: 200, durationMs: 0.5 };

describe('DECISION_LOG_SAMPLE', () => {
  it('logs every decision at 1 (the default)', () => {
    expect(shouldLogDecision(allow, 1, () => 0.999)).toBe(true);
    expect(shouldLogDecision(deny, 1, () => 0.999)).toBe(true);
  });

  it('always logs denials, and allowed decisions with the given probability', () => {
    expect(shouldLogDecision(deny, 0, () => 0)).toBe(true);
    expect(shouldLogDecision(deny, 0.01, () => 0.5)).toBe(true);
    expect(shouldLogDecision(allow, 0, () => 0)).toBe(false);
    expect(shouldLogDecision(allow, 0.01, () => 0.5)).toBe(false);
    expect(shouldLogDecision(allow, 0.01, () => 0.005)).toBe(true);
    let draws = 0;
    const random = () => ((draws += 1) % 100) / 100;
    const logged = Array.from({ length: 1000 }, () => shouldLogDecision(allow, 0.1, random)).filter(Boolean).length;
    expect(logged).toBe(100);
  });

  it('marks a sampled allow line with its sample rate, so counts can be scaled back', () => {
    const logs = new LogCapture();
    logDecision(logs.logger, allow, { ...context, sampleRate: 0.01 });
    logDecision(logs.logger, deny, { ...context, httpStatus: 401, sampleRate: 0.01 });
    logDecision(logs.logger, allow, context);
    const [sampled, denied, full] = logs.events('decision');
    expect(sampled).toMatchObject({ result: 'allow', sampleRate: 0.01 });
    expect(denied).toMatchObject({ result: 'deny', reason: 'unknown_key' });
    expect(denied).not.toHaveProperty('sampleRate');
    expect(full).not.toHaveProperty('sampleRate');
  });
});

describe('scrubPath', () => {
  it('replaces key-shaped segments, also on repeated calls with the same path', () => {
    const key = `gk_live_${'A'.repeat(36)}`;
    for (let i = 0; i < 3; i += 1) {
      expect(scrubPath('/v1/chat/completions')).toBe('/v1/chat/completions');
      expect(scrubPath(`/v1/${key}/x`)).toBe('/v1/[redacted]/x');
      expect(scrubPath('/v1/sk-ant-api03-abcdefghijklmnop')).toBe('/v1/[redacted]');
    }
  });

  it('truncates long paths', () => {
    expect(scrubPath(`/${'p'.repeat(300)}`)).toHaveLength(201);
  });
});
