import * as http from 'node:http';
import { ManualClock } from '../../src/domain/clock';
import { startAppUnderTest, TEST_ADMIN_TOKEN, type AppUnderTest } from '../support/running-app';

/**
 * Admin token guessing over real HTTP. Linux routes all of 127.0.0.0/8 to
 * loopback, so a client bound to 127.0.0.2 is another client address to the
 * server (which does not trust proxy headers). The admin limiter's windows run
 * on an injected clock; the 500 ms delay of a checked wrong token is real time.
 * No Redis: authentication never reaches the store.
 */

interface Answer {
  status: number;
  retryAfter: string | undefined;
  body: { error?: { code: string; message: string } };
  ms: number;
  /**
   * From the connection's set-up to the answer: on a loaded machine, opening 200 sockets in one process takes longer
   * than the 500 ms delay itself, so "at once" is judged from when the server could first read the request.
   */
  msSinceConnected: number;
  /** performance.now() when the answer had arrived: orders answers of one run against each other. */
  answeredAt: number;
}

function adminFrom(server: AppUnderTest, localAddress: string, token: string | undefined, path = '/admin/accounts'): Promise<Answer> {
  const started = performance.now();
  let connected = started;
  return new Promise((resolve, reject) => {
    const request = http.request(`${server.adminUrl}${path}`, {
      localAddress,
      agent: false,
      headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
    });
    request.on('socket', (socket) => socket.once('connect', () => (connected = performance.now())));
    request.on('response', (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      response.on('end', () =>
        resolve({
          status: response.statusCode ?? 0,
          retryAfter: response.headers['retry-after'],
          body: response.headers['content-type']?.startsWith('application/json') ? (JSON.parse(text) as Answer['body']) : {},
          ms: performance.now() - started,
          msSinceConnected: performance.now() - connected,
          answeredAt: performance.now(),
        }),
      );
    });
    request.on('error', reject);
    request.end();
  });
}

/** A wrong token as long as the right one, different every time. */
const wrongToken = (n: number) => `guess-${String(n).padStart(6, '0')}-${'x'.repeat(TEST_ADMIN_TOKEN.length - 13)}`;

