import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { categoryOf, denial, DENY_REASONS, grpcCodeOf, httpStatusOf, RPC_CODE, type DenyReason } from '../../../src/check/deny-reasons';

const ALL_REASONS = Object.keys(DENY_REASONS) as DenyReason[];

/** The errors table of docs/reference/errors.md: `| 401 | \`missing_credential\` | when … |` rows. */
function documentedErrorRows(): { status: number; reason: string }[] {
  const page = readFileSync(join(__dirname, '..', '..', '..', 'docs', 'reference', 'errors.md'), 'utf8');
  const section = page.slice(0, page.indexOf('## Body per client style'));
  return [...section.matchAll(/^\| (\d{3}) \| `([a-z_]+)` \|/gm)].map((match) => ({ status: Number(match[1]), reason: match[2]! }));
}

describe('the deny-reason catalogue', () => {
  it('declares status, gRPC code and category together, and they agree for every reason', () => {
    const expected = {
      400: { grpcCode: RPC_CODE.INVALID_ARGUMENT, category: 'invalid_request' },
      401: { grpcCode: RPC_CODE.UNAUTHENTICATED, category: 'authentication' },
      402: { grpcCode: RPC_CODE.PERMISSION_DENIED, category: 'billing' },
      403: { grpcCode: RPC_CODE.PERMISSION_DENIED, category: 'permission' },
      404: { grpcCode: RPC_CODE.NOT_FOUND, category: 'not_found' },
      429: { grpcCode: RPC_CODE.RESOURCE_EXHAUSTED, category: 'rate_limit' },
      503: { grpcCode: RPC_CODE.UNAVAILABLE, category: 'unavailable' },
    } as const;
    for (const reason of ALL_REASONS) {
      const status = httpStatusOf(reason);
      expect({ reason, grpcCode: grpcCodeOf(reason), category: categoryOf(reason) }).toEqual({ reason, ...expected[status] });
    }
  });

  it('fills each template with what it is given, and only that', () => {
    expect(denial('unknown_key', { keyPrefix: 'gk_live_AbC4' })).toEqual({
      reason: 'unknown_key',
      message: "Invalid API key gk_live_AbC4…. Check that you copied the whole key from the dashboard's API Keys section.",
    });
    expect(denial('missing_credential', { ways: ['Authorization: Bearer <key>'] }).message).toBe(
      "Missing API key. Send it as 'Authorization: Bearer <key>'. Create a customer API key in the dashboard under API Keys.",
    );
    expect(
      denial('missing_credential', { ways: ['x-api-key: <key>', 'Authorization: Bearer <key>'], unreadHeader: 'x-goog-api-key' }).message,
    ).toBe(
      "This route does not read the API key from the 'x-goog-api-key' header. Send it as 'x-api-key: <key>' or 'Authorization: Bearer <key>'.",
    );
    expect(denial('unsupported_version', { header: 'anthropic-version', accepted: ['2023-06-01', '2026-10-21'] }).message).toBe(
      "The 'anthropic-version' header must be a date-form API version this gateway accepts. Accepted values: '2023-06-01', '2026-10-21'.",
    );
    expect(denial('rate_limited', { limit: 100, window: '1m', scope: 'account', retryInSeconds: 7 }).message).toBe(
      'Rate limit reached: 100 requests per 1m for this account. Retry in 7 s.',
    );
    expect(denial('token_budget_exhausted', { tokens: 100_000, window: '1m', scope: 'key', retryInSeconds: 3 }).message).toBe(
      'Token budget reached: 100000 tokens per 1m for this API key. Retry in 3 s.',
    );
    expect(denial('budget_exceeded', { keyPrefix: 'gk_live_AbC4', scope: 'account', cap: '$0.005' }).message).toBe(
      'The monthly spend cap of the account of API key gk_live_AbC4… ($0.005) is reached. ' +
        'It resets at the start of next month (UTC); raise the cap to continue sooner. Retrying will not help until then.',
    );
    expect(denial('upstream_key_not_accepted', { where: 'x-api-key', provider: 'OpenAI' }).message).toContain(
      'looks like an OpenAI API key',
    );
    expect(denial('upstream_key_not_accepted', { where: 'x-api-key', provider: 'Google' }).message).toContain(
      'looks like a Google API key',
    );
  });

  it('query_key_not_removable names the raw parameter and how to send the key instead', () => {
    const { message } = denial('query_key_not_removable', {
      rawName: 'k%65y',
      parameter: 'key',
      ways: ['x-goog-api-key: <key>', 'Authorization: Bearer <key>'],
    });
    expect(message).toContain("'k%65y' reads as 'key'");
    expect(message).toContain('cannot remove it before the request goes upstream');
    expect(message).toContain("'x-goog-api-key: <key>' or 'Authorization: Bearer <key>'");
    expect(denial('query_key_not_removable', { rawName: '%6B%65%79', parameter: 'key', ways: [] }).message).toContain(
      'Remove the parameter',
    );
  });

  it('the errors table of docs/reference/errors.md lists every reason with its status, and nothing else', () => {
    const rows = documentedErrorRows();
    expect(rows.map((row) => row.reason).sort()).toEqual([...ALL_REASONS].sort());
    // A restriction refusal is 403 in every style but OpenAI's, whose restricted keys get 401: the table says both.
    for (const row of rows)
      expect({ reason: row.reason, status: row.status }).toEqual({ reason: row.reason, status: httpStatusOf(row.reason as DenyReason) });
  });

  it('answers a restriction refusal 401 in the OpenAI style and 403 in every other, never naming what the key may do', () => {
    for (const reason of ['address_not_permitted', 'endpoint_not_permitted', 'model_not_permitted', 'model_not_readable'] as const) {
      expect([httpStatusOf(reason, 'chat'), httpStatusOf(reason, 'messages'), httpStatusOf(reason, 'generative')]).toEqual([401, 403, 403]);
      expect(httpStatusOf(reason, 'generic')).toBe(403);
    }
    expect(denial('model_not_permitted', { model: 'gpt-4o' }).message).toMatch(
      /^This API key has insufficient permissions .* Missing permission: model /,
    );
    expect(denial('endpoint_not_permitted', { readOnly: true }).message).toContain('read-only');
  });
});
