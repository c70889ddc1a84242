import type { DenyDecision } from '../../../src/check/decision';
import { randomBase62 } from '../../../src/keys/base62';
import { generateCustomerKey } from '../../../src/keys/customer-key';
import { logDecision, scrubPath } from '../../../src/check/decision-log';
import { LogCapture } from '../../support/log-capture';
import { registerSecrets } from '../../support/secret-scan';

/**
 * A confused client can put a key anywhere in a path: after a ':' in a Gemini
 * model segment, after `key=`, percent-encoded. Decision lines must never
 * carry it. Every secret here is made at run time and registered, so the
 * suite-wide scan checks these lines too.
 */
const customerKey = generateCustomerKey('live');
const googleKey = `AIza${randomBase62(35)}`;
const openAiKey = `sk-proj-${randomBase62(48)}`;
const anthropicKey = `sk-ant-api03-${randomBase62(93)}AA`;
registerSecrets(customerKey, googleKey, openAiKey, anthropicKey);

const percentEncoded = (text: string) => text.replace(/_/g, '%5F');
const fullyEncoded = (text: string) =>
  [...text].map((char) => `%${char.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`).join('');

const CASES: [label: string, path: string, secret: string][] = [
  ['a Google key after the model name', `/v1beta/models/gemini:${googleKey}`, googleKey],
  ['a Google key as the method', `/v1beta/models/gemini-2.5-flash:${googleKey}/x`, googleKey],
  ['an OpenAI key after key=', `/v1/key=${openAiKey}`, openAiKey],
  ['an Anthropic key after a comma', `/v1/messages,${anthropicKey}`, anthropicKey],
  ['a customer key with %5F for _', `/v1/${percentEncoded(customerKey)}`, customerKey],
  ['a customer key, every character encoded', `/v1/${fullyEncoded(customerKey)}/x`, customerKey],
  ['a customer key after key=', `/v1/chat/completions/key=${customerKey}`, customerKey],
  ['a Google key with %3A for :', `/v1beta/models/gemini%3A${googleKey}`, googleKey],
  ['a double-encoded customer key', `/v1/${customerKey.replace(/_/g, '%255F')}`, customerKey],
];

const route = { family: 'other', style: 'generic' } as const;

describe('decision lines never carry a key found inside a path segment', () => {
  it.each(CASES)('%s', (_label, path, secret) => {
    const logs = new LogCapture();
    const decision: DenyDecision = {
      kind: 'deny',
      route: { ...route, pathWithoutQuery: path },
      reason: 'missing_credential',
      message: 'm',
    };
    logDecision(logs.logger, decision, { requestId: 'r', method: 'POST', httpStatus: 401, durationMs: 1 });
    const [line] = logs.events('decision');
    expect(line?.path).toContain('[redacted]');
    expect(logs.leaksOf([secret])).toEqual([]);
    // Nor any recognisable part of it.
    expect(logs.lines.join('\n')).not.toContain(secret.slice(8, 30));
  });

  it('keeps ordinary paths as they are, escapes included', () => {
    for (const path of [
      '/v1/chat/completions',
      '/v1beta/models/gemini-2.5-flash:streamGenerateContent',
      '/v1/responses/resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b',
      '/v1/messages/batches/msgbatch_013Zva2CMHLNnXjNJJKqJ2EF',
      '/v1/files/disk-usage-report-2024-11-01',
      '/v1/a%20b/%E2%82%AC',
    ]) {
      expect(scrubPath(path)).toBe(path);
    }
  });

  it('redacts only the token that holds the key', () => {
    expect(scrubPath(`/v1beta/models/gemini:${googleKey}`)).toBe('/v1beta/models/gemini:[redacted]');
    expect(scrubPath(`/v1/key=${openAiKey}/x`)).toBe('/v1/key=[redacted]/x');
  });
});
