/**
 * Envoy-shaped CheckRequests, encoded once with Envoy's OFFICIAL protos (as
 * bundled in @grpc/grpc-js-xds) into gRPC length-prefixed frames, so the
 * driver spends no time encoding while it measures.
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { generateCustomerKey } from '../../src/keys/customer-key';
import type { KeyRestrictions } from '../../src/keys/key-restrictions';
import { envoyCheckRequest, OFFICIAL_EXTERNAL_AUTH_PROTO, OFFICIAL_LOADER_OPTIONS } from '../support/envoy-official-client';

export const REQUEST_CLASSES = ['valid', 'malformed', 'unknown', 'rate_limited'] as const;
export type RequestClass = (typeof REQUEST_CLASSES)[number];

/** CheckResponse.status.code each class must get: OK, UNAUTHENTICATED, UNAUTHENTICATED, RESOURCE_EXHAUSTED. */
export const EXPECTED_STATUS: Record<RequestClass, number> = { valid: 0, malformed: 16, unknown: 16, rate_limited: 8 };

/** Share of each class in the mixed traffic. */
export const TRAFFIC_MIX: Record<RequestClass, number> = { valid: 0.9, malformed: 0.05, unknown: 0.03, rate_limited: 0.02 };

export interface Traffic {
  /** gRPC frames (5-byte prefix + CheckRequest), in sending order; the driver cycles through them. */
  frames: Buffer[];
  /** Index into REQUEST_CLASSES for each frame. */
  classes: Uint8Array;
}

export const CHECK_PATH = '/envoy.service.auth.v3.Authorization/Check';

interface CheckCodec {
  serialize(request: object): Buffer;
  deserialize(message: Buffer): { status?: { code?: number } };
}

let codec: CheckCodec | undefined;

export function checkCodec(): CheckCodec {
  if (!codec) {
    const definition = protoLoader.loadSync(OFFICIAL_EXTERNAL_AUTH_PROTO, OFFICIAL_LOADER_OPTIONS);
    const check = (definition['envoy.service.auth.v3.Authorization'] as grpc.ServiceDefinition).Check!;
    codec = {
      serialize: (request) => check.requestSerialize(request),
      deserialize: (message) => check.responseDeserialize(message) as { status?: { code?: number } },
    };
  }
  return codec;
}

/**
 * CheckResponse.status.code read straight from the message bytes (field 1,
 * a google.rpc.Status, and its field 1, the code; 0 when absent, as proto3
 * says), skipping every other field undecoded. The overload phases read every
 * answer's status with it: protobufjs would cost the driver more than the
 * rate it has to hold. Checked against protobufjs in test/unit/bench.
 */
export function checkResponseStatusCode(message: Buffer): number {
  let code = 0;
  forEachField(message, 0, message.length, (field, wireType, start, end) => {
    if (field !== 1 || wireType !== 2) return;
    forEachField(message, start, end, (innerField, innerWire, _start, _end, int32) => {
      if (innerField === 1 && innerWire === 0) code = int32;
    });
  });
  return code;
}

/**
 * Calls `visit` for each field of the protobuf message in bytes[start, end):
 * its number, wire type, its bounds (length-delimited), and for a varint its
 * value as an int32 (its low 32 bits: a negative int32 is a 10-byte varint,
 * more than a double holds exactly).
 */
function forEachField(
  bytes: Buffer,
  start: number,
  end: number,
  visit: (field: number, wireType: number, valueStart: number, valueEnd: number, int32: number) => void,
): void {
  let at = start;
  let low32 = 0;
  /** A varint's value (exact up to 2^53: tags and lengths), and its low 32 bits in low32. */
  const readVarint = (): number => {
    let value = 0;
    let scale = 1;
    low32 = 0;
    for (let shift = 0; ; shift += 7) {
      if (at >= end) throw new Error('truncated varint');
      const byte = bytes[at++]!;
      value += (byte & 0x7f) * scale;
      if (shift < 32) low32 |= (byte & 0x7f) << shift;
      if (byte < 0x80) return value;
      scale *= 128;
    }
  };
  while (at < end) {
    const tag = readVarint();
    const field = Math.floor(tag / 8);
    const wireType = tag % 8;
    if (wireType === 0) {
      readVarint();
      visit(field, wireType, at, at, low32);
    } else if (wireType === 2) {
      const length = readVarint();
      if (at + length > end) throw new Error('truncated length-delimited field');
      visit(field, wireType, at, at + length, 0);
      at += length;
    } else if (wireType === 1 || wireType === 5) {
      at += wireType === 1 ? 8 : 4;
      if (at > end) throw new Error('truncated fixed-width field');
    } else {
      throw new Error(`unsupported wire type ${wireType}`);
    }
  }
}

export function frameOf(request: object): Buffer {
  const message = checkCodec().serialize(request);
  const frame = Buffer.allocUnsafe(5 + message.length);
  frame.writeUInt8(0, 0);
  frame.writeUInt32BE(message.length, 1);
  message.copy(frame, 5);
  return frame;
}

const STAINLESS = {
  'x-stainless-lang': 'js',
  'x-stainless-os': 'Linux',
  'x-stainless-arch': 'x64',
  'x-stainless-runtime': 'node',
  'x-stainless-runtime-version': 'v24.22.3',
  'x-stainless-retry-count': '0',
};

const ENVOY_ADDED = {
  'x-forwarded-for': '203.0.113.41',
  'x-envoy-external-address': '203.0.113.41',
  'accept-encoding': 'gzip, deflate',
};

/**
 * One request as the three SDK families send it (60% chat, 25% messages,
 * 15% generative, by `variant`), carrying `key` where that SDK puts it.
 */