async function metricValue(server: AppUnderTest, series: string): Promise<number> {
  const text = await (await fetch(`${server.adminUrl}/metrics`)).text();
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

const count = (answers: Answer[], status: number) => answers.filter((answer) => answer.status === status).length;

describe('per-address limit: 200 parallel wrong guesses from one address', () => {
  const clock = new ManualClock(Date.UTC(2027, 0, 1));
  let server: AppUnderTest;
  let guesses: Answer[];
  let operator: Answer;

  beforeAll(async () => {
    server = await startAppUnderTest({
      clock,
      env: { ADMIN_AUTH_FAILURES_PER_ADDRESS: '10', ADMIN_AUTH_FAILURES_TOTAL: '100', ADMIN_AUTH_FAILURE_WINDOW_MS: '60000' },
    });
    const attack = Promise.all(Array.from({ length: 200 }, (_, n) => adminFrom(server, '127.0.0.1', wrongToken(n))));
    // The operator, from another address, in the middle of the attack.
    operator = await adminFrom(server, '127.0.0.2', TEST_ADMIN_TOKEN);
    guesses = await attack;
  });
  afterAll(async () => {
    await server?.close();
  });

  it('checks exactly the limit (10 answered 401 after the delay) and refuses the other 190 with 429', () => {
    expect({ unauthorized: count(guesses, 401), refused: count(guesses, 429) }).toEqual({ unauthorized: 10, refused: 190 });
    for (const answer of guesses.filter((guess) => guess.status === 401)) expect(answer.ms).toBeGreaterThanOrEqual(450);
  });

  it('answers the refused guesses quickly, without the delay of a checked one', () => {
    const refused = guesses
      .filter((guess) => guess.status === 429)
      .map((guess) => guess.msSinceConnected)
      .sort((a, b) => a - b);
    expect(refused.length).toBeGreaterThan(0);
    const p90Refusal = refused[Math.floor(refused.length * 0.9)]!;
    const fastestCheck = Math.min(...guesses.filter((guess) => guess.status === 401).map((guess) => guess.msSinceConnected));
    expect(p90Refusal).toBeLessThan(fastestCheck);
    const figures = `429 p90 ${Math.round(p90Refusal)} ms, slowest ${Math.round(refused.at(-1)!)} ms; fastest 401 after ${Math.round(fastestCheck)} ms`;
    process.stdout.write(`200 parallel guesses: ${figures}\n`);
  });

  it('answers 429 too_many_auth_failures with retry-after and a message that says what happened', () => {
    const refusal = guesses.find((guess) => guess.status === 429)!;
    expect(refusal.retryAfter).toBe('60');
    expect(refusal.body.error).toEqual({
      code: 'too_many_auth_failures',
      message: 'Too many wrong admin tokens from this address: every request from it is refused for 60 s, without its token being checked.',
    });
  });

  it('serves the right token from another address at once, during the attack', () => {
    expect(operator.status).toBe(200);
    // Sent after the 200 guesses opened their connections, and still answered before any checked guess.
    expect(operator.msSinceConnected).toBeLessThan(
      Math.min(...guesses.filter((guess) => guess.status === 401).map((guess) => guess.msSinceConnected)),
    );
    process.stdout.write(`operator from another address during the attack: 200 after ${Math.round(operator.ms)} ms\n`);
  });

  it('refuses even the right token from the guessing address, so a right guess cannot reveal itself', async () => {
    const right = await adminFrom(server, '127.0.0.1', TEST_ADMIN_TOKEN);
    expect(right.status).toBe(429);
    expect(right.body.error?.code).toBe('too_many_auth_failures');
  });

  it('logs reaching the limit once, with the address and without any token', () => {
    const events = server.logs.events('admin_auth_limit');
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ limit: 'address', clientAddress: '127.0.0.1', failuresPerAddress: 10, windowMs: 60_000 });
    expect(server.logs.leaksOf([TEST_ADMIN_TOKEN, wrongToken(0), wrongToken(199)])).toEqual([]);
  });

  it('counts checked failures and refusals in /metrics, labelled by limit only', async () => {
    expect(await metricValue(server, 'gateway_authz_admin_auth_failures_total')).toBe(10);
    expect(await metricValue(server, 'gateway_authz_admin_auth_refusals_total{limit="address"}')).toBeGreaterThanOrEqual(190);
    const text = await (await fetch(`${server.adminUrl}/metrics`)).text();
    expect(text).not.toContain('127.0.0.1');
  });

  it('counts down retry-after and lets the address try again once the window has passed', async () => {
    clock.advance(59_001);
    const almost = await adminFrom(server, '127.0.0.1', TEST_ADMIN_TOKEN);
    expect({ status: almost.status, retryAfter: almost.retryAfter }).toEqual({ status: 429, retryAfter: '1' });
    clock.advance(999);
    expect((await adminFrom(server, '127.0.0.1', TEST_ADMIN_TOKEN)).status).toBe(200);
    expect((await adminFrom(server, '127.0.0.1', wrongToken(1))).status).toBe(401); // checked again, a fresh window
  });
});

