import { spawn } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { generateCustomerKey } from '../../src/keys/customer-key';
import { ensureBuiltCli, runCli, type CliRun } from '../support/built-cli';
import { createOfficialCheckClient, decisionFor } from '../support/envoy-official-client';
import { TEST_ADMIN_TOKEN, type AdminBody } from '../support/running-app';
import { startServerProcess } from '../support/server-process';

/** The built `gateway-authz` itself: what a bare call, `--version`, `--help` and a mistyped command do. */

// Each run is a fresh node process; allow for a loaded machine.
jest.setTimeout(60_000);

const ROOT = join(__dirname, '..', '..');
const PROBE = join(__dirname, '..', 'support', 'loaded-modules-probe.js');
const NO_SETTINGS = {};

/** Runs the CLI with the probe preloaded; answers the run and the files it loaded. */
function runProbed(args: string[], env: Record<string, string>): Promise<CliRun & { loaded: string[] }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--require', PROBE, ensureBuiltCli(), ...args], {
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => {
      const line = stderr.split('\n').find((candidate) => candidate.startsWith('loaded-modules: '));
      if (line === undefined) return reject(new Error(`no module list from the probe; stderr: ${stderr}`));
      resolve({ code, stdout, stderr, loaded: JSON.parse(line.slice('loaded-modules: '.length)) as string[] });
    });
  });
}

/** `commander`, `@grpc/grpc-js`, …: the npm packages among loaded files. */
function packagesOf(files: string[]): string[] {
  const packages = files.flatMap((file) => {
    const inside = file.split(`${sep}node_modules${sep}`).at(-1)!;
    if (inside === file) return [];
    const parts = inside.split(sep);
    return [parts[0]!.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]!];
  });
  return [...new Set(packages)].sort();
}

const projectFilesOf = (files: string[]) =>
  files.filter((file) => !file.includes(`${sep}node_modules${sep}`)).map((file) => relative(ROOT, file));
const APP = join('dist', 'app.js');

describe('gateway-authz (the CLI entry point)', () => {
  beforeAll(() => {
    ensureBuiltCli();
  });

  it('is built executable, with a node shebang: `npx gateway-authz` runs the file itself (a fresh clone had it 0644)', () => {
    const bin = ensureBuiltCli();
    expect(readFileSync(bin, 'utf8').split('\n', 1)[0]).toBe('#!/usr/bin/env node');
    expect((statSync(bin).mode & 0o111).toString(8)).toBe('111');
  });

  it('bare, shows its help and starts nothing: serve is a command like the others', async () => {
    const run = await runCli([], NO_SETTINGS);
    // commander's answer for a command given no subcommand (as for `gateway-authz accounts`): help on stderr, exit 1.
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain('Usage: gateway-authz [options] [command]');
    for (const command of ['serve', 'accounts', 'keys', 'members', 'usage', 'check'])
      expect(run.stderr).toMatch(new RegExp(`^  ${command}\\b`, 'm'));
  });

  it.each([['--version'], ['-V']])("%s prints package.json's version", async (flag) => {
    const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    const run = await runCli([flag], NO_SETTINGS);
    expect(run).toEqual({ code: 0, stdout: `${version}\n`, stderr: '' });
  });

  it.each([
    [['acounts', 'list'], 'acounts', 'accounts'],
    [['key', 'list', '--account', 'acme'], 'key', 'keys'],
    [['serv'], 'serv', 'serve'],
  ])('%j: says the command is unknown and suggests the nearest one', async (args, typed, meant) => {
    const run = await runCli(args, NO_SETTINGS);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain(`error: unknown command '${typed}'\n(Did you mean ${meant}?)`);
  });

  it('--help loads no package but commander, and not the server: serve imports it when it runs', async () => {
    const run = await runProbed(['--help'], NO_SETTINGS);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('Usage: gateway-authz [options] [command]');
    expect(packagesOf(run.loaded)).toEqual(['commander']);
    expect(projectFilesOf(run.loaded)).not.toContain(APP);
  });

  it('serve, by contrast, loads the server and its packages (the probe sees what a command loads)', async () => {
    // A setting that cannot work: serve imports the server, reads its settings and exits 2 before it listens.
    const run = await runProbed(['serve'], { GRPC_PORT: 'ninety' });
    expect(run.code).toBe(2);
    expect(packagesOf(run.loaded)).toEqual(expect.arrayContaining(['fastify', 'zod']));
    expect(projectFilesOf(run.loaded)).toContain(APP);
  });

  it('serve allows and denies Checks without loading proto-loader or protobufjs: it encodes its answers itself (5–8 MB of RSS)', async () => {
    const server = await startServerProcess({ NODE_OPTIONS: `--require ${PROBE}`, ADMIN_TOKEN: TEST_ADMIN_TOKEN });
    const check = createOfficialCheckClient(server.grpcAddress);
    try {
      const admin = async (path: string, body: object) =>
        (await (
          await fetch(`${server.adminUrl}${path}`, {
            method: 'POST',
            headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}`, 'content-type': 'application/json' },
            body: JSON.stringify(body),
          })
        ).json()) as AdminBody;
      await admin('/admin/accounts', { id: 'lazy', name: 'Lazy Loading Ltd' });
      const { key } = await admin('/admin/accounts/lazy/keys', {});
      expect(await decisionFor(check, key)).toBe('allow');
      expect(await decisionFor(check, generateCustomerKey('live'))).toBe('unknown_key');
      expect(await decisionFor(check, 'gk_live_short')).toBe('malformed_key');
    } finally {
      check.close();
      const closed = new Promise((resolve) => server.child.once('close', resolve));
      await server.stop();
      await closed;
    }
    const line = server
      .errors()
      .split('\n')
      .find((candidate) => candidate.startsWith('loaded-modules: '));
    const packages = packagesOf(JSON.parse(line!.slice('loaded-modules: '.length)) as string[]);
    expect(packages).toEqual(expect.arrayContaining(['fastify', 'zod']));
    expect(packages).not.toContain('@grpc/proto-loader');
    expect(packages).not.toContain('protobufjs');
  });
});
