import { runCli } from '../support/built-cli';

/** The built `gateway-authz serve` refuses admin settings that cannot work, before it listens on anything. */
describe('gateway-authz serve with bad admin settings', () => {
  it('exits 2 when ADMIN_TOKEN holds whitespace (it could never match), naming the problem and not the token', async () => {
    const token = 'first-half-of-it second-half-of-it';
    const run = await runCli(['serve'], { ADMIN_TOKEN: token, GRPC_PORT: '0', ADMIN_PORT: '0' });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(
      "ADMIN_TOKEN: must not contain whitespace: 'Authorization: Bearer <token>' carries one word, so such a token could never match",
    );
    expect(run.stderr + run.stdout).not.toContain('second-half-of-it');
  });

  it('lists the whitespace problem together with bad limits, all at once', async () => {
    const run = await runCli(['serve'], {
      ADMIN_TOKEN: 'has a space inside it',
      ADMIN_AUTH_FAILURES_PER_ADDRESS: '0',
      ADMIN_AUTH_FAILURE_WINDOW_MS: 'a minute',
    });
    expect(run.code).toBe(2);
    for (const name of ['ADMIN_TOKEN', 'ADMIN_AUTH_FAILURES_PER_ADDRESS', 'ADMIN_AUTH_FAILURE_WINDOW_MS'])
      expect(run.stderr).toContain(name);
  });
});