describe('total limit: wrong guesses spread over several addresses', () => {
  const clock = new ManualClock(Date.UTC(2027, 0, 1));
  let server: AppUnderTest;

  beforeAll(async () => {
    server = await startAppUnderTest({
      clock,
      env: { ADMIN_AUTH_FAILURES_PER_ADDRESS: '3', ADMIN_AUTH_FAILURES_TOTAL: '6', ADMIN_AUTH_FAILURE_WINDOW_MS: '60000' },
    });
  });
  afterAll(async () => {
    await server?.close();
  });

  it('serves only addresses that recently used the right token once the total is reached', async () => {
    // The operator's usual address, before the attack.
    expect((await adminFrom(server, '127.0.0.2', TEST_ADMIN_TOKEN)).status).toBe(200);
    // Three addresses, each under its own limit of 3, reach the total of 6.
    const attackers = ['127.0.0.11', '127.0.0.12', '127.0.0.13'];
    const first = await Promise.all(
      attackers.flatMap((address, n) => [adminFrom(server, address, wrongToken(2 * n)), adminFrom(server, address, wrongToken(2 * n + 1))]),
    );
    expect(count(first, 401)).toBe(6);

    const fresh = await adminFrom(server, '127.0.0.14', wrongToken(99));
    expect(fresh.status).toBe(429);
    expect(fresh.retryAfter).toBe('60');
    expect(fresh.body.error?.code).toBe('too_many_auth_failures');
    expect(fresh.body.error?.message).toBe(
      'Too many wrong admin tokens from many addresses (a guessing attack): for 60 s only addresses that used the right token in the last 24 hours are served.',
    );
    // A right guess from a new address is refused unchecked as well.
    expect((await adminFrom(server, '127.0.0.15', TEST_ADMIN_TOKEN)).status).toBe(429);

    const operator = await adminFrom(server, '127.0.0.2', TEST_ADMIN_TOKEN);
    expect(operator.status).toBe(200);
    // Refused, not checked: the server counts each checked wrong token as it delays it, and counted no more than the 6.
    expect(await metricValue(server, 'gateway_authz_admin_auth_failures_total')).toBe(6);

    expect(server.logs.events('admin_auth_limit')).toEqual([expect.objectContaining({ limit: 'total', failuresTotal: 6 })]);
    expect(await metricValue(server, 'gateway_authz_admin_auth_refusals_total{limit="total"}')).toBe(2);

    clock.advance(60_000);
    expect((await adminFrom(server, '127.0.0.15', TEST_ADMIN_TOKEN)).status).toBe(200);
  });
});

describe('requests without credentials', () => {
  let server: AppUnderTest;

  beforeAll(async () => {
    server = await startAppUnderTest({ env: { ADMIN_AUTH_FAILURES_PER_ADDRESS: '3' } });
  });
  afterAll(async () => {
    await server?.close();
  });

  it('are answered 401 at once and not counted as guesses: they reveal nothing', async () => {
    // Judged against a checked wrong token sent first, in the same run, not against the clock: a loaded machine slows
    // all of them alike, but only a delayed answer waits for its timer, and the wrong token's timer starts first. Were
    // the requests without credentials delayed too, their timers would fire after it, and so would their answers.
    const checked = adminFrom(server, '127.0.0.1', wrongToken(0));
    const answers = await Promise.all(Array.from({ length: 20 }, () => adminFrom(server, '127.0.0.1', undefined)));
    const delayed = await checked;
    expect({ delayed: delayed.status, withoutCredentials: count(answers, 401) }).toEqual({ delayed: 401, withoutCredentials: 20 });
    expect(delayed.ms).toBeGreaterThanOrEqual(450);
    // The median: one stall of a loaded machine between two reads moves only the last few.
    const arrivals = answers.map((answer) => answer.answeredAt).sort((a, b) => a - b);
    const medianArrival = arrivals[Math.floor(arrivals.length / 2)]!;
    expect(medianArrival).toBeLessThan(delayed.answeredAt);
    const before = arrivals.filter((arrival) => arrival < delayed.answeredAt).length;
    process.stdout.write(
      `without credentials: ${before} of 20 answered before the checked wrong token, the median ${Math.round(delayed.answeredAt - medianArrival)} ms before it\n`,
    );
    // The server's own record: it counts each wrong token it checks as it delays it, and it counted only that one.
    expect(await metricValue(server, 'gateway_authz_admin_auth_failures_total')).toBe(1);
    // 1 of the 3 allowed: the address is still served.
    expect((await adminFrom(server, '127.0.0.1', TEST_ADMIN_TOKEN)).status).toBe(200);
  });

  it('leave the public routes alone, even for an address over its limit', async () => {
    for (let n = 0; n < 3; n += 1) expect((await adminFrom(server, '127.0.0.3', wrongToken(n))).status).toBe(401);
    expect((await adminFrom(server, '127.0.0.3', TEST_ADMIN_TOKEN)).status).toBe(429);
    expect((await adminFrom(server, '127.0.0.3', undefined, '/healthz')).status).toBe(200);
    expect((await adminFrom(server, '127.0.0.3', undefined, '/dashboard')).status).toBe(200);
  });
});
