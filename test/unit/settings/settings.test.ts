import { classifyFamily } from '../../../src/check/routes/classify';
import {
  DEFAULT_MESSAGES_VERSIONS,
  DEFAULT_PLAN,
  LOG_LEVELS,
  deepFreeze,
  loadCliSettings,
  loadSettings,
  type Settings,
} from '../../../src/platform/settings';

type Env = Record<string, string | undefined>;

const noFile = (path: string): string => {
  throw new Error(`test did not expect a read of ${path}`);
};

function settingsOf(env: Env, readFile: (path: string) => string = noFile): Settings {
  const result = loadSettings(env, readFile);
  if (!result.ok) throw new Error(`expected valid settings, got: ${result.problems.join('; ')}`);
  return result.settings;
}

function problemsOf(env: Env, readFile: (path: string) => string = noFile): string[] {
  const result = loadSettings(env, readFile);
  if (result.ok) throw new Error('expected problems, got valid settings');
  return result.problems;
}

/** A readFile that serves a fixed set of files and fails like fs for the rest. */
function files(contents: Record<string, string>): (path: string) => string {
  return (path) => {
    const text = contents[path];
    if (text === undefined) throw new Error(`ENOENT: no such file or directory, open '${path}'`);
    return text;
  };
}

function withConfig(config: unknown, path = '/etc/gateway/config.json') {
  return loadSettings({ CONFIG_FILE: path }, files({ [path]: JSON.stringify(config) }));
}

describe('defaults', () => {
  const settings = settingsOf({});

  it('has the documented default values', () => {
    expect(settings).toMatchObject({
      grpcPort: 9191,
      adminPort: 9192,
      grpcBindAddress: '127.0.0.1',
      adminBindAddress: '127.0.0.1',
      customerBindAddress: '127.0.0.1',
      redisTimeoutMs: 50,
      redisAdminTimeoutMs: 2000,
      logLevel: 'info',
      storeFailureMode: 'deny',
      keyCache: { maxEntries: 200_000, negativeTtlMs: 2_000 },
      lastUsedFlushMs: 30_000,
      decisionLogSample: 1,
    });
    expect(settings.pipeline.defaultPlan).toEqual(DEFAULT_PLAN);
  });

  it('GRPC_WORKERS: 1 by default; more than one needs Redis', () => {
    expect(settings.grpcWorkers).toBe(1);
    const withRedis = loadSettings({ GRPC_WORKERS: '2', REDIS_URL: 'redis://cache:6379' });
    expect(withRedis.ok && withRedis.settings.grpcWorkers).toBe(2);
    const withoutRedis = loadSettings({ GRPC_WORKERS: '2' });
    expect(withoutRedis.ok).toBe(false);
    if (!withoutRedis.ok) expect(withoutRedis.problems).toEqual([expect.stringMatching(/^GRPC_WORKERS: more than one worker needs Redis/)]);
    expect(loadSettings({ GRPC_WORKERS: '0', REDIS_URL: 'redis://cache:6379' }).ok).toBe(false);
  });

  it('DECISION_LOG_SAMPLE: a fraction from 0 to 1', () => {
    const sample = (value: string) => loadSettings({ DECISION_LOG_SAMPLE: value });
    const ok = sample('0.01');
    expect(ok.ok && ok.settings.decisionLogSample).toBe(0.01);
    const zero = sample('0');
    expect(zero.ok && zero.settings.decisionLogSample).toBe(0);
    for (const bad of ['1.5', '-0.1', 'some']) {
      const result = sample(bad);
      expect(result.ok).toBe(false);
      if (!result.ok) expect(result.problems[0]).toMatch(/^DECISION_LOG_SAMPLE/);
    }
  });

  it('runtime: production only with NODE_ENV=production; an end-of-life Node.js is refused there unless ALLOW_END_OF_LIFE_NODE=true', () => {
    expect(settings.runtime).toEqual({ production: false, allowEndOfLifeNode: false });
    expect(settingsOf({ NODE_ENV: 'production' }).runtime).toEqual({ production: true, allowEndOfLifeNode: false });
    expect(settingsOf({ NODE_ENV: 'development' }).runtime.production).toBe(false);
    expect(settingsOf({ NODE_ENV: 'production', ALLOW_END_OF_LIFE_NODE: 'true' }).runtime).toEqual({
      production: true,
      allowEndOfLifeNode: true,
    });
    expect(settingsOf({ ALLOW_END_OF_LIFE_NODE: '' }).runtime.allowEndOfLifeNode).toBe(false);
    expect(problemsOf({ ALLOW_END_OF_LIFE_NODE: 'yes' })).toEqual([expect.stringMatching(/^ALLOW_END_OF_LIFE_NODE/)]);
  });

  it('has no Redis URL (in-memory store), no admin token and no config file', () => {
    expect('redis' in settings).toBe(false);
    expect('adminToken' in settings).toBe(false);
    expect('configFile' in settings).toBe(false);
  });

  it('pipeline defaults: the versions current official SDKs send, both header spellings, no query key, no public route', () => {
    // @anthropic-ai/sdk 0.x sends 2023-06-01, 1.x sends 2026-10-21.
    expect(settings.pipeline.acceptedVersions).toEqual(['2023-06-01', '2026-10-21']);
    expect(DEFAULT_MESSAGES_VERSIONS).toEqual(['2023-06-01', '2026-10-21']);
    expect(settings.pipeline.acceptQueryKey).toBe(false);
    expect(settings.pipeline.headerNames.versionHeaders).toEqual(['vendora-version', 'anthropic-version']);
    expect(settings.pipeline.headerNames.vendorgKeyHeaders).toEqual(['x-vendorg-api-key', 'x-goog-api-key']);
    expect(settings.pipeline.routeTable.publicRoutes).toHaveLength(0);
  });

  it('uses the default route table', () => {
    const table = settings.pipeline.routeTable;
    expect(classifyFamily(table, 'POST', '/v1/chat/completions')).toBe('chat-completions');
    expect(classifyFamily(table, 'POST', '/v1/messages')).toBe('messages');
    expect(classifyFamily(table, 'POST', '/v1beta/models/g:generateContent')).toBe('generative-content');
    expect(classifyFamily(table, 'GET', '/v1/models')).toBe('models');
  });

  it('ignores environment variables it does not know (the process environment has many)', () => {
    expect(loadSettings({ PATH: '/usr/bin', HOME: '/root', GRPC_PORTT: 'x' }).ok).toBe(true);
  });
});

