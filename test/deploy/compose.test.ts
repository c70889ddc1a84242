/**
 * docker-compose.yml, the Dockerfiles and .dockerignore, checked without a
 * Docker engine (none runs on the development machines or in CI): the compose
 * file is parsed and its services, ports, health checks and start order are
 * asserted, and tied to envoy.yaml's cluster addresses. The health-check and
 * preStop commands themselves are run for real against small local HTTP
 * servers, so their shell/Node one-liners are known to work.
 */
import { SHIPPED_NODE_ARGS } from '../bench/processes';
import { SHIPPED_MALLOC_ARENA_MAX, SHIPPED_NODE_OPTIONS } from '../bench/setup';
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';

import { checkBootstrap } from './support/envoy-bootstrap';
import { cluster, clusterEndpoints } from './support/envoy-semantics';
import { parseYaml, parseYamlDocuments, pinnedNodeVersion, readRepoFile, readYaml, repoPath } from './support/repo-files';
import { loadSettings } from '../../src/platform/settings';
import { DASHBOARD_ASSETS } from '../../src/admin/register-dashboard';
import type { IDeployment } from 'kubernetes-models/apps/v1/Deployment';

/**
 * docker-compose.yml as these tests read it: the fields every service may have. A field a service lacks is
 * undefined at run time and fails the assertion that reads it.
 */
interface ComposeService {
  image: string;
  build: string;
  command: string[];
  volumes: string[];
  ports?: string[];
  environment: Record<string, string>;
  depends_on: Record<string, { condition: string }>;
  healthcheck: { test: string[]; interval: string; timeout: string; retries: number; start_period?: string };
  stop_grace_period: string;
}

type ServiceName = 'envoy' | 'gateway-authz' | 'redis' | 'upstream';

interface ComposeFile {
  version?: string;
  /** The first test checks that these are exactly the services. */
  services: Record<ServiceName, ComposeService>;
  volumes: Record<string, unknown>;
}

const run = promisify(execFile);

const compose = readYaml('docker-compose.yml') as ComposeFile;
const services = compose.services;
const envoyView = checkBootstrap(readYaml('envoy.yaml')).view;

/**
 * A value as compose interpolates it from the shell's environment, for the two forms this file uses
 * (compose-go template.go): "${NAME:-default}" is NAME, or default when NAME is unset or empty;
 * "${NAME:?message}" is NAME, and compose stops with "required variable NAME is missing a value: message"
 * when NAME is unset or empty.
 */
function composeResolve(value: string, shellEnv: Record<string, string | undefined> = {}): string {
  return value.replace(
    /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::([-?])([^}]*))?\}/g,
    (_whole, name: string, operator?: string, argument?: string) => {
      const set = shellEnv[name];
      if (set !== undefined && set !== '') return set;
      if (operator === '?') throw new Error(`required variable ${name} is missing a value: ${argument}`);
      return operator === '-' ? argument! : '';
    },
  );
}
/** A token as an operator would make one for the local stack. */
const OPERATOR_TOKEN = 'b3d2f0c9a8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a1f0e9d8c7b6a5f4e3d2c1';
const publishedPorts = (service: ComposeService) =>
  (service.ports ?? []).map((spec) => {
    const parts = String(spec).split(':');
    return {
      hostIp: parts.length === 3 ? parts[0] : undefined,
      host: Number(parts[parts.length - 2]),
      container: Number(parts[parts.length - 1]),
    };
  });

