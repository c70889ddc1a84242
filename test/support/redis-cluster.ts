import { execFile } from 'node:child_process';
import { createServer } from 'node:net';
import { promisify } from 'node:util';
import Redis from 'ioredis';
import { spawnTestRedisServer, type TestRedis } from './redis-server';

const run = promisify(execFile);

export interface TestRedisCluster {
  /** `host:port,host:port,…`, as REDIS_CLUSTER_NODES takes it. */
  nodes: string;
  masters: TestRedis[];
  stop(): Promise<void>;
}

function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', () => resolve(false));
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(true)));
  });
}

/** A port whose cluster bus port (port + 10000) is free too. */
async function clusterPort(taken: Set<number>): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt += 1) {
    const port = 20_000 + Math.floor(Math.random() * 25_000);
    if (taken.has(port) || taken.has(port + 10_000)) continue;
    if ((await portIsFree(port)) && (await portIsFree(port + 10_000))) {
      taken.add(port);
      taken.add(port + 10_000);
      return port;
    }
  }
  throw new Error('no free port pair for a Redis Cluster node');
}

/**
 * A real Redis Cluster of three masters on loopback, built the way operators
 * do: redis-server in cluster mode, then `redis-cli --cluster create`.
 * Fails loudly when redis-server or redis-cli is missing.
 */
export async function startTestRedisCluster(): Promise<TestRedisCluster> {
  const taken = new Set<number>();
  const masters: TestRedis[] = [];
  try {
    for (let i = 0; i < 3; i += 1) {
      const port = await clusterPort(taken);
      masters.push(
        await spawnTestRedisServer({
          port,
          extraArgs: ['--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${port}.conf`, '--cluster-node-timeout', '2000'],
        }),
      );
    }
    const addresses = masters.map((m) => `127.0.0.1:${m.port}`);
    try {
      await run('redis-cli', ['--cluster', 'create', ...addresses, '--cluster-replicas', '0', '--cluster-yes'], { timeout: 20_000 });
    } catch (error) {
      throw new Error(
        `redis-cli --cluster create failed (is redis-cli installed? apt-get install -y redis-tools): ${(error as Error).message}`,
      );
    }
    await waitForClusterOk(masters);
    return {
      nodes: addresses.join(','),
      masters,
      stop: async () => {
        await Promise.all(masters.map((m) => m.stop()));
      },
    };
  } catch (error) {
    await Promise.all(masters.map((m) => m.stop()));
    throw error;
  }
}

async function waitForClusterOk(masters: TestRedis[]): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    const states = await Promise.all(
      masters.map(async (m) => {
        const client = new Redis(m.url, { lazyConnect: true, disconnectTimeout: 50, maxRetriesPerRequest: 0 });
        try {
          await client.connect();
          return /cluster_state:ok/.test(String(await client.call('CLUSTER', 'INFO')));
        } catch {
          return false;
        } finally {
          client.disconnect();
        }
      }),
    );
    if (states.every(Boolean)) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('Redis Cluster did not reach cluster_state:ok within 15 s');
}