describe('environment variables', () => {
  describe.each(['GRPC_PORT', 'ADMIN_PORT'] as const)('%s', (name) => {
    const field = name === 'GRPC_PORT' ? 'grpcPort' : 'adminPort';

    it.each([
      ['8080', 8080],
      ['65535', 65535],
      ['0', 0],
      [' 443 ', 443],
    ])('accepts %j', (value, expected) => {
      expect(settingsOf({ [name]: value })[field]).toBe(expected);
    });

    it.each(['abc', '-1', '65536', '80.5', '80abc'])('refuses %j, naming the variable', (value) => {
      const problems = problemsOf({ [name]: value });
      expect(problems).toHaveLength(1);
      expect(problems[0]).toMatch(new RegExp(`^${name}: `));
    });
  });

  describe.each([
    ['GRPC_BIND_ADDRESS', 'grpcBindAddress'],
    ['ADMIN_BIND_ADDRESS', 'adminBindAddress'],
    ['CUSTOMER_BIND_ADDRESS', 'customerBindAddress'],
  ] as const)('%s', (name, field) => {
    it.each([
      ['0.0.0.0', '0.0.0.0'],
      ['10.1.2.3', '10.1.2.3'],
      ['::', '::'],
      ['::1', '::1'],
      ['[::1]', '::1'],
      [' fd00::5 ', 'fd00::5'],
    ])('accepts %j as %j, and only for its own server', (value, expected) => {
      const settings = settingsOf({ [name]: value });
      expect(settings[field]).toBe(expected);
      for (const other of ['grpcBindAddress', 'adminBindAddress', 'customerBindAddress'] as const) {
        if (other !== field) expect(settings[other]).toBe('127.0.0.1');
      }
    });
    it('is loopback when unset or blank', () => {
      expect(settingsOf({ [name]: '  ' })[field]).toBe('127.0.0.1');
    });
    it.each(['localhost', 'example.com', '256.1.1.1', '127.0.0.1:9191', '[::1]:9191', '::g', '0.0.0.0/0'])(
      'refuses %j (an IP address only), naming the variable and the value',
      (value) => {
        expect(problemsOf({ [name]: value })).toEqual([
          `${name}: must be an IP address to listen on, such as 127.0.0.1, ::1, 0.0.0.0 or :: (got '${value}')`,
        ]);
      },
    );
  });

  describe('BIND_ADDRESS', () => {
    it('is refused, naming the three settings that replace it', () => {
      expect(problemsOf({ BIND_ADDRESS: '0.0.0.0' })).toEqual([
        expect.stringMatching(/^BIND_ADDRESS: replaced by GRPC_BIND_ADDRESS, ADMIN_BIND_ADDRESS and CUSTOMER_BIND_ADDRESS/),
      ]);
    });
    it('is ignored when blank, as every other setting', () => {
      expect(settingsOf({ BIND_ADDRESS: '' }).grpcBindAddress).toBe('127.0.0.1');
    });
  });

  describe('REDIS_URL', () => {
    it.each(['redis://localhost:6379', 'rediss://user:pw@cache.internal:6380/2'])('accepts %s', (url) => {
      expect(settingsOf({ REDIS_URL: url }).redis).toEqual({ mode: 'standalone', url });
    });
    it('trims surrounding whitespace', () => {
      expect(settingsOf({ REDIS_URL: '  redis://h:1  ' }).redis).toEqual({ mode: 'standalone', url: 'redis://h:1' });
    });
    it.each(['', '   '])('treats %j as absent', (value) => {
      expect('redis' in settingsOf({ REDIS_URL: value })).toBe(false);
    });
    it.each(['http://localhost:6379', 'localhost:6379', 'redis://', 'REDIS://h'])('refuses %s', (url) => {
      expect(problemsOf({ REDIS_URL: url })).toEqual(['REDIS_URL: must be a redis:// or rediss:// URL']);
    });
  });

  describe('REDIS_TIMEOUT_MS', () => {
    it.each([
      ['1', 1],
      ['1000', 1000],
      ['75', 75],
    ])('accepts %s', (value, expected) => {
      expect(settingsOf({ REDIS_TIMEOUT_MS: value }).redisTimeoutMs).toBe(expected);
    });
    it.each(['0', '1001', 'fast', '2.5', '-5'])('refuses %s', (value) => {
      expect(problemsOf({ REDIS_TIMEOUT_MS: value })).toEqual([expect.stringMatching(/^REDIS_TIMEOUT_MS: /)]);
    });
  });

  describe('ADMIN_TOKEN', () => {
    const sixteen = 'a'.repeat(16);
    it('accepts 16 characters or more, trimmed', () => {
      expect(settingsOf({ ADMIN_TOKEN: sixteen }).adminToken).toBe(sixteen);
      expect(settingsOf({ ADMIN_TOKEN: `  ${sixteen}x  ` }).adminToken).toBe(`${sixteen}x`);
    });
    it('refuses fewer than 16 characters, counted after trimming', () => {
      expect(problemsOf({ ADMIN_TOKEN: 'a'.repeat(15) })).toEqual([
        'ADMIN_TOKEN: must be at least 16 characters (use a long random value)',
      ]);
      expect(problemsOf({ ADMIN_TOKEN: ` ${'a'.repeat(15)} ` })).toHaveLength(1);
    });
    it.each(['', '   '])('treats %j as absent (admin API then refuses every call)', (value) => {
      expect('adminToken' in settingsOf({ ADMIN_TOKEN: value })).toBe(false);
    });
  });

  describe('LOG_LEVEL', () => {
    it.each([...LOG_LEVELS])('accepts %s', (level) => {
      expect(settingsOf({ LOG_LEVEL: level }).logLevel).toBe(level);
    });
    it.each(['INFO', 'verbose', ''])('refuses %j', (level) => {
      expect(problemsOf({ LOG_LEVEL: level })).toEqual([expect.stringMatching(/^LOG_LEVEL: /)]);
    });
  });

  describe('STORE_FAILURE_MODE', () => {
    it.each(['deny', 'grpc-unavailable'] as const)('accepts %s', (mode) => {
      expect(settingsOf({ STORE_FAILURE_MODE: mode }).storeFailureMode).toBe(mode);
    });
    it.each(['allow', 'open', 'DENY'])('refuses %s (there is no fail-open mode)', (mode) => {
      expect(problemsOf({ STORE_FAILURE_MODE: mode })).toEqual([expect.stringMatching(/^STORE_FAILURE_MODE: /)]);
    });
  });

  describe('CONFIG_FILE', () => {
    it('reads the trimmed path and records it', () => {
      const read: string[] = [];
      const settings = settingsOf({ CONFIG_FILE: ' /etc/g.json ' }, (path) => {
        read.push(path);
        return '{}';
      });
      expect(read).toEqual(['/etc/g.json']);
      expect(settings.configFile).toBe('/etc/g.json');
    });
    it('is not read at all when unset or blank', () => {
      expect(settingsOf({}, noFile).configFile).toBeUndefined();
      expect(settingsOf({ CONFIG_FILE: '  ' }, noFile).configFile).toBeUndefined();
    });
  });
});