describe('docker-compose.yml', () => {
  it('has exactly the services envoy, gateway-authz, redis and upstream', () => {
    expect(Object.keys(services).sort()).toEqual(['envoy', 'gateway-authz', 'redis', 'upstream']);
    expect(compose.version).toBeUndefined(); // obsolete key
  });

  it('runs Envoy 1.36 with envoy.yaml mounted read-only on :8080, after gateway-authz and upstream are healthy', () => {
    const envoy = services.envoy;
    expect(envoy.image).toBe('envoyproxy/envoy:v1.36-latest');
    expect(envoy.volumes).toContain('./envoy.yaml:/etc/envoy/envoy.yaml:ro');
    expect(envoy.command.slice(0, 2)).toEqual(['-c', '/etc/envoy/envoy.yaml']);
    expect(publishedPorts(envoy)).toEqual([{ hostIp: undefined, host: 8080, container: 8080 }]);
    expect(envoy.depends_on).toEqual({ 'gateway-authz': { condition: 'service_healthy' }, upstream: { condition: 'service_healthy' } });
    expect(onlyListenerPort()).toBe(8080);
  });

  it('builds gateway-authz from . with the documented environment, admin and customer ports on loopback only, ready only when Redis answers', () => {
    const authz = services['gateway-authz'];
    expect(authz.build).toBe('.');
    const env = authz.environment;
    expect(env).toMatchObject({
      GRPC_PORT: '9191',
      ADMIN_PORT: '9192',
      CUSTOMER_PORT: '9193',
      REDIS_URL: 'redis://redis:6379',
      REDIS_TIMEOUT_MS: '50',
      // Envoy is another container, and published ports reach the container's interface, not its loopback.
      GRPC_BIND_ADDRESS: '0.0.0.0',
      ADMIN_BIND_ADDRESS: '0.0.0.0',
      CUSTOMER_BIND_ADDRESS: '0.0.0.0',
    });
    expect(env.ADMIN_TOKEN).toMatch(/^\$\{ADMIN_TOKEN:\?[^$}]+\}$/); // required, no default (see "admin token" below)
    expect(Object.values(env).every((v) => typeof v === 'string')).toBe(true);
    expect(publishedPorts(authz)).toEqual([
      { hostIp: '127.0.0.1', host: 9192, container: 9192 },
      { hostIp: '127.0.0.1', host: 9193, container: 9193 },
    ]);
    expect(authz.depends_on).toEqual({ redis: { condition: 'service_healthy' } });
    expect(authz.healthcheck.test.join(' ')).toContain('http://127.0.0.1:9192/readyz');
    const graceSeconds = Number(/^(\d+)s$/.exec(authz.stop_grace_period)?.[1]);
    expect(graceSeconds * 1000).toBeGreaterThanOrEqual(Number(env.SHUTDOWN_DRAIN_DELAY_MS) + Number(env.SHUTDOWN_TIMEOUT_MS));
  });

  it('gives gateway-authz an environment its settings loader accepts, as compose resolves it with only ADMIN_TOKEN set', () => {
    const shellEnv = { ADMIN_TOKEN: OPERATOR_TOKEN };
    const env = Object.fromEntries(Object.entries(services['gateway-authz'].environment).map(([k, v]) => [k, composeResolve(v, shellEnv)]));
    const result = loadSettings(env);
    expect(result.ok ? [] : result.problems).toEqual([]);
    if (!result.ok) return;
    expect(result.settings.grpcPort).toBe(9191);
    expect(result.settings.adminPort).toBe(9192);
    expect(result.settings.customerPort).toBe(9193);
    expect([result.settings.grpcBindAddress, result.settings.adminBindAddress, result.settings.customerBindAddress]).toEqual([
      '0.0.0.0',
      '0.0.0.0',
      '0.0.0.0',
    ]);
    expect(result.settings.customerSignIn).toBeUndefined(); // no identity provider unless the operator names one
    expect(result.settings.redis).toEqual({ mode: 'standalone', url: 'redis://redis:6379' });
    // A durable choice (docs/concepts/durability.md), which the redis service below makes hold.
    expect(result.settings.usage.durability).toEqual({ mode: 'appendfsync-always' });
    expect(result.settings.configFile).toBeUndefined();
    expect(result.settings.adminToken).toBe(OPERATOR_TOKEN);
  });

  it('runs Redis 7 with an append-only file on a named volume, health-checked with redis-cli ping', () => {
    const redis = services.redis;
    expect(redis.image).toBe('redis:7-alpine');
    expect(redis.command.join(' ')).toContain('--appendonly yes');
    // What gateway-authz's USAGE_DURABILITY=appendfsync-always requires, and checks at start.
    expect(redis.command.join(' ')).toContain('--appendfsync always');
    expect(redis.volumes).toEqual(['redis-data:/data']);
    expect(Object.keys(compose.volumes)).toContain('redis-data');
    expect(redis.healthcheck.test.join(' ')).toMatch(/redis-cli ping/);
    expect(redis.ports).toBeUndefined(); // not published
  });

  it('builds the fake upstream from tools/fake-upstream, reachable only inside the compose network', () => {
    const upstream = services.upstream;
    expect(upstream.build).toBe('./tools/fake-upstream');
    expect(fs.existsSync(repoPath('tools', 'fake-upstream', 'Dockerfile'))).toBe(true);
    expect(upstream.environment.PORT).toBe('8081');
    expect(upstream.ports).toBeUndefined();
    expect(upstream.healthcheck.test.join(' ')).toContain('http://127.0.0.1:8081/healthz');
  });

  it("has Envoy's cluster addresses match the compose service names and ports", () => {
    expect(cluster(envoyView, 'ext_authz').type).toBe('STRICT_DNS');
    for (const name of ['ext_authz', 'ext_proc']) {
      expect(cluster(envoyView, name).type).toBe('STRICT_DNS');
      expect(clusterEndpoints(envoyView, name)).toEqual([
        { address: 'gateway-authz', port: Number(services['gateway-authz'].environment.GRPC_PORT) },
      ]);
    }
    expect(cluster(envoyView, 'upstream_api').type).toBe('STRICT_DNS');
    expect(clusterEndpoints(envoyView, 'upstream_api')).toEqual([
      { address: 'upstream', port: Number(services.upstream.environment.PORT) },
    ]);
    const redisUrl = new URL(services['gateway-authz'].environment.REDIS_URL!);
    expect(services[redisUrl.hostname as ServiceName]).toBe(services.redis);
    expect(redisUrl.port).toBe('6379');
  });

  it('health-checks every service, with the fields compose needs', () => {
    for (const [name, service] of Object.entries(services)) {
      expect({ name, test: service.healthcheck?.test?.[0] }).toEqual({ name, test: expect.stringMatching(/^CMD(-SHELL)?$/) });
      for (const key of ['interval', 'timeout', 'retries'] as const) expect(service.healthcheck[key]).toBeDefined();
    }
  });
});

