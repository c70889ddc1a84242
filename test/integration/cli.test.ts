import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { parseCustomerKey } from '../../src/keys/customer-key';
import { createOfficialCheckClient, envoyCheckRequest } from '../support/envoy-official-client';
import { ensureBuiltCli, runCli } from '../support/built-cli';
import { startTestRedis, type TestRedis } from '../support/redis-server';
import { startAppUnderTest, TEST_ADMIN_TOKEN, type AppUnderTest } from '../support/running-app';

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

describe('gateway-authz keys create / accounts create (against the admin API, real Redis)', () => {
  let redis: TestRedis;
  let server: AppUnderTest;
  let env: Record<string, string>;
  beforeAll(async () => {
    ensureBuiltCli();
    redis = await startTestRedis();
    server = await startAppUnderTest({ redisUrl: redis.url });
    env = { ADMIN_URL: server.adminUrl, ADMIN_TOKEN: TEST_ADMIN_TOKEN };
  });
  afterAll(async () => {
    await server?.close();
    await redis?.stop();
  });

  it('creates an account, then a key whose JSON carries the full key once', async () => {
    const account = await runCli(['accounts', 'create', '--id', 'acme', '--name', 'Acme'], env);
    expect(account.code).toBe(0);
    expect(JSON.parse(account.stdout)).toMatchObject({ id: 'acme', name: 'Acme' });

    const created = await runCli(['keys', 'create', '--account', 'acme', '--name', 'ci runner', '--env', 'test'], env);
    expect(created.code).toBe(0);
    const body = JSON.parse(created.stdout);
    expect(Object.keys(body).sort()).toEqual(['accountId', 'createdAt', 'environment', 'id', 'key', 'name', 'prefix']);
    expect(body).toMatchObject({ accountId: 'acme', name: 'ci runner', environment: 'test' });
    expect(parseCustomerKey(body.key).ok).toBe(true);

    // The key the CLI printed is accepted by the Check service.
    const client = createOfficialCheckClient(server.grpcAddress);
    try {
      const response = await client.check(
        envoyCheckRequest({ path: '/v1/chat/completions', headers: { authorization: `Bearer ${body.key}` } }),
      );
      expect(response.status.code).toBe(0);
    } finally {
      client.close();
    }
  });

  it('exits 1 with the API error on stderr for an unknown account', async () => {
    const run = await runCli(['keys', 'create', '--account', 'ghost'], env);
    expect(run.code).toBe(1);
    expect(JSON.parse(run.stderr).error.code).toBe('account_not_found');
  });

  it('refuses an environment other than live or test before calling the API', async () => {
    const run = await runCli(['keys', 'create', '--account', 'acme', '--env', 'prod'], env);
    expect(run.code).not.toBe(0);
    expect(run.stderr).toContain("must be 'live' or 'test'");
  });

  it('says so when ADMIN_TOKEN is missing', async () => {
    const run = await runCli(['keys', 'create', '--account', 'acme'], { ADMIN_URL: server.adminUrl });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('ADMIN_TOKEN is not set');
  });
});

describe('gateway-authz serve', () => {
  it('exits 2 listing every configuration problem at once', async () => {
    const run = await runCli(['serve'], {
      GRPC_PORT: 'ninety',
      REDIS_URL: 'http://localhost:6379',
      LOG_LEVEL: 'chatty',
      ADMIN_TOKEN: 'short',
      CONFIG_FILE: '/nonexistent/gateway-authz.json',
    });
    expect(run.code).toBe(2);
    for (const name of ['GRPC_PORT', 'REDIS_URL', 'LOG_LEVEL', 'ADMIN_TOKEN', 'CONFIG_FILE']) expect(run.stderr).toContain(name);
  });

  it('starts without Redis on the embedded store, says it keeps nothing, and answers Check', async () => {
    const [grpcPort, adminPort] = [await freePort(), await freePort()];
    const child: ChildProcess = spawn(process.execPath, [ensureBuiltCli(), 'serve'], {
      env: { PATH: process.env.PATH ?? '', GRPC_PORT: String(grpcPort), ADMIN_PORT: String(adminPort), BIND_ADDRESS: '127.0.0.1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout!.on('data', (chunk) => (output += chunk));
    try {
      await new Promise<void>((resolve, reject) => {
        const deadline = setTimeout(() => reject(new Error(`server did not start: ${output}`)), 10000);
        child.stdout!.on('data', () => {
          if (output.includes('gateway-authz listening')) {
            clearTimeout(deadline);
            resolve();
          }
        });
      });
      expect(output).toContain('in-memory');
      expect(output).toContain('keeps nothing');
      const client = createOfficialCheckClient(`127.0.0.1:${grpcPort}`);
      try {
        const response = await client.check(envoyCheckRequest({ path: '/v1/chat/completions' }));
        expect(response.denied_response.status.code).toBe('Unauthorized');
      } finally {
        client.close();
      }
      const admin = await fetch(`http://127.0.0.1:${adminPort}/admin/accounts/x`);
      expect(admin.status).toBe(503);
    } finally {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    }
    expect(child.exitCode).toBe(0);
  });
});
