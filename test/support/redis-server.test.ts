import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import Redis from 'ioredis';
import {
  findRedisServerBinary,
  findServerBinaryAtLeast,
  probeDockerEngine,
  serverBinaryOf,
  spawnTestRedisServerAtLeast,
  startTestRedis,
  type TestRedis,
  type TestRedisDeps,
} from './redis-server';

/** Same resolution as production, minus TEST_REDIS_URL: we must own the instance to test stop(). */
const OWNED: Partial<TestRedisDeps> = { env: { ...process.env, TEST_REDIS_URL: '' } };

function client(r: { host: string; port: number }): Redis {
  const c = new Redis({
    host: r.host,
    port: r.port,
    lazyConnect: true,
    connectTimeout: 1000,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
    disconnectTimeout: 50, // ioredis leaks this timer (default 2 s) after a failed connect
  });
  c.on('error', () => undefined);
  return c;
}

async function withClient<T>(r: { host: string; port: number }, fn: (c: Redis) => Promise<T>): Promise<T> {
  const c = client(r);
  try {
    await c.connect();
    return await fn(c);
  } finally {
    c.disconnect();
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

const started: TestRedis[] = [];
async function start(...args: Parameters<typeof startTestRedis>): Promise<TestRedis> {
  const r = await startTestRedis(...args);
  started.push(r);
  return r;
}

afterAll(async () => {
  await Promise.all(started.map((r) => r.stop()));
});

describe('startTestRedis', () => {
  it('starts a Redis that answers SET/GET through ioredis', async () => {
    const r = await start({}, OWNED);
    expect(r.url).toBe(`redis://${r.host}:${r.port}`);
    expect(r.port).toBeGreaterThan(0);
    await withClient(r, async (c) => {
      expect(await c.set('k', 'v')).toBe('OK');
      expect(await c.get('k')).toBe('v');
      // not persistent unless asked
      expect(await c.config('GET', 'appendonly')).toEqual(['appendonly', 'no']);
      expect(await c.config('GET', 'save')).toEqual(['save', '']);
    });
    // the URL form works too
    const viaUrl = new Redis(r.url, {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      disconnectTimeout: 50,
    });
    viaUrl.on('error', () => undefined);
    try {
      await viaUrl.connect();
      expect(await viaUrl.get('k')).toBe('v');
    } finally {
      viaUrl.disconnect();
    }
  });

  it('stop() really stops it: the process is gone and new connections fail', async () => {
    const r = await startTestRedis({}, OWNED);
    let tempDir: string | undefined;
    await withClient(r, async (c) => {
      await c.set('x', '1');
      const dirReply = (await c.config('GET', 'dir')) as string[];
      tempDir = dirReply[1];
    });
    await r.stop();
    await r.stop(); // idempotent

    if (r.pid !== undefined) {
      expect(processAlive(r.pid)).toBe(false);
      // the fresh temp data dir is removed
      expect(tempDir).toBeDefined();
      expect(fs.existsSync(tempDir as string)).toBe(false);
    }
    await expect(withClient(r, (c) => c.ping())).rejects.toThrow();
  });

  it('two instances at once get different ports and separate data', async () => {
    const [a, b] = await Promise.all([start({}, OWNED), start({}, OWNED)]);
    expect(a.port).not.toBe(b.port);
    if (a.pid !== undefined && b.pid !== undefined) expect(a.pid).not.toBe(b.pid);
    await withClient(a, (c) => c.set('only-in-a', '1'));
    expect(await withClient(b, (c) => c.exists('only-in-a'))).toBe(0);
    expect(await withClient(a, (c) => c.exists('only-in-a'))).toBe(1);
  });

  it('honours appendOnly, and keeps a caller-supplied dir on stop()', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'redis-server-test-dir-'));
    try {
      const r = await startTestRedis({ appendOnly: true, dir }, OWNED);
      try {
        await withClient(r, async (c) => {
          expect(await c.config('GET', 'appendonly')).toEqual(['appendonly', 'yes']);
          await c.set('persisted', 'yes');
          if (r.pid !== undefined) {
            const dirReply = (await c.config('GET', 'dir')) as string[];
            expect(dirReply[1]).toBe(fs.realpathSync(dir));
          }
        });
      } finally {
        await r.stop();
      }
      if (r.pid !== undefined) {
        expect(fs.existsSync(dir)).toBe(true);
        expect(fs.readdirSync(dir).length).toBeGreaterThan(0); // AOF written
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('uses TEST_REDIS_URL as-is, and its stop() does not stop that server', async () => {
    const real = await start({}, OWNED);
    await withClient(real, (c) => c.set('shared', 'here'));
    const ext = await startTestRedis({}, { env: { TEST_REDIS_URL: real.url, PATH: '' }, dockerAvailable: async () => false });
    expect(ext).toMatchObject({ url: real.url, host: real.host, port: real.port });
    expect(ext.pid).toBeUndefined();
    // no automatic FLUSHALL
    expect(await withClient(ext, (c) => c.get('shared'))).toBe('here');
    await ext.stop();
    expect(await withClient(real, (c) => c.ping())).toBe('PONG');
  });

  it('fails loudly (never skips) when there is no TEST_REDIS_URL, no Docker engine and no redis-server', async () => {
    const attempt = startTestRedis({}, { env: { PATH: '' }, fallbackBinaries: [], dockerAvailable: async () => false });
    await expect(attempt).rejects.toThrow(/TEST_REDIS_URL is not set/);
    await expect(attempt).rejects.toThrow(/no Docker engine/);
    await expect(attempt).rejects.toThrow(/no executable redis-server found on PATH/);
    await expect(attempt).rejects.toThrow(/apt-get install -y redis-server/);
  });

  it('reports a redis-server that dies at startup instead of hanging', async () => {
    const bin = fs.mkdtempSync(path.join(os.tmpdir(), 'fake-redis-bin-'));
    try {
      const fake = path.join(bin, 'redis-server');
      fs.writeFileSync(fake, '#!/bin/sh\necho "fatal: simulated startup failure" >&2\nexit 3\n', { mode: 0o755 });
      const t0 = Date.now();
      await expect(startTestRedis({}, { env: { PATH: bin }, fallbackBinaries: [], dockerAvailable: async () => false })).rejects.toThrow(
        /exited early \(code 3[\s\S]*simulated startup failure/,
      );
      expect(Date.now() - t0).toBeLessThan(5000);
    } finally {
      fs.rmSync(bin, { recursive: true, force: true });
    }
  });
});

describe('findRedisServerBinary', () => {
  it('searches PATH in order, then the fallbacks, and ignores non-executables', () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'find-redis-'));
    try {
      const [d1, d2, d3] = ['a', 'b', 'c'].map((n) => path.join(root, n)) as [string, string, string];
      for (const d of [d1, d2, d3]) fs.mkdirSync(d);
      fs.writeFileSync(path.join(d1, 'redis-server'), '', { mode: 0o644 }); // not executable
      fs.writeFileSync(path.join(d2, 'redis-server'), '#!/bin/sh\n', { mode: 0o755 });
      fs.writeFileSync(path.join(d3, 'redis-server'), '#!/bin/sh\n', { mode: 0o755 });
      const p = [d1, d2].join(path.delimiter);
      expect(findRedisServerBinary(p, [])).toBe(path.join(d2, 'redis-server'));
      expect(findRedisServerBinary(d1, [path.join(d3, 'redis-server')])).toBe(path.join(d3, 'redis-server'));
      expect(findRedisServerBinary('', [])).toBeUndefined();
      expect(findRedisServerBinary(undefined, [path.join(d1, 'redis-server')])).toBeUndefined();
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});

describe('findServerBinaryAtLeast', () => {
  it('reads the version each binary prints: Redis as it says, every Valkey as Redis 7.2', () => {
    expect(
      serverBinaryOf('/b/redis-server', 'Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=ae4d\n')?.speaks,
    ).toEqual([7, 0]);
    expect(serverBinaryOf('/b/redis-server', 'Redis server v=8.0.2 sha=0 bits=64')?.speaks).toEqual([8, 0]);
    expect(serverBinaryOf('/b/valkey-server', 'Valkey server v=8.0.1 sha=00000000:0 bits=64')?.speaks).toEqual([7, 2]);
    expect(serverBinaryOf('/b/x', 'KeyDB server v=6.3.4')).toBeUndefined();
  });

  it('takes the first redis-server or valkey-server on PATH that speaks the version asked for', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'server-binaries-'));
    try {
      const fake = (name: string, line: string) => {
        fs.writeFileSync(path.join(dir, name), `#!/bin/sh\necho '${line}'\n`, { mode: 0o755 });
      };
      fake('redis-server', 'Redis server v=7.0.15 sha=00000000:0 bits=64');
      fake('valkey-server', 'Valkey server v=8.0.1 sha=00000000:0 bits=64');
      expect(findServerBinaryAtLeast(7, 0, dir, [])?.binary).toBe(path.join(dir, 'redis-server'));
      expect(findServerBinaryAtLeast(7, 2, dir, [])?.binary).toBe(path.join(dir, 'valkey-server'));
      expect(findServerBinaryAtLeast(7, 4, dir, [])).toBeUndefined();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('spawns a server that answers INFO as Redis 7.2 or later (this machine must have one: .ci/run installs it)', async () => {
    const server = await spawnTestRedisServerAtLeast([7, 2]);
    try {
      const info = await withClient(server, (c) => c.info('server'));
      const [, major, minor] = /redis_version:(\d+)\.(\d+)/.exec(info)!.map(Number);
      expect(major! > 7 || (major === 7 && minor! >= 2)).toBe(true);
      expect(await withClient(server, (c) => c.call('WAITAOF', 0, 0, 0))).toEqual([0, 0]);
    } finally {
      await server.stop();
    }
  });
});

describe('probeDockerEngine', () => {
  it('answers within ~2 s whether or not an engine exists', async () => {
    const t0 = Date.now();
    const result = await probeDockerEngine();
    expect(typeof result).toBe('boolean');
    expect(Date.now() - t0).toBeLessThan(3000);
  });
});