function onlyListenerPort(): number {
  return envoyView.static_resources.listeners[0]!.address.socket_address.port_value;
}

// ---------------------------------------------------------------------------
// Dockerfiles
// ---------------------------------------------------------------------------

interface Instruction {
  readonly op: string;
  readonly args: string;
  readonly stage: number;
}

/** Dockerfile instructions (comments dropped, `\` continuations joined), with their stage index. */
function dockerfile(...segments: string[]): Instruction[] {
  const text = readRepoFile(...segments).replace(/\\\r?\n/g, ' ');
  let stage = -1;
  const out: Instruction[] = [];
  for (const line of text.split('\n')) {
    const trimmed = line.trim();
    if (trimmed === '' || trimmed.startsWith('#')) continue;
    const [, op, args] = /^(\S+)\s*(.*)$/.exec(trimmed)!;
    if (op!.toUpperCase() === 'FROM') stage += 1;
    out.push({ op: op!.toUpperCase(), args: args!.replace(/\s+/g, ' '), stage });
  }
  return out;
}

const finalStage = (instructions: Instruction[]) => instructions.filter((i) => i.stage === Math.max(...instructions.map((x) => x.stage)));
const execForm = (args: string): string[] => JSON.parse(args.replace(/^CMD\s+/, '')) as string[];

