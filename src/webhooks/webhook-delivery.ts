import * as http from 'node:http';
import * as https from 'node:https';
import type { LookupFunction } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { checkedAddress, hostOf, type ResolveHost, type TargetPolicy } from './endpoint-targets';

/** Bytes of a receiver's answer read at most: enough to log a status line's worth, never a large body held in memory. */
export const RESPONSE_BODY_MAX_BYTES = 4096;

export interface DeliveryLimits {
  policy: TargetPolicy;
  resolve: ResolveHost;
  /** From the request to an open connection (TLS included). */
  connectTimeoutMs: number;
  /** From the request to the end of the answer (its body read up to RESPONSE_BODY_MAX_BYTES). */
  responseTimeoutMs: number;
}

export interface AttemptResult {
  ok: boolean;
  status?: number;
  /** Why it failed, in a few words (never the response body). */
  error?: string;
}

/**
 * One signed POST (Standard Webhooks: `webhook-id`, `webhook-timestamp`,
 * `webhook-signature` over id, timestamp and body, with the endpoint's
 * `whsec_` secret). The host is resolved and checked here, on every attempt,
 * and the connection goes to the checked address. A 2xx answer is delivered;
 * anything else, a refused target and a timeout fail the attempt.
 */
export async function sendWebhook(
  target: { url: string; secret: string },
  message: { id: string; payload: string },
  nowMs: number,
  limits: DeliveryLimits,
): Promise<AttemptResult> {
  const url = new URL(target.url);
  let checked: { address: string; family: number };
  try {
    checked = await checkedAddress(hostOf(url), limits.policy, limits.resolve);
  } catch (error) {
    return { ok: false, error: `refused: ${(error as Error).message}` };
  }
  const timestamp = new Date(nowMs);
  const signature = new Webhook(target.secret).sign(message.id, timestamp, message.payload);
  const headers = {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(message.payload)),
    'user-agent': 'gateway-authz-webhooks',
    'webhook-id': message.id,
    'webhook-timestamp': String(Math.floor(nowMs / 1000)),
    'webhook-signature': signature,
  };
  // The checked address, whatever the name resolves to by the time the socket opens.
  const lookup: LookupFunction = (_hostname, options, callback) => {
    if (options.all) callback(null, [{ address: checked.address, family: checked.family }]);
    else callback(null, checked.address, checked.family);
  };
  const client = url.protocol === 'https:' ? https : http;
  return new Promise<AttemptResult>((resolve) => {
    let settled = false;
    const finish = (result: AttemptResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(connectTimer);
      clearTimeout(responseTimer);
      request.destroy();
      resolve(result);
    };
    const request = client.request(url, { method: 'POST', headers, lookup, agent: false }, (response) => {
      let read = 0;
      response.on('data', (chunk: Buffer) => {
        read += chunk.length;
        if (read >= RESPONSE_BODY_MAX_BYTES) done();
      });
      const done = () => {
        const status = response.statusCode ?? 0;
        finish(status >= 200 && status < 300 ? { ok: true, status } : { ok: false, status, error: `answered ${status}` });
      };
      response.on('end', done);
      response.on('error', () => finish({ ok: false, status: response.statusCode ?? 0, error: 'answer cut off' }));
    });
    const connectTimer = setTimeout(
      () => finish({ ok: false, error: `no connection within ${limits.connectTimeoutMs} ms` }),
      limits.connectTimeoutMs,
    );
    const responseTimer = setTimeout(
      () => finish({ ok: false, error: `no answer within ${limits.responseTimeoutMs} ms` }),
      limits.responseTimeoutMs,
    );
    request.on('socket', (socket) => {
      socket.once(url.protocol === 'https:' ? 'secureConnect' : 'connect', () => clearTimeout(connectTimer));
    });
    request.on('error', (error: NodeJS.ErrnoException) => finish({ ok: false, error: error.code ?? 'connection failed' }));
    request.end(message.payload);
  });
}
