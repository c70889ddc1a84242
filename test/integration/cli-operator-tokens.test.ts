import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ApiCreatedOperatorToken, ApiOperatorTokenList } from '../../src/cli/api-types';
import { runCli } from '../support/built-cli';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { registerSecrets } from '../support/secret-scan';
import { startAppUnderTest, TEST_ADMIN_TOKEN, type AppUnderTest } from '../support/running-app';

/** `gateway-authz operator-tokens` (the built CLI) against the service on a real Redis, the token read from a file. */
let redis: TestRedis;
let server: AppUnderTest;

beforeAll(async () => {
  redis = await startTestRedis();
  server = await startAppUnderTest({ redisUrl: redis.url });
});
afterAll(async () => {
  await server?.close();
  await redis?.stop();
});

it('creates a token once, uses it from OPERATOR_TOKEN_FILE, lists and revokes it; then the CLI is refused with it', async () => {
  const created = await runCli(
    ['operator-tokens', 'create', '--name', 'ci deploys', '--scopes', 'accounts:read,operators:admin', '--expires-in-days', '7', '--json'],
    { ADMIN_URL: server.adminUrl, ADMIN_TOKEN: TEST_ADMIN_TOKEN },
  );
  expect(created.code).toBe(0);
  const token = JSON.parse(created.stdout) as ApiCreatedOperatorToken;
  registerSecrets(token.token);
  expect(token).toMatchObject({ name: 'ci deploys', scopes: ['accounts:read', 'operators:admin'], status: 'active' });

  const file = join(mkdtempSync(join(tmpdir(), 'cli-token-')), 'token');
  writeFileSync(file, `${token.token}\n`);
  const env = { ADMIN_URL: server.adminUrl, OPERATOR_TOKEN_FILE: file };
  const listed = await runCli(['operator-tokens', 'list'], env);
  expect(listed.code).toBe(0);
  expect(listed.stdout).toContain(token.id);
  expect(listed.stdout).not.toContain(token.token);

  const revoked = await runCli(['operator-tokens', 'revoke', token.id, '--json'], env);
  expect(revoked.code).toBe(0);
  expect((JSON.parse(revoked.stdout) as { status: string }).status).toBe('revoked');

  const refused = await runCli(['operator-tokens', 'list'], env);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain('unauthorized');
  const asAdmin = JSON.parse(
    (await runCli(['operator-tokens', 'list', '--json'], { ADMIN_URL: server.adminUrl, ADMIN_TOKEN: TEST_ADMIN_TOKEN })).stdout,
  ) as ApiOperatorTokenList;
  expect(asAdmin.tokens.map((listedToken) => [listedToken.id, listedToken.status])).toEqual([[token.id, 'revoked']]);
});

it('refuses an unknown scope before calling the API', async () => {
  const run = await runCli(['operator-tokens', 'create', '--name', 'x', '--scopes', 'keys:delete'], {
    ADMIN_URL: server.adminUrl,
    ADMIN_TOKEN: TEST_ADMIN_TOKEN,
  });
  expect(run.code).not.toBe(0);
  expect(run.stderr).toContain('comma-separated list of');
});