describe('every problem is listed at once', () => {
  it('several bad environment values give one problem each', () => {
    const problems = problemsOf(
      {
        GRPC_PORT: 'abc',
        ADMIN_PORT: '70000',
        GRPC_BIND_ADDRESS: 'localhost',
        ADMIN_BIND_ADDRESS: '0.0.0.0:9192',
        REDIS_URL: 'http://cache',
        REDIS_TIMEOUT_MS: '0',
        ADMIN_TOKEN: 'short',
        LOG_LEVEL: 'loud',
        STORE_FAILURE_MODE: 'allow',
        CONFIG_FILE: '/missing.json',
      },
      files({}),
    );
    const named = problems.map((problem) => problem.split(':')[0]);
    expect(named).toEqual([
      'GRPC_PORT',
      'ADMIN_PORT',
      'GRPC_BIND_ADDRESS',
      'ADMIN_BIND_ADDRESS',
      'REDIS_URL',
      'REDIS_TIMEOUT_MS',
      'ADMIN_TOKEN',
      'LOG_LEVEL',
      'STORE_FAILURE_MODE',
      'CONFIG_FILE',
    ]);
  });

  it('a bad environment value and bad config file contents are both reported', () => {
    const problems = problemsOf(
      { LOG_LEVEL: 'loud', CONFIG_FILE: '/c.json' },
      files({ '/c.json': JSON.stringify({ acceptQueryKey: 'yes' }) }),
    );
    expect(problems).toHaveLength(2);
    expect(problems[0]).toMatch(/^LOG_LEVEL: /);
    expect(problems[1]).toMatch(/^CONFIG_FILE \/c\.json: acceptQueryKey: /);
  });

  it('several problems inside the config file are each reported with their location', () => {
    const result = withConfig(
      {
        routes: { chat: [{ exact: '/x' }], messages: [{ regex: '((' }] },
        publicRoutes: [{ exact: 'health', prefix: '/p' }],
        messagesVersions: ['v1'],
        acceptQueryKey: 'yes',
        extra: 1,
      },
      '/cfg.json',
    );
    expect(result.ok).toBe(false);
    const problems = result.ok ? [] : result.problems;
    for (const expected of [
      /^CONFIG_FILE \/cfg\.json: routes\.messages\.0\.regex: is not a valid regular expression$/,
      /^CONFIG_FILE \/cfg\.json: routes: .*"chat"/,
      /^CONFIG_FILE \/cfg\.json: publicRoutes\.0\.exact: .*\//,
      /^CONFIG_FILE \/cfg\.json: publicRoutes\.0: needs exactly one of exact, prefix or regex$/,
      /^CONFIG_FILE \/cfg\.json: messagesVersions\.0: must be a date-form version such as 2023-06-01$/,
      /^CONFIG_FILE \/cfg\.json: acceptQueryKey: /,
      /^CONFIG_FILE \/cfg\.json: \(root\): .*"extra"/,
    ]) {
      expect(problems).toContainEqual(expect.stringMatching(expected));
    }
    expect(problems).toHaveLength(7);
  });
});

