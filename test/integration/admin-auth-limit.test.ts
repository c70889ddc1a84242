import * as http from 'node:http';
import { ManualClock } from '../../src/platform/clock';
import { startAppUnderTest, TEST_ADMIN_TOKEN, type AppUnderTest } from '../support/running-app';
import { recordServedRequests, type ServedRequest } from '../support/served-requests';

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
}

function adminFrom(server: AppUnderTest, localAddress: string, token: string | undefined, path = '/admin/accounts'): Promise<Answer> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const request = http.request(`${server.adminUrl}${path}`, {
      localAddress,
      agent: false,
      headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
    });
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

/**
 * "At once" is judged by the server's own time for each answer (served-requests.ts), against the answers it delayed
 * in the same run: a loaded machine can take longer than the delay just to accept and read 200 connections, so no
 * client-side time, and no fixed threshold, tells a delayed answer from one that waited in line. An answer given
 * without the delay takes the server a small fraction of it; LESS THAN HALF of a delayed one is the line drawn.
 */
const answeredAtOnce = (served: ServedRequest, delayed: readonly ServedRequest[]) =>
  served.serverMs < Math.min(...delayed.map((one) => one.serverMs)) / 2;

const bearer = (token: string) => `Bearer ${token}`;

describe('per-address limit: 200 parallel wrong guesses from one address', () => {
  const clock = new ManualClock(Date.UTC(2027, 0, 1));
  let server: AppUnderTest;
  let guesses: Answer[];
  let operator: Answer;
  let served: ServedRequest[];

  beforeAll(async () => {
    server = await startAppUnderTest({
      clock,
      env: { ADMIN_AUTH_FAILURES_PER_ADDRESS: '10', ADMIN_AUTH_FAILURES_TOTAL: '100', ADMIN_AUTH_FAILURE_WINDOW_MS: '60000' },
    });
    const recording = recordServedRequests();
    try {
      const attack = Promise.all(Array.from({ length: 200 }, (_, n) => adminFrom(server, '127.0.0.1', wrongToken(n))));
      // The operator, from another address, in the middle of the attack.
      operator = await adminFrom(server, '127.0.0.2', TEST_ADMIN_TOKEN);
      guesses = await attack;
    } finally {
      recording.stop();
    }
    served = recording.served;
  });
  afterAll(async () => {
    await server?.close();
  });

  it('checks exactly the limit (10 answered 401 after the delay) and refuses the other 190 with 429', () => {
    expect({ unauthorized: count(guesses, 401), refused: count(guesses, 429) }).toEqual({ unauthorized: 10, refused: 190 });
    for (const answer of guesses.filter((guess) => guess.status === 401)) expect(answer.ms).toBeGreaterThanOrEqual(450);
  });

  it('answers the refused guesses at once, without the delay of a checked one', () => {
    const checked = served.filter((one) => one.status === 401);
    const refused = served.filter((one) => one.status === 429);
    expect({ checked: checked.length, refused: refused.length }).toEqual({ checked: 10, refused: 190 });
    expect(refused.filter((one) => !answeredAtOnce(one, checked))).toEqual([]);
    const slowestRefusal = Math.max(...refused.map((one) => one.serverMs));
    const fastestCheck = Math.min(...checked.map((one) => one.serverMs));
    const slowestRound = Math.max(...guesses.map((guess) => guess.ms));
    const figures = `server's time: slowest 429 ${slowestRefusal.toFixed(1)} ms, fastest 401 ${fastestCheck.toFixed(1)} ms; slowest round trip ${Math.round(slowestRound)} ms`;
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
    const served200 = served.filter((one) => one.authorization === bearer(TEST_ADMIN_TOKEN));
    expect(served200.map((one) => one.status)).toEqual([200]);
    expect(
      answeredAtOnce(
        served200[0]!,
        served.filter((one) => one.status === 401),
      ),
    ).toBe(true);
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
    // Beside a checked wrong token, in the same run: the server delays that one, and must not delay these.
    const recording = recordServedRequests();
    let answers: Answer[];
    try {
      const checked = adminFrom(server, '127.0.0.1', wrongToken(0));
      answers = await Promise.all(Array.from({ length: 20 }, () => adminFrom(server, '127.0.0.1', undefined)));
      expect((await checked).status).toBe(401);
    } finally {
      recording.stop();
    }
    expect(count(answers, 401)).toBe(20);
    const delayed = recording.served.filter((one) => one.authorization === bearer(wrongToken(0)));
    const withoutCredentials = recording.served.filter((one) => one.authorization === undefined);
    expect({ delayed: delayed.length, withoutCredentials: withoutCredentials.length }).toEqual({ delayed: 1, withoutCredentials: 20 });
    expect(withoutCredentials.filter((one) => !answeredAtOnce(one, delayed))).toEqual([]);
    const slowest = Math.max(...withoutCredentials.map((one) => one.serverMs));
    process.stdout.write(
      `server's time: slowest answer without credentials ${slowest.toFixed(1)} ms, the checked wrong token ${delayed[0]!.serverMs.toFixed(1)} ms\n`,
    );
    // Only the wrong token was counted as a guess: 1 of the 3 allowed, so the address is still served.
    expect(await metricValue(server, 'gateway_authz_admin_auth_failures_total')).toBe(1);
    expect((await adminFrom(server, '127.0.0.1', TEST_ADMIN_TOKEN)).status).toBe(200);
  });

  it('leave the public routes alone, even for an address over its limit', async () => {
    for (let n = 0; n < 3; n += 1) expect((await adminFrom(server, '127.0.0.3', wrongToken(n))).status).toBe(401);
    expect((await adminFrom(server, '127.0.0.3', TEST_ADMIN_TOKEN)).status).toBe(429);
    expect((await adminFrom(server, '127.0.0.3', undefined, '/healthz')).status).toBe(200);
    expect((await adminFrom(server, '127.0.0.3', undefined, '/dashboard')).status).toBe(200);
  });
});
