import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import Redis from 'ioredis';
import { NO_TOKEN_BUDGETS } from '../../src/accounts/limits/token-budgets';
import type { UsageRecord } from '../../src/metering/usage-record';
import { Metrics } from '../../src/platform/metrics';
import type { UsageDurability } from '../../src/platform/settings';
import { redisKeys } from '../../src/store/redis/redis-keys';
import { RedisStore } from '../../src/store/redis/redis-store';
import { CorruptRecordError } from '../../src/ports/store';
import { UsageRecorder } from '../../src/metering/usage-recorder';
import { LogCapture } from '../support/log-capture';
import { startTestRedisCluster } from '../support/redis-cluster';
import { spawnTestRedisServer, spawnTestRedisServerAtLeast, type TestRedis } from '../support/redis-server';

/**
 * Issue 35 §7, on real redis-servers: a usage record's debit, ledger record
 * and stream entry are one script (kept or lost together), and a record
 * leaves the recorder's buffer only once it is durable as USAGE_DURABILITY
 * asks: appendfsync-always (checked at start and with every batch),
 * wait-replicas (a real replica, stopped and replaced), waitaof (on a
 * server that has WAITAOF, Redis 7.2 or later or Valkey: a real replica
 * whose AOF counts, stopped and replaced; refused at start on an older
 * Redis).
 */
jest.setTimeout(60_000);

const NOW = Date.parse('2026-11-22T12:00:00Z');
const START_BALANCE = 1_000_000;
const dirs: string[] = [];
const servers: TestRedis[] = [];
const stores: RedisStore[] = [];