describe('config file problems name the file', () => {
  const path = '/srv/gw/config.json';
  const load = (text: string) => loadSettings({ CONFIG_FILE: path }, files({ [path]: text }));
  const only = (result: ReturnType<typeof loadSettings>) => {
    if (result.ok) throw new Error('expected problems');
    expect(result.problems).toHaveLength(1);
    return result.problems[0]!;
  };

  it('unreadable: says so with the path and the reason', () => {
    const problem = only(loadSettings({ CONFIG_FILE: '/nowhere.json' }, files({})));
    expect(problem).toContain('CONFIG_FILE');
    expect(problem).toContain('cannot read /nowhere.json');
    expect(problem).toContain('ENOENT');
  });

  it('unreadable through the real file system too', () => {
    const problem = only(loadSettings({ CONFIG_FILE: '/definitely/not/here/gateway.json' }));
    expect(problem).toMatch(/^CONFIG_FILE: cannot read \/definitely\/not\/here\/gateway\.json: /);
  });

  it('not JSON', () => {
    expect(only(load('routes: []'))).toMatch(/^CONFIG_FILE: \/srv\/gw\/config\.json is not valid JSON: /);
    expect(only(load(''))).toContain('is not valid JSON');
  });

  it('JSON but not an object', () => {
    expect(only(load('[]'))).toMatch(/^CONFIG_FILE \/srv\/gw\/config\.json: \(root\): /);
  });

  it('unknown top-level field (a typo never falls back to a default)', () => {
    expect(only(load(JSON.stringify({ acceptQueryKeys: true })))).toMatch(
      /^CONFIG_FILE \/srv\/gw\/config\.json: \(root\): .*"acceptQueryKeys"/,
    );
  });

  it('unknown field inside a route spec', () => {
    expect(only(load(JSON.stringify({ publicRoutes: [{ exact: '/h', method: 'GET' }] })))).toMatch(
      /^CONFIG_FILE \/srv\/gw\/config\.json: publicRoutes\.0: .*"method"/,
    );
  });

  it('unknown route family', () => {
    expect(only(load(JSON.stringify({ routes: { embeddings: [{ exact: '/e' }] } })))).toMatch(
      /^CONFIG_FILE \/srv\/gw\/config\.json: routes: .*"embeddings"/,
    );
  });

  it('bad regex', () => {
    expect(only(load(JSON.stringify({ routes: { models: [{ regex: '^/v1/models(' }] } })))).toBe(
      `CONFIG_FILE ${path}: routes.models.0.regex: is not a valid regular expression`,
    );
  });

  it.each([['v1'], ['2023-6-1'], ['2023-06-01T00:00:00Z'], ['latest']])('bad version %j', (version) => {
    expect(only(load(JSON.stringify({ messagesVersions: [version] })))).toBe(
      `CONFIG_FILE ${path}: messagesVersions.0: must be a date-form version such as 2023-06-01`,
    );
  });

  it('empty version list', () => {
    expect(only(load(JSON.stringify({ messagesVersions: [] })))).toMatch(/^CONFIG_FILE \/srv\/gw\/config\.json: messagesVersions: /);
  });

  it('a path spec with two of exact/prefix/regex, or none', () => {
    expect(only(load(JSON.stringify({ publicRoutes: [{ exact: '/a', regex: '^/a' }] })))).toBe(
      `CONFIG_FILE ${path}: publicRoutes.0: needs exactly one of exact, prefix or regex`,
    );
    expect(only(load(JSON.stringify({ publicRoutes: [{ methods: ['GET'] }] })))).toBe(
      `CONFIG_FILE ${path}: publicRoutes.0: needs exactly one of exact, prefix or regex`,
    );
  });

  it('a method that is not a method name', () => {
    expect(only(load(JSON.stringify({ publicRoutes: [{ exact: '/h', methods: ['G E T'] }] })))).toBe(
      `CONFIG_FILE ${path}: publicRoutes.0.methods.0: must be an HTTP method name`,
    );
  });

  it('an exact or prefix path that does not start with /', () => {
    expect(only(load(JSON.stringify({ publicRoutes: [{ prefix: 'public/' }] })))).toMatch(
      /^CONFIG_FILE \/srv\/gw\/config\.json: publicRoutes\.0\.prefix: /,
    );
  });
});

