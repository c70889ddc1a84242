import { join } from 'node:path';
import { runCli } from '../support/built-cli';
import { startServerProcess, type ServerProcess } from '../support/server-process';

/** `gateway-authz serve` as it judges the Node.js it runs on, made to report Node 20 (end-of-life) by a preload. */
const onNode20 = {
  NODE_OPTIONS: `--require ${join(__dirname, '..', 'support', 'report-node-version.js')}`,
  REPORTED_NODE_VERSION: '20.20.2',
};

const logLines = (output: string) =>
  output
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as { level: string; msg: string; node?: string });

describe('gateway-authz serve on an end-of-life Node.js', () => {
  let server: ServerProcess | undefined;
  afterEach(async () => {
    await server?.stop();
    server = undefined;
  });

  it('outside production: starts, with a warning naming the version and the day its support ended', async () => {
    server = await startServerProcess(onNode20);
    const warning = logLines(server.output()).find((line) => line.msg.includes('end-of-life'));
    expect(warning).toMatchObject({ level: 'warn', node: '20.20.2' });
    expect(warning!.msg).toContain('stopped getting security fixes on 2026-04-30');
  });

  it('with NODE_ENV=production: refuses to start (exit 2), saying how to override', async () => {
    const run = await runCli(['serve'], {
      ...onNode20,
      NODE_ENV: 'production',
      GRPC_PORT: '0',
      ADMIN_PORT: '0',
      CUSTOMER_PORT: '0',
    });
    expect(run.code).toBe(2);
    const lines = logLines(run.stdout);
    expect(lines).toContainEqual(
      expect.objectContaining({ level: 'fatal', node: '20.20.2', msg: expect.stringContaining('ALLOW_END_OF_LIFE_NODE=true') }),
    );
    expect(lines.some((line) => line.msg === 'gateway-authz listening')).toBe(false);
  });

  it('with NODE_ENV=production and ALLOW_END_OF_LIFE_NODE=true: starts, with the warning', async () => {
    server = await startServerProcess({ ...onNode20, NODE_ENV: 'production', ALLOW_END_OF_LIFE_NODE: 'true' });
    expect(logLines(server.output())).toContainEqual(
      expect.objectContaining({ level: 'warn', msg: expect.stringContaining('end-of-life') }),
    );
  });
});

describe('gateway-authz serve on the Node.js this suite runs on', () => {
  // The suite runs on supported majors (Node 24, and 22 in CI's subset); past a major's end of life this fails, as it
  // should: CI must then move off that major (docs/operations/runtime.md).
  it('starts in production without a runtime warning, and its start line names the Node.js version', async () => {
    const server = await startServerProcess({ NODE_ENV: 'production' });
    try {
      const lines = logLines(server.output());
      expect(lines.filter((line) => line.msg.includes('end-of-life'))).toEqual([]);
      expect(lines.find((line) => line.msg === 'gateway-authz listening')?.node).toBe(process.versions.node);
    } finally {
      await server.stop();
    }
  });
});