export function envoyShapedRequest(key: string, variant: number): object {
  const style = variant % 20;
  if (style < 12) {
    return envoyCheckRequest({
      method: 'POST',
      path: style % 4 === 0 ? '/v1/embeddings' : '/v1/chat/completions',
      protocol: 'HTTP/1.1',
      headers: {
        host: 'api.gateway.example.com',
        authorization: `Bearer ${key}`,
        'content-type': 'application/json',
        accept: 'application/json',
        'content-length': String(180 + (variant % 700)),
        'user-agent': 'OpenAI/JS 7.59.0',
        'x-stainless-package-version': '7.59.0',
        'x-stainless-timeout': '600',
        ...STAINLESS,
        ...ENVOY_ADDED,
      },
    });
  }
  if (style < 17) {
    return envoyCheckRequest({
      method: 'POST',
      path: '/v1/messages',
      protocol: 'HTTP/2',
      scheme: 'https',
      headers: {
        host: 'api.gateway.example.com',
        'x-api-key': key,
        'anthropic-version': '2023-06-01',
        'content-type': 'application/json',
        accept: 'application/json',
        'content-length': String(220 + (variant % 900)),
        'user-agent': 'Anthropic/JS 0.137.0',
        'x-stainless-package-version': '0.137.0',
        'x-stainless-timeout': '600',
        ...STAINLESS,
        ...ENVOY_ADDED,
      },
    });
  }
  return envoyCheckRequest({
    method: 'POST',
    path: '/v1/models/gemini-2.0-flash:generateContent',
    protocol: 'HTTP/2',
    scheme: 'https',
    headers: {
      host: 'api.gateway.example.com',
      'x-goog-api-key': key,
      'content-type': 'application/json',
      'content-length': String(150 + (variant % 500)),
      'user-agent': 'google-genai-sdk/3.3.0 gl-node/v24.22.3',
      'x-goog-api-client': 'google-genai-sdk/3.3.0 gl-node/v24.22.3',
      ...ENVOY_ADDED,
    },
  });
}

/**
 * Restrictions that allow every request envoyShapedRequest builds, for the restricted keys of `--restricted-keys`: the
 * route families of its paths, and the source address envoyCheckRequest gives every CheckRequest (127.0.0.1). No
 * models: its chat and messages requests carry no body, so Check cannot read their model, and a key restricted to
 * models is refused such a request (docs/concepts/key-restrictions.md, "Fail closed").
 */
export const RESTRICTIONS_ALLOWING_THE_TRAFFIC: KeyRestrictions = Object.freeze({
  endpoints: Object.freeze(['chat-completions', 'messages', 'generative-content']),
  sourceAddresses: Object.freeze(['127.0.0.0/8', '::1/128']),
});

/** Keys that fail the offline format check in the ways real clients get them wrong. */
export function malformedKeys(count: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < count; i += 1) {
    const good = generateCustomerKey('live');
    switch (i % 4) {
      case 0: // a typo: the checksum no longer matches
        out.push(`${good.slice(0, 20)}${good[20] === 'a' ? 'b' : 'a'}${good.slice(21)}`);
        break;
      case 1: // a truncated copy
        out.push(good.slice(0, 30 + (i % 10)));
        break;
      case 2: // an environment that does not exist
        out.push(good.replace('gk_live_', 'gk_prod_'));
        break;
      default: // a placeholder left in the config
        out.push(`your-api-key-here-${i}`);
    }
  }
  return out;
}

/** Well-formed keys (checksum passes) that were never issued. */
export function unknownKeys(count: number): string[] {
  return Array.from({ length: count }, (_, i) => generateCustomerKey(i % 5 === 0 ? 'test' : 'live'));
}

/** A deterministic PRNG (mulberry32), so every run sends the same sequence. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface TrafficPools {
  valid: readonly string[];
  malformed: readonly string[];
  unknown: readonly string[];
  rateLimited: readonly string[];
}

/**
 * The mixed traffic: each position draws its class by TRAFFIC_MIX; valid
 * positions walk round-robin through the valid pool (so every active key is
 * used evenly), the others pick at random from their pools.
 */
export function mixedTraffic(pools: TrafficPools, length: number, seed = 7): Traffic {
  const random = prng(seed);
  const frameCache = new Map<string, Buffer>();
  const frame = (key: string, variant: number) => {
    const id = `${variant % 20}:${key}`;
    let cached = frameCache.get(id);
    if (!cached) {
      cached = frameOf(envoyShapedRequest(key, variant));
      frameCache.set(id, cached);
    }
    return cached;
  };
  const frames = new Array<Buffer>(length);
  const classes = new Uint8Array(length);
  let nextValid = 0;
  const cumulative = REQUEST_CLASSES.map((_, index) => REQUEST_CLASSES.slice(0, index + 1).reduce((sum, cls) => sum + TRAFFIC_MIX[cls], 0));
  for (let i = 0; i < length; i += 1) {
    const draw = random();
    const cls = Math.max(
      0,
      cumulative.findIndex((edge) => draw < edge),
    );
    const name = REQUEST_CLASSES[cls]!;
    const pool =
      name === 'valid' ? pools.valid : name === 'malformed' ? pools.malformed : name === 'unknown' ? pools.unknown : pools.rateLimited;
    const index = name === 'valid' ? nextValid++ % pool.length : Math.floor(random() * pool.length);
    frames[i] = frame(pool[index]!, index);
    classes[i] = cls;
  }
  return { frames, classes };
}

/** One class only, each key once (for the round-trip accounting and the cache fill). */
export function uniformTraffic(cls: RequestClass, keys: readonly string[]): Traffic {
  const index = REQUEST_CLASSES.indexOf(cls);
  return {
    frames: keys.map((key, i) => frameOf(envoyShapedRequest(key, i))),
    classes: new Uint8Array(keys.length).fill(index),
  };
}