describe('config file contents are applied', () => {
  it('route overrides, public routes, versions, spellings and the query-key switch', () => {
    const result = withConfig({
      routes: { 'chat-completions': [{ prefix: '/openai/' }] },
      publicRoutes: [{ exact: '/health', methods: ['GET'] }],
      messagesVersions: ['2023-06-01', '2023-01-01'],
      acceptVendorHeaderSpellings: false,
      acceptQueryKey: true,
    });
    if (!result.ok) throw new Error(result.problems.join('; '));
    const { pipeline } = result.settings;
    expect(classifyFamily(pipeline.routeTable, 'POST', '/openai/v1/chat/completions')).toBe('chat-completions');
    expect(classifyFamily(pipeline.routeTable, 'POST', '/v1/chat/completions')).toBe('other');
    expect(classifyFamily(pipeline.routeTable, 'GET', '/health')).toBe('public');
    expect(classifyFamily(pipeline.routeTable, 'POST', '/health')).toBe('other');
    expect(pipeline.acceptedVersions).toEqual(['2023-06-01', '2023-01-01']);
    expect(pipeline.headerNames.versionHeaders).toEqual(['vendora-version']);
    expect(pipeline.headerNames.vendorgKeyHeaders).toEqual(['x-vendorg-api-key']);
    expect(pipeline.acceptQueryKey).toBe(true);
  });

  it('an empty object keeps every default', () => {
    const result = withConfig({});
    expect(result.ok && result.settings.pipeline.acceptedVersions).toEqual(['2023-06-01', '2026-10-21']);
    expect(result.ok && result.settings.pipeline.headerNames.vendorgKeyHeaders).toHaveLength(2);
  });
});