afterEach(async () => {
  await Promise.all(stores.splice(0).map((store) => store.close()));
  await Promise.all(servers.splice(0).map((server) => server.stop()));
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

async function redisServer(
  extraArgs: string[] = [],
  options: { appendOnly?: boolean; dir?: string; port?: number } = {},
): Promise<TestRedis> {
  const server = await spawnTestRedisServer({ appendOnly: options.appendOnly ?? true, extraArgs, ...options });
  servers.push(server);
  return server;
}

/** A server that has WAITAOF: Redis 7.2 or later, or Valkey (the suite fails when the machine has none). */
async function waitaofServer(extraArgs: string[] = [], options: { appendOnly?: boolean; port?: number } = {}): Promise<TestRedis> {
  const server = await spawnTestRedisServerAtLeast([7, 2], { appendOnly: options.appendOnly ?? true, extraArgs, ...options });
  servers.push(server);
  return server;
}

async function connect(url: string, usageDurability?: UsageDurability): Promise<RedisStore> {
  const store = await RedisStore.connect({
    url,
    commandTimeoutMs: 200,
    adminCommandTimeoutMs: 1_000,
    clockOverride: () => NOW,
    ...(usageDurability ? { usageDurability } : {}),
  });
  stores.push(store);
  return store;
}

let sequence = 0;
function record(accountId: string, costMinorUnits = 7): UsageRecord {
  sequence += 1;
  return {
    requestId: `durable-${sequence}-${Math.random().toString(36).slice(2, 8)}`,
    accountId,
    keyId: 'key_one',
    keyPrefix: 'gk_live_AbC4',
    family: 'chat-completions',
    style: 'chat',
    model: 'gpt-4o-mini',
    tokens: { inputTokens: 100, outputTokens: 20, cachedInputTokens: 0, cacheCreationTokens: 0 },
    costMinorUnits,
    estimated: false,
    atMs: NOW,
  };
}

async function account(store: RedisStore, id: string): Promise<string> {
  await store.createAccount({ id, name: id, status: 'active', createdAt: '2026-11-01T00:00:00.000Z', creditBalance: START_BALANCE });
  return id;
}

function recorderFor(store: RedisStore) {
  const logs = new LogCapture();
  const recorder = new UsageRecorder(store, NO_TOKEN_BUDGETS, logs.logger, new Metrics(), {
    maxBuffered: 10_000,
    firstRetryMs: 20,
    maxRetryMs: 200,
  });
  return { recorder, logs };
}

async function until(condition: () => boolean | Promise<boolean>, what: string, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > end) throw new Error(`not in time: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Request ids of the stream's entries for these accounts, with each entry's cost. */
async function streamed(client: Redis): Promise<{ requestId: string; accountId: string; cost: number }[]> {
  const entries = await client.xrange(redisKeys.usageStream(), '-', '+');
  return entries.map(([, fields]) => {
    const field = (name: string) => fields[fields.indexOf(name) + 1]!;
    return { requestId: field('requestId'), accountId: field('accountId'), cost: Number(field('costMinorUnits')) };
  });
}

const balanceOf = async (store: RedisStore, accountId: string) => (await store.getAccount(accountId))?.creditBalance;

function redisVersion(): [number, number] {
  const text = execFileSync('redis-server', ['--version'], { encoding: 'utf8' });
  const match = /v=(\d+)\.(\d+)/.exec(text);
  return match ? [Number(match[1]), Number(match[2])] : [0, 0];
}

describe('one script applies the debit, the ledger record and the stream entry', () => {
  it('writes them as one MULTI/EXEC in the AOF, so a crash keeps or loses them together', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gateway-authz-durable-'));
    dirs.push(dir);
    const server = await redisServer(['--appendfsync', 'always'], { dir });
    const store = await connect(server.url);
    const accountId = await account(store, 'one-script');
    const applied = record(accountId);
    expect((await store.applyUsage(applied, NO_TOKEN_BUDGETS)).kind).toBe('applied');
    const aofDir = path.join(dir, 'appendonlydir');
    const aof = fs
      .readdirSync(aofDir)
      .filter((name) => name.endsWith('.incr.aof'))
      .map((name) => fs.readFileSync(path.join(aofDir, name), 'latin1'))
      .join('');
    // The block that debits the account: from the MULTI before the debit to the EXEC after it.
    const debit = aof.indexOf(redisKeys.usageApplied(accountId, applied.requestId));
    expect(debit).toBeGreaterThan(0);
    const block = aof.slice(aof.lastIndexOf('MULTI', debit), aof.indexOf('EXEC', debit));
    expect(block).toContain('creditBalance');
    expect(block).toContain('XADD');
    expect(block).toContain(redisKeys.usageStream());
    expect(block).toContain(applied.requestId);
  });

  it('writes nothing when the stream cannot be written: the account is not debited', async () => {
    const server = await redisServer();
    const store = await connect(server.url);
    const client = new Redis(server.url);
    try {
      const accountId = await account(store, 'stream-broken');
      const applied = record(accountId);
      await client.set(redisKeys.usageStream(), 'not a stream');
      await expect(store.applyUsage(applied, NO_TOKEN_BUDGETS)).rejects.toThrow(CorruptRecordError);
      expect(await balanceOf(store, accountId)).toBe(START_BALANCE);
      expect(await client.exists(redisKeys.usageApplied(accountId, applied.requestId))).toBe(0);
      // Repaired, the same record is applied and streamed once; again, it changes nothing.
      await client.del(redisKeys.usageStream());
      expect(await store.applyUsage(applied, NO_TOKEN_BUDGETS)).toEqual({ kind: 'applied', billing: 'prepaid', creditShortfall: 0 });
      expect(await store.applyUsage(applied, NO_TOKEN_BUDGETS)).toEqual({ kind: 'duplicate', billing: 'prepaid', creditShortfall: 0 });
      expect(await balanceOf(store, accountId)).toBe(START_BALANCE - applied.costMinorUnits);
      expect(await streamed(client)).toEqual([{ requestId: applied.requestId, accountId, cost: applied.costMinorUnits }]);
      const [[, fields]] = (await client.xrange(redisKeys.usageStream(), '-', '+')) as [string, string[]][] as [[string, string[]]];
      expect(fields.slice(fields.indexOf('billing'), fields.indexOf('billing') + 4)).toEqual([
        'billing',
        'prepaid',
        'creditShortfall',
        '0',
      ]);
    } finally {
      client.disconnect();
    }
  });
});

describe('USAGE_DURABILITY=appendfsync-always', () => {
  const always: UsageDurability = { mode: 'appendfsync-always' };

  it('refuses to start against a Redis that does not fsync every write, saying what it runs', async () => {
    const everysec = await redisServer(['--appendfsync', 'everysec']);
    await expect(connect(everysec.url, always)).rejects.toThrow(
      /USAGE_DURABILITY=appendfsync-always: .*Redis runs appendonly yes, appendfsync everysec; USAGE_DURABILITY=appendfsync-always needs appendonly yes and appendfsync always/,
    );
    const noAof = await redisServer([], { appendOnly: false });
    await expect(connect(noAof.url, always)).rejects.toThrow(/appendonly no/);
  });

  it('refuses to start, saying so, when CONFIG is disabled and appendfsync cannot be checked', async () => {
    const locked = await redisServer(['--appendfsync', 'always', '--rename-command', 'CONFIG', '']);
    await expect(connect(locked.url, always)).rejects.toThrow(/CONFIG GET is refused .*so appendfsync cannot be checked/);
  });

  it('holds records while Redis stops fsyncing every write, and sends them once it does again, each charged once', async () => {
    const server = await redisServer(['--appendfsync', 'always']);
    const store = await connect(server.url, always);
    const accountId = await account(store, 'fsync');
    const { recorder, logs } = recorderFor(store);
    const client = new Redis(server.url);
    try {
      recorder.record(record(accountId));
      await until(() => recorder.buffered === 0, 'first record drained');
      await client.config('SET', 'appendfsync', 'everysec');
      const held = [record(accountId), record(accountId), record(accountId)];
      for (const r of held) recorder.record(r);
      await until(() => logs.events('usage_not_durable').length >= 2, 'records found not durable');
      expect(recorder.buffered).toBe(3);
      expect(logs.events('usage_not_durable')[0]).toMatchObject({ detail: expect.stringContaining('appendfsync everysec') });
      await client.config('SET', 'appendfsync', 'always');
      await until(() => recorder.buffered === 0, 'held records drained');
      expect(await balanceOf(store, accountId)).toBe(START_BALANCE - 4 * 7);
      expect((await streamed(client)).filter((entry) => entry.accountId === accountId)).toHaveLength(4);
    } finally {
      client.disconnect();
      await recorder.stop(Date.now() + 100);
    }
  });
});

describe('USAGE_DURABILITY=appendfsync-always on Redis Cluster', () => {
  it('checks every master at start, then records go in two steps, each once', async () => {
    const cluster = await startTestRedisCluster();
    try {
      const nodes = cluster.nodes.split(',').map((node) => ({ host: node.split(':')[0]!, port: Number(node.split(':')[1]) }));
      const open = () =>
        RedisStore.connect({
          topology: { mode: 'cluster', nodes },
          commandTimeoutMs: 500,
          adminCommandTimeoutMs: 1_000,
          clockOverride: () => NOW,
          usageDurability: { mode: 'appendfsync-always' },
        });
      const refusal = await open().then(
        () => '',
        (error: Error) => error.message,
      );
      for (const master of cluster.masters) expect(refusal).toContain(`:${master.port}: Redis runs appendonly no, appendfsync everysec`);
      for (const master of cluster.masters) {
        const client = new Redis(master.url);
        await client.config('SET', 'appendonly', 'yes', 'appendfsync', 'always');
        client.disconnect();
      }
      const store = await open();
      stores.push(store);
      expect(store.streamsOnApply).toBe(false);
      const accountId = await account(store, 'cluster-fsync');
      const { recorder } = recorderFor(store);
      const r = record(accountId);
      recorder.record(r);
      await until(() => recorder.buffered === 0, 'drained on the cluster');
      expect(await balanceOf(store, accountId)).toBe(START_BALANCE - 7);
      expect((await store.readUsageStream({ count: 1_000 })).filter((entry) => entry.fields.requestId === r.requestId)).toHaveLength(1);
      await recorder.stop(Date.now() + 100);
    } finally {
      await Promise.all(stores.splice(0).map((store) => store.close()));
      await cluster.stop();
    }
  });
});

describe('USAGE_DURABILITY=wait-replicas', () => {
  it('holds records while the replica is gone, and sends them once a replica acknowledges, each charged once', async () => {
    await heldWhileTheReplicaIsGone(
      redisServer,
      [],
      { mode: 'wait-replicas', replicas: 1, timeoutMs: 200 },
      'replicated',
      'WAIT 1: 0 replica(s) acknowledged within 200 ms',
    );
  });
});

describe("USAGE_DURABILITY=wait-replicas: a WAIT counts only its own connection's writes", () => {
  async function masterAndReplica() {
    const master = await redisServer(['--repl-diskless-sync-delay', '0']);
    const replica = await redisServer(['--replicaof', '127.0.0.1', String(master.port)]);
    await replicaInSync(replica);
    return { master, replica };
  }

  // Redis 7.2 and later count, for WAIT, only the writes of the connection itself; 7.0 moves a connection's offset to the
  // master's with every command it sends, so there this test passes even without the marker's rewrite (the next test
  // shows that rewrite on any version).
  it('a record applied on another connection and not yet replicated is held, though its repeat writes nothing new', async () => {
    const { master, replica } = await masterAndReplica();
    const elsewhere = await connect(master.url);
    const store = await connect(master.url, { mode: 'wait-replicas', replicas: 1, timeoutMs: 200 });
    const accountId = await account(store, 'applied-elsewhere');
    await until(async () => (await replicaBalance(replica, accountId)) === String(START_BALANCE), 'account on the replica');
    // The replica stays connected but acknowledges nothing: what the master writes now is on the master alone.
    process.kill(replica.pid!, 'SIGSTOP');
    const { recorder, logs } = recorderFor(store);
    try {
      const r = record(accountId);
      expect((await elsewhere.applyUsage(r, NO_TOKEN_BUDGETS)).kind).toBe('applied');
      recorder.record(r);
      await until(() => logs.events('usage_not_durable').length >= 2, 'record found not durable');
      expect(recorder.buffered).toBe(1);
      process.kill(replica.pid!, 'SIGCONT');
      await until(() => recorder.buffered === 0, 'drained once the replica has it');
      expect(await replicaBalance(replica, accountId)).toBe(String(START_BALANCE - 7));
    } finally {
      process.kill(replica.pid!, 'SIGCONT');
      await recorder.stop(Date.now() + 100);
    }
  });

  it('writes answered on a connection since re-established are not counted durable', async () => {
    const { master } = await masterAndReplica();
    // A WAIT returns once the replica acknowledges; 200 ms was sometimes too short for it on a busy machine.
    const store = await connect(master.url, { mode: 'wait-replicas', replicas: 1, timeoutMs: 2_000 });
    const accountId = await account(store, 'reconnected');
    const r = record(accountId);
    expect((await store.applyUsage(r, NO_TOKEN_BUDGETS)).kind).toBe('applied');
    // The connection drops after the reply and ioredis opens a new one: a WAIT there would count nothing of the write.
    const usage = (store as unknown as { usage: { redis: Redis } }).usage.redis;
    const ready = new Promise((resolve) => usage.once('ready', resolve));
    usage.disconnect(true);
    await ready;
    expect(await store.usageDurabilityShortfall()).toBe('the usage connection was re-established since the writes');
    // Sent again, on this connection, the same record writes (its marker, unchanged) and is confirmed.
    const client = new Redis(master.url);
    try {
      const offset = async () => Number(/master_repl_offset:(\d+)/.exec(await client.info('replication'))![1]);
      const before = await offset();
      expect((await store.applyUsage(r, NO_TOKEN_BUDGETS)).kind).toBe('duplicate');
      expect(await offset()).toBeGreaterThan(before);
    } finally {
      client.disconnect();
    }
    expect(await store.usageDurabilityShortfall()).toBeUndefined();
  });
});

async function replicaBalance(replica: TestRedis, accountId: string): Promise<string | null> {
  const client = new Redis(replica.url);
  try {
    return await client.hget(redisKeys.account(accountId), 'creditBalance');
  } finally {
    client.disconnect();
  }
}

describe('USAGE_DURABILITY=waitaof', () => {
  // The machine's redis-server when it is older than 7.2 (Debian bookworm's 7.0): the refusal at start is tested on it.
  const [major, minor] = redisVersion();
  const olderThan72 = major < 7 || (major === 7 && minor < 2);
  if (!olderThan72) {
    // Loud on purpose: no server older than 7.2 is at hand, so the refusal below is not exercised on this machine.
    console.warn(`redis-server here is ${major}.${minor}: the refusal of USAGE_DURABILITY=waitaof below Redis 7.2 is not tested here.`);
  }

  (olderThan72 ? it : it.skip)(`refuses to start on Redis ${major}.${minor} (older than 7.2), naming the version`, async () => {
    const server = await redisServer();
    await expect(connect(server.url, { mode: 'waitaof', replicas: 0, timeoutMs: 200 })).rejects.toThrow(
      new RegExp(
        `^USAGE_DURABILITY=waitaof needs Redis 7\\.2 or later \\(WAITAOF\\); Redis at \\S+:${server.port}\\S* runs ${major}\\.${minor}:`,
      ),
    );
  });

  // The rest on a server that has WAITAOF (waitaofServer): the suite fails when the machine has none.
  it('drains once the local AOF is fsynced, and refuses to start without appendonly', async () => {
    const server = await waitaofServer(['--appendfsync', 'everysec']);
    const store = await connect(server.url, { mode: 'waitaof', replicas: 0, timeoutMs: 500 });
    const accountId = await account(store, 'waitaof');
    const { recorder } = recorderFor(store);
    recorder.record(record(accountId));
    await until(() => recorder.buffered === 0, 'drained after WAITAOF');
    expect(await balanceOf(store, accountId)).toBe(START_BALANCE - 7);
    await recorder.stop(Date.now() + 100);
    const noAof = await waitaofServer([], { appendOnly: false });
    await expect(connect(noAof.url, { mode: 'waitaof', replicas: 0, timeoutMs: 500 })).rejects.toThrow(
      /^USAGE_DURABILITY=waitaof: Redis at \S+ refused WAITAOF \(.*\); it needs appendonly yes$/,
    );
  });

  it("holds records while the replica's AOF is gone, and sends them once a replica fsyncs them, each charged once", async () => {
    await heldWhileTheReplicaIsGone(
      waitaofServer,
      ['--appendfsync', 'everysec'],
      { mode: 'waitaof', replicas: 1, timeoutMs: 200 },
      'waitaof-replicated',
      'WAITAOF 1 1: local AOF fsynced, 0 replica AOF(s) within 200 ms',
    );
  });

  it('does not count a replica that acknowledges the writes but keeps no AOF', async () => {
    const master = await waitaofServer(['--appendfsync', 'everysec', '--repl-diskless-sync-delay', '0']);
    const replica = await waitaofServer(['--replicaof', '127.0.0.1', String(master.port)], { appendOnly: false });
    await replicaInSync(replica);
    const store = await connect(master.url, { mode: 'waitaof', replicas: 1, timeoutMs: 200 });
    const accountId = await account(store, 'waitaof-no-replica-aof');
    // The replica acknowledges writes at once (a WAIT would count it): only its missing AOF can hold the record below.
    const probe = new Redis(master.url);
    try {
      await until(async () => {
        await probe.set('replica-acknowledges', String(Date.now()));
        return (await probe.wait(1, 200)) === 1;
      }, 'the replica acknowledging writes');
    } finally {
      probe.disconnect();
    }
    const { recorder, logs } = recorderFor(store);
    try {
      const r = record(accountId);
      recorder.record(r);
      await until(() => logs.events('usage_not_durable').length >= 2, 'record found not durable');
      expect(recorder.buffered).toBe(1);
      // The replica has the write (WAIT would count it), but no AOF to fsync it to.
      await until(async () => (await replicaBalance(replica, accountId)) === String(START_BALANCE - 7), 'the write on the replica');
      expect(logs.events('usage_not_durable').at(-1)).toMatchObject({
        detail: 'WAITAOF 1 1: local AOF fsynced, 0 replica AOF(s) within 200 ms',
      });
      // Once the replica turns its AOF on, the next try counts it.
      const replicaClient = new Redis(replica.url);
      try {
        await replicaClient.config('SET', 'appendonly', 'yes');
      } finally {
        replicaClient.disconnect();
      }
      await until(() => recorder.buffered === 0, 'drained once the replica keeps an AOF');
      expect(await balanceOf(store, accountId)).toBe(START_BALANCE - 7);
    } finally {
      await recorder.stop(Date.now() + 100);
    }
  });
});

async function infoOf(server: TestRedis, section: string): Promise<string> {
  const client = new Redis(server.url);
  try {
    return await client.info(section);
  } finally {
    client.disconnect();
  }
}

async function replicaInSync(replica: TestRedis): Promise<void> {
  await until(async () => (await infoOf(replica, 'replication')).includes('master_link_status:up'), 'replica in sync');
}

/**
 * With one replica, a record drains. With the replica killed, five more are held (each batch logged not durable,
 * saying `shortfall`) and applied once on the master however often they are sent again; a new replica on the same port
 * drains them, and then holds the same debit and stream entries as the master.
 */
async function heldWhileTheReplicaIsGone(
  server: (extraArgs: string[], options?: { port?: number }) => Promise<TestRedis>,
  masterArgs: string[],
  durability: UsageDurability,
  accountName: string,
  shortfall: string,
): Promise<void> {
  // No delay before a full sync (7.0 waits 5 s for more replicas by default).
  const master = await server([...masterArgs, '--repl-diskless-sync-delay', '0']);
  const startReplica = async (port?: number) => {
    const replica = await server(['--replicaof', '127.0.0.1', String(master.port)], port !== undefined ? { port } : {});
    await replicaInSync(replica);
    return replica;
  };
  let replica = await startReplica();
  const store = await connect(master.url, durability);
  const accountId = await account(store, accountName);
  const { recorder, logs } = recorderFor(store);
  const client = new Redis(master.url);
  try {
    recorder.record(record(accountId));
    await until(() => recorder.buffered === 0, 'drained with the replica up');
    process.kill(replica.pid!, 'SIGKILL');
    const port = replica.port;
    await replica.stop();
    const held = Array.from({ length: 5 }, () => record(accountId));
    for (const r of held) recorder.record(r);
    await until(() => logs.events('usage_not_durable').length >= 3, 'records found not durable');
    expect(recorder.buffered).toBe(5);
    expect(logs.events('usage_not_durable')[0]).toMatchObject({ detail: shortfall });
    // Applied once on the master, however often sent again. (Read until it shows: one run in four read the balance of
    // the first record alone here, and the full balance a moment later; not explained yet.)
    await until(async () => (await balanceOf(store, accountId)) === START_BALANCE - 6 * 7, 'the held records applied');
    replica = await startReplica(port);
    await until(() => recorder.buffered === 0, 'drained once a replica is back');
    expect(await balanceOf(store, accountId)).toBe(START_BALANCE - 6 * 7);
    expect((await streamed(client)).filter((entry) => entry.accountId === accountId)).toHaveLength(6);
    // And the replica holds the same debit and entries.
    expect(await replicaBalance(replica, accountId)).toBe(String(START_BALANCE - 6 * 7));
    const replicaClient = new Redis(replica.url);
    try {
      expect(await replicaClient.xlen(redisKeys.usageStream())).toBe(6);
    } finally {
      replicaClient.disconnect();
    }
  } finally {
    client.disconnect();
    await recorder.stop(Date.now() + 100);
  }
}