describe('Dockerfile (gateway-authz)', () => {
  const all = dockerfile('Dockerfile');
  const last = finalStage(all);

  it('is multi-stage on the pinned Node (package-lock.json), runtime with production dependencies and the compiled output only', () => {
    const froms = all.filter((i) => i.op === 'FROM').map((i) => i.args);
    const node = `node:${pinnedNodeVersion()}-bookworm-slim`;
    expect(froms).toEqual([`${node} AS build`, `${node} AS runtime`]);
    expect(last.some((i) => i.op === 'RUN' && /\bnpm ci --omit=dev\b/.test(i.args))).toBe(true);
    // The image is that Node already: neither stage downloads the Node binary package too.
    const installs = all.filter((i) => i.op === 'RUN' && /\bnpm ci\b/.test(i.args));
    expect(installs).toHaveLength(2);
    for (const install of installs) expect(install.args).toMatch(/--omit=optional\b/);
    expect(last.some((i) => i.op === 'COPY' && i.args.startsWith('--from=build /app/dist'))).toBe(true);
    expect(last.some((i) => i.op === 'COPY' && /\bsrc\b/.test(i.args))).toBe(false);
    expect(last.filter((i) => i.op === 'CMD').map((i) => execForm(i.args))).toEqual([
      ['node', ...SHIPPED_NODE_ARGS, 'dist/cli/main.js', 'serve'],
    ]);
    // `npm start` (the README's run command) starts the service with the same V8 flags as the image.
    const start = (JSON.parse(readRepoFile('package.json')) as { scripts: Record<string, string> }).scripts.start!;
    expect(start).toContain(`MALLOC_ARENA_MAX=${SHIPPED_MALLOC_ARENA_MAX} node ${SHIPPED_NODE_ARGS.join(' ')} dist/cli/main.js serve`);
    // `npm run dev` too, so what a developer measures is what ships.
    expect(readRepoFile('tools/dev.js')).toContain(
      `['--watch-path=dist', ${SHIPPED_NODE_ARGS.map((arg) => `'${arg}'`).join(', ')}, 'dist/cli/main.js', 'serve']`,
    );
    expect(readRepoFile('tools/dev.js')).toContain(`env: { MALLOC_ARENA_MAX: '${SHIPPED_MALLOC_ARENA_MAX}', ...process.env }`);
    // And the image's malloc arenas, as the bench measures them.
    expect(last.filter((i) => i.op === 'ENV').map((i) => i.args)).toContain(`MALLOC_ARENA_MAX=${SHIPPED_MALLOC_ARENA_MAX}`);
    expect(last.filter((i) => i.op === 'EXPOSE').map((i) => i.args)).toEqual(['9191 9192 9193']);
  });

  it('runs as the non-root node user, with a HEALTHCHECK on /readyz using node (no curl in slim images)', () => {
    const users = last.filter((i) => i.op === 'USER').map((i) => i.args);
    expect(users).toEqual(['node']);
    const userAt = last.findIndex((i) => i.op === 'USER');
    expect(last.slice(userAt).some((i) => i.op === 'RUN')).toBe(false); // nothing runs as root after USER
    const healthchecks = last.filter((i) => i.op === 'HEALTHCHECK');
    expect(healthchecks).toHaveLength(1);
    expect(healthchecks[0]!.args).toMatch(/CMD \["node", "-e", ".*\/readyz/);
    expect(healthchecks[0]!.args).not.toMatch(/curl|wget/);
  });

  it('listens on the container interface for every server, set explicitly (the service itself defaults to loopback)', () => {
    const env = last.filter((i) => i.op === 'ENV').map((i) => i.args);
    expect(env).toContain('GRPC_BIND_ADDRESS=0.0.0.0 ADMIN_BIND_ADDRESS=0.0.0.0 CUSTOMER_BIND_ADDRESS=0.0.0.0');
    const result = loadSettings({ GRPC_BIND_ADDRESS: '0.0.0.0', ADMIN_BIND_ADDRESS: '0.0.0.0', CUSTOMER_BIND_ADDRESS: '0.0.0.0' });
    expect(result.ok).toBe(true);
  });

  it('caps the V8 heap (as the benchmark measures it), well below the Kubernetes memory limit', () => {
    const env = last.filter((i) => i.op === 'ENV').map((i) => i.args);
    expect(env).toContain(`NODE_OPTIONS=${SHIPPED_NODE_OPTIONS}`);
    const capMb = Number(/--max-old-space-size=(\d+)/.exec(SHIPPED_NODE_OPTIONS)![1]);
    const limit = readRepoFile('deploy', 'deployment.yaml').match(/limits:\s*\n\s*cpu: "1"\s*\n\s*memory: (\d+)Mi/)!;
    // Old space plus young generation, code and buffers must fit with room to spare.
    expect(capMb * 2).toBeLessThanOrEqual(Number(limit[1]));
  });

  it('has a .dockerignore that keeps secrets, git and build output out, and everything COPY needs in', () => {
    const ignored = readRepoFile('.dockerignore')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('#'));
    for (const must of ['.git', 'node_modules', 'dist', '.env', 'test']) expect(ignored).toContain(must);
    const copied = all.filter((i) => i.op === 'COPY' && !i.args.startsWith('--from')).flatMap((i) => i.args.split(' ').slice(0, -1));
    expect(copied.sort()).toEqual(
      [
        'package-lock.json',
        'package-lock.json',
        'package.json',
        'package.json',
        'proto',
        'proto',
        'src',
        'tsconfig.build.json',
        'tsconfig.json',
      ].sort(),
    );
    const excludes = (file: string) =>
      ignored.some((pattern) => pattern === file || (pattern.startsWith('*') && file.endsWith(pattern.slice(1))));
    for (const file of copied) expect({ file, ignored: excludes(file) }).toEqual({ file, ignored: false });
  });

  it("puts the dashboard's browser files and the store's Lua scripts in the image: src/ is copied, `npm run build` copies them into dist/, the runtime takes dist/", async () => {
    const build = all.filter((i) => i.stage === 0);
    const copiesSrc = build.findIndex((i) => i.op === 'COPY' && i.args === 'src ./src');
    const builds = build.findIndex((i) => i.op === 'RUN' && i.args === 'npm run build');
    expect(copiesSrc).toBeGreaterThanOrEqual(0);
    expect(builds).toBeGreaterThan(copiesSrc);
    expect(last.some((i) => i.op === 'COPY' && i.args === '--from=build /app/dist ./dist')).toBe(true);
    const scripts = (JSON.parse(readRepoFile('package.json')) as { scripts: Record<string, string> }).scripts;
    expect(scripts.build).toBe(
      'tsc -b tsconfig.build.json && npm run build:web --silent && npm run build:lua --silent && npm run build:bin --silent',
    );

    // .dockerignore keeps none of them (nor a folder above them) out of the build context.
    const ignored = readRepoFile('.dockerignore')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('#'));
    const files = Object.values(DASHBOARD_ASSETS).map((file) => `src/web/${file}`);
    for (const file of files) {
      const parts = file.split('/');
      const paths = parts.map((_, index) => parts.slice(0, index + 1).join('/'));
      const hit = ignored.find((pattern) => paths.some((p) => p === pattern || (pattern.startsWith('*') && p.endsWith(pattern.slice(1)))));
      expect({ file, ignoredBy: hit }).toEqual({ file, ignoredBy: undefined });
    }

    // The copy step, run as the build stage runs it: in a tree with package.json and src/ only, and no dist/ yet.
    const stage = fs.mkdtempSync(path.join(os.tmpdir(), 'docker-build-stage-'));
    try {
      fs.copyFileSync(repoPath('package.json'), path.join(stage, 'package.json'));
      fs.cpSync(repoPath('src', 'web'), path.join(stage, 'src', 'web'), { recursive: true });
      await promisify(execFile)('npm', ['run', 'build:web', '--silent'], { cwd: stage });
      for (const file of files) {
        const built = path.join(stage, file.replace(/^src\//, 'dist/'));
        expect({ file, copied: fs.existsSync(built) && fs.readFileSync(built, 'utf8') === readRepoFile(file) }).toEqual({
          file,
          copied: true,
        });
      }
      expect(fs.existsSync(path.join(stage, 'dist', 'web', 'tsconfig.json'))).toBe(false);
      // The store's Lua scripts likewise, beside the store's JavaScript (src/store/redis/lua-source.ts reads them there).
      fs.cpSync(repoPath('src', 'store', 'redis', 'lua'), path.join(stage, 'src', 'store', 'redis', 'lua'), { recursive: true });
      await promisify(execFile)('npm', ['run', 'build:lua', '--silent'], { cwd: stage });
      for (const file of ['apply-usage.lua', 'lib/divmod.lua']) {
        const built = path.join(stage, 'dist', 'store', 'redis', 'lua', file);
        expect({
          file,
          copied: fs.existsSync(built) && fs.readFileSync(built, 'utf8') === readRepoFile(`src/store/redis/lua/${file}`),
        }).toEqual({
          file,
          copied: true,
        });
      }
    } finally {
      fs.rmSync(stage, { recursive: true, force: true });
    }
  });
});

describe('tools/fake-upstream/Dockerfile', () => {
  const all = dockerfile('tools', 'fake-upstream', 'Dockerfile');

  it('is the pinned Node, copies only server.js, runs as node with a HEALTHCHECK', () => {
    expect(all.filter((i) => i.op === 'FROM').map((i) => i.args)).toEqual([`node:${pinnedNodeVersion()}-bookworm-slim`]);
    expect(all.filter((i) => i.op === 'COPY').map((i) => i.args)).toEqual(['server.js ./']);
    expect(all.filter((i) => i.op === 'USER').map((i) => i.args)).toEqual(['node']);
    expect(all.filter((i) => i.op === 'HEALTHCHECK')).toHaveLength(1);
    expect(all.filter((i) => i.op === 'CMD').map((i) => execForm(i.args))).toEqual([['node', 'server.js']]);
    expect(fs.readFileSync(repoPath('tools', 'fake-upstream', 'server.js'), 'utf8')).not.toMatch(/require\(['"](?!node:)/); // no dependencies
  });
});

// ---------------------------------------------------------------------------
// The one-liners, run for real against local servers
// ---------------------------------------------------------------------------

interface Seen {
  method: string;
  url: string;
}

async function withServer(status: number, body: (seen: Seen[]) => Promise<void>): Promise<void> {
  const seen: Seen[] = [];
  const server = http.createServer((req, res) => {
    seen.push({ method: req.method ?? '', url: req.url ?? '' });
    req.resume();
    res.writeHead(status, { 'content-type': 'text/plain' }).end(status === 200 ? 'LIVE\n' : 'not ready\n');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  try {
    process.env.__TEST_PORT = String(port);
    await body(seen);
  } finally {
    delete process.env.__TEST_PORT;
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

const testPort = () => process.env.__TEST_PORT!;
/** A loopback port nothing listens on (just released by a server of ours). */
async function closedPort(): Promise<number> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
const exitCode = async (file: string, args: string[], env: NodeJS.ProcessEnv = {}) => {
  try {
    await run(file, args, { env: { PATH: process.env.PATH, ...env }, timeout: 10_000 });
    return 0;
  } catch (error) {
    return (error as { code?: number }).code ?? -1;
  }
};
/** A compose healthcheck `test` as the argv the container would run, pointed at our port. */
const healthcheckArgv = (service: ServiceName, fromPort: string) =>
  services[service].healthcheck.test
    .slice(1)
    .map((a) =>
      a.split(`127.0.0.1:${fromPort}`).join(`127.0.0.1:${testPort()}`).split(`127.0.0.1/${fromPort}`).join(`127.0.0.1/${testPort()}`),
    );

describe('health-check and preStop commands (run here against stand-in servers)', () => {
  const dockerHealthcheck = (...segments: string[]) =>
    JSON.parse(
      dockerfile(...segments)
        .find((i) => i.op === 'HEALTHCHECK')!
        .args.replace(/^.*?CMD /, ''),
    ) as string[];

  it('the image HEALTHCHECK exits 0 on 200 from /readyz, 1 on 503 and when nothing listens', async () => {
    const [node, ...args] = dockerHealthcheck('Dockerfile');
    expect(node).toBe('node');
    await withServer(200, async (seen) => {
      expect(await exitCode(process.execPath, args, { ADMIN_PORT: testPort() })).toBe(0);
      expect(seen).toEqual([{ method: 'GET', url: '/readyz' }]);
    });
    await withServer(503, async () => expect(await exitCode(process.execPath, args, { ADMIN_PORT: testPort() })).toBe(1));
    expect(await exitCode(process.execPath, args, { ADMIN_PORT: String(await closedPort()) })).toBe(1);
  });

  it('the compose health checks of gateway-authz and upstream work the same way', async () => {
    await withServer(200, async (seen) => {
      expect(await exitCode(process.execPath, healthcheckArgv('gateway-authz', '9192').slice(1))).toBe(0);
      expect(await exitCode(process.execPath, healthcheckArgv('upstream', '8081').slice(1))).toBe(0);
      expect(seen.map((s) => s.url)).toEqual(['/readyz', '/healthz']);
    });
    await withServer(503, async () => expect(await exitCode(process.execPath, healthcheckArgv('gateway-authz', '9192').slice(1))).toBe(1));
  });

  it("Envoy's compose health check (bash /dev/tcp, no curl) passes on 200 from /ready and fails on 503", async () => {
    const argv = () => healthcheckArgv('envoy', '9901');
    expect(services.envoy.healthcheck.test[1]).toBe('bash');
    await withServer(200, async (seen) => {
      const [bash, ...args] = argv();
      expect(await exitCode(bash!, args)).toBe(0);
      expect(seen).toEqual([{ method: 'GET', url: '/ready' }]);
    });
    await withServer(503, async () => {
      const [bash, ...args] = argv();
      expect(await exitCode(bash!, args)).toBe(1);
    });
  });

  it('the Kubernetes Envoy preStop POSTs /drain_listeners?graceful to the admin port, and still sleeps if Envoy is gone', async () => {
    const deployment = parseYamlDocuments(readRepoFile('deploy', 'deployment.yaml'))[0] as IDeployment;
    const envoy = deployment.spec!.template.spec!.containers.find((c) => c.name === 'envoy')!;
    const [shell, flag, script] = envoy.lifecycle!.preStop!.exec!.command!;
    expect([shell, flag]).toEqual(['/bin/bash', '-c']);
    const local = (s: string) =>
      s
        .split('/dev/tcp/127.0.0.1/9901')
        .join(`/dev/tcp/127.0.0.1/${testPort()}`)
        .replace(/sleep \d+\s*$/, 'sleep 0');
    await withServer(200, async (seen) => {
      expect(await exitCode('bash', ['-c', local(script!)])).toBe(0);
      expect(seen).toEqual([{ method: 'POST', url: '/drain_listeners?graceful' }]);
    });
    // Admin not answering: the hook must not fail (the sleep is what keeps the pod serving).
    const nobody = await closedPort();
    const unanswered = script!
      .split('/dev/tcp/127.0.0.1/9901')
      .join(`/dev/tcp/127.0.0.1/${nobody}`)
      .replace(/sleep \d+\s*$/, 'sleep 0');
    expect(await exitCode('bash', ['-c', unanswered])).toBe(0);
  });
});

describe('admin token defaults', () => {
  const template = () => services['gateway-authz'].environment.ADMIN_TOKEN!;
  const requiredMessage = () => /^\$\{ADMIN_TOKEN:\?(.+)\}$/.exec(template())![1]!;

  it.each([
    ['unset', {}],
    ['empty', { ADMIN_TOKEN: '' }],
  ])('compose ships no admin token: with ADMIN_TOKEN %s it refuses to start, saying how to make one', (_label, shellEnv) => {
    expect(() => composeResolve(template(), shellEnv)).toThrow(
      'required variable ADMIN_TOKEN is missing a value: set ADMIN_TOKEN to a long random value first, e.g. export ADMIN_TOKEN=`openssl rand -hex 32`',
    );
  });

  it('the command the message suggests makes a token gateway-authz accepts', async () => {
    const command = /`([^`]+)`/.exec(requiredMessage())![1]!;
    expect(command).toBe('openssl rand -hex 32');
    const { stdout } = await run('bash', ['-c', command], { env: { PATH: process.env.PATH } });
    const token = stdout.trim();
    expect(token).toMatch(/^[0-9a-f]{64}$/);
    const loaded = loadSettings({ ADMIN_TOKEN: composeResolve(template(), { ADMIN_TOKEN: token }) });
    expect(loaded.ok ? loaded.settings.adminToken : loaded.problems).toBe(token);
  });

  it('no other ADMIN_TOKEN default hides anywhere in the compose file, and the message holds no $ (compose would read a variable)', () => {
    const text = readRepoFile('docker-compose.yml');
    expect(text).not.toMatch(/ADMIN_TOKEN:?-/);
    expect(text).not.toContain('change-me');
    expect(requiredMessage()).not.toContain('$');
  });

  it('the Kubernetes placeholder is refused by gateway-authz at start', () => {
    const placeholder = /^ADMIN_TOKEN=(.*)$/m.exec(readRepoFile('deploy', 'admin-token.env.example'))![1]!;
    const refused = loadSettings({ ADMIN_TOKEN: placeholder });
    expect(refused.ok).toBe(false);
    expect(refused.ok ? [] : refused.problems.join('\n')).toMatch(/ADMIN_TOKEN: must be at least 16 characters/);
  });
});

it('parses docker-compose.yml without YAML surprises (no duplicate keys, no merge keys)', () => {
  expect(() => parseYaml(readRepoFile('docker-compose.yml'))).not.toThrow();
  expect(readRepoFile('docker-compose.yml')).not.toContain('<<:');
});