describe('the settings object is frozen', () => {
  const settings = settingsOf({ REDIS_URL: 'redis://h:1' });

  it('top level: assignment throws in strict mode and changes nothing', () => {
    expect(() => {
      (settings as { grpcPort: number }).grpcPort = 1;
    }).toThrow(TypeError);
    expect(() => {
      delete (settings as { redis?: unknown }).redis;
    }).toThrow(TypeError);
    expect(settings.grpcPort).toBe(9191);
    expect(settings.redis).toEqual({ mode: 'standalone', url: 'redis://h:1' });
  });

  it('nested pipeline settings: assignment throws', () => {
    expect(() => {
      (settings.pipeline as { acceptQueryKey: boolean }).acceptQueryKey = true;
    }).toThrow(TypeError);
    expect(() => {
      (settings.pipeline.acceptedVersions as string[]).push('2099-01-01');
    }).toThrow(TypeError);
    expect(() => {
      (settings.pipeline.headerNames as unknown as { versionHeaders: string[] }).versionHeaders = [];
    }).toThrow(TypeError);
    expect(() => {
      (settings.pipeline.routeTable as unknown as { publicRoutes: unknown[] }).publicRoutes = [];
    }).toThrow(TypeError);
    expect(settings.pipeline.acceptQueryKey).toBe(false);
    expect(settings.pipeline.acceptedVersions).toEqual(['2023-06-01', '2026-10-21']);
  });

  it('deep inside builder-made parts (route table, header names): mutation throws', () => {
    expect(() => {
      (settings.pipeline.headerNames.allCredentialHeaders as string[]).splice(0);
    }).toThrow(TypeError);
    expect(Object.isFrozen(settings.pipeline.routeTable.families)).toBe(true);
    expect(Object.isFrozen(settings.pipeline.routeTable.families[0])).toBe(true);
    expect(settings.pipeline.headerNames.allCredentialHeaders).toContain('authorization');
  });

  it('deepFreeze freezes nested objects and arrays it is given', () => {
    const value = deepFreeze({ a: { b: [1, { c: 2 }] } });
    expect(Object.isFrozen(value.a)).toBe(true);
    expect(Object.isFrozen(value.a.b)).toBe(true);
    expect(Object.isFrozen(value.a.b[1])).toBe(true);
  });
});

describe('Redis topologies', () => {
  it('reads a Sentinel-managed master from REDIS_SENTINELS and REDIS_SENTINEL_MASTER', () => {
    expect(settingsOf({ REDIS_SENTINELS: 's1:26379, s2:26380', REDIS_SENTINEL_MASTER: 'mymaster', REDIS_PASSWORD: 'pw' }).redis).toEqual({
      mode: 'sentinel',
      sentinels: [
        { host: 's1', port: 26379 },
        { host: 's2', port: 26380 },
      ],
      masterName: 'mymaster',
      password: 'pw',
    });
  });

  it('reads a Cluster from REDIS_CLUSTER_NODES', () => {
    expect(settingsOf({ REDIS_CLUSTER_NODES: '10.0.0.1:7000,[::1]:7001' }).redis).toEqual({
      mode: 'cluster',
      nodes: [
        { host: '10.0.0.1', port: 7000 },
        { host: '::1', port: 7001 },
      ],
    });
  });

  it('refuses two topologies at once, a Sentinel list without a master name, and malformed node lists', () => {
    const result = loadSettings({ REDIS_URL: 'redis://h:1', REDIS_CLUSTER_NODES: 'a:1', REDIS_SENTINELS: 'x', REDIS_SENTINEL_MASTER: '' });
    expect(result.ok ? [] : result.problems).toEqual([
      expect.stringMatching(/^REDIS_SENTINELS: must be a comma-separated list of host:port/),
    ]);
    const both = loadSettings({ REDIS_URL: 'redis://h:1', REDIS_CLUSTER_NODES: 'a:1', REDIS_SENTINELS: 's:1' });
    expect(both.ok ? [] : both.problems).toEqual([
      expect.stringContaining('set only one of REDIS_URL, REDIS_SENTINELS, REDIS_CLUSTER_NODES'),
      expect.stringContaining('REDIS_SENTINEL_MASTER: required'),
    ]);
  });
});

describe('blank values', () => {
  it('a blank port means the default port, not a random one', () => {
    expect(settingsOf({ GRPC_PORT: '', ADMIN_PORT: ' ' })).toMatchObject({ grpcPort: 9191, adminPort: 9192 });
  });

  it('a blank CONFIG_FILE beside another bad value adds no false CONFIG_FILE problem', () => {
    const result = loadSettings({ CONFIG_FILE: '  ', LOG_LEVEL: 'loud' }, () => {
      throw new Error('ENOENT');
    });
    expect(result.ok ? [] : result.problems).toEqual([expect.stringMatching(/^LOG_LEVEL: /)]);
  });

  it('an impossible date in messagesVersions is refused', () => {
    const result = loadSettings({ CONFIG_FILE: 'c.json' }, () => JSON.stringify({ messagesVersions: ['2023-13-45'] }));
    expect(result.ok ? [] : result.problems).toEqual([expect.stringContaining('is not a real date')]);
  });
});

describe('loadCliSettings', () => {
  it('refuses an ADMIN_PORT that is not a number', () => {
    expect(() => loadCliSettings({ ADMIN_PORT: 'abc' })).toThrow(/ADMIN_PORT/);
  });

  it('defaults to the local admin port', () => {
    expect(loadCliSettings({})).toEqual({ adminUrl: 'http://127.0.0.1:9192' });
  });

  it('follows ADMIN_PORT when ADMIN_URL is not set', () => {
    expect(loadCliSettings({ ADMIN_PORT: ' 9300 ' }).adminUrl).toBe('http://127.0.0.1:9300');
  });

  it('prefers ADMIN_URL, trimmed', () => {
    expect(loadCliSettings({ ADMIN_URL: ' https://admin.internal ', ADMIN_PORT: '9300' }).adminUrl).toBe('https://admin.internal');
  });

  it('carries a trimmed ADMIN_TOKEN, and none when blank', () => {
    expect(loadCliSettings({ ADMIN_TOKEN: ' tok ' })).toEqual({ adminUrl: 'http://127.0.0.1:9192', adminToken: 'tok' });
    expect('adminToken' in loadCliSettings({ ADMIN_TOKEN: '   ' })).toBe(false);
    expect('adminToken' in loadCliSettings({})).toBe(false);
  });

  it('blank ADMIN_URL and ADMIN_PORT fall back to the default', () => {
    expect(loadCliSettings({ ADMIN_URL: ' ', ADMIN_PORT: '' }).adminUrl).toBe('http://127.0.0.1:9192');
  });

  it('is frozen', () => {
    const cli = loadCliSettings({ ADMIN_TOKEN: 'x' });
    expect(() => {
      (cli as { adminUrl: string }).adminUrl = 'http://evil';
    }).toThrow(TypeError);
  });
});
