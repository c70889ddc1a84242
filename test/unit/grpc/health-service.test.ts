import fc from 'fast-check';
import * as protoLoader from '@grpc/proto-loader';
import { protoPath } from 'grpc-health-check';
import { decodeHealthCheckRequest, HealthService } from '../../../src/platform/health-service';
import type { ServerStreamingCall, SingleMessageMethodHandler } from '../../../src/transport/grpc-server';
import type { RpcError } from '../../../src/transport/status';

/** The official grpc.health.v1 proto (as grpc-health-check ships it), through protobufjs. */
const official = protoLoader.loadSync(protoPath, { keepCase: true, enums: String, defaults: true })[
  'grpc.health.v1.Health'
] as protoLoader.ServiceDefinition;
const check = official.Check!;

/** A call that records what the method sends. */
function recordingCall() {
  const messages: unknown[] = [];
  const errors: RpcError[] = [];
  const finishListeners: (() => void)[] = [];
  const call: ServerStreamingCall = {
    deadlineMs: Infinity,
    finished: false,
    metadata: undefined,
    respond: (frame) => messages.push(check.responseDeserialize(frame.subarray(5))),
    write: (frame) => messages.push(check.responseDeserialize(frame.subarray(5))),
    fail: (error) => errors.push(error),
    end: (error) => errors.push(error),
    onFinished: (listener) => finishListeners.push(listener),
  };
  return { call, messages, errors, finish: () => finishListeners.forEach((listener) => listener()) };
}

function run(method: SingleMessageMethodHandler | undefined, service: string, call: ServerStreamingCall): void {
  if (!method) throw new Error('no such method');
  method.handle(check.requestSerialize({ service }), call);
}

describe('grpc.health.v1 messages', () => {
  it('reads HealthCheckRequest.service as protobufjs writes it, for any name', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 200 }), (service) => {
        expect(decodeHealthCheckRequest(check.requestSerialize({ service }))).toBe(service);
      }),
    );
    // Unknown fields are skipped; the last `service` wins, as in protobufjs.
    const twice = Buffer.concat([
      check.requestSerialize({ service: 'a' }),
      Buffer.from([0x10, 0x01]),
      check.requestSerialize({ service: 'b' }),
    ]);
    expect(decodeHealthCheckRequest(twice)).toBe('b');
    expect(() => decodeHealthCheckRequest(Buffer.from([0x0a, 0x05, 0x61]))).toThrow();
  });

  it('writes HealthCheckResponse frames that the official proto reads as the status', () => {
    const health = new HealthService({ '': 'SERVING', down: 'NOT_SERVING' });
    const { call, messages } = recordingCall();
    const methods = health.methods();
    run(methods['/grpc.health.v1.Health/Check'], '', call);
    run(methods['/grpc.health.v1.Health/Check'], 'down', call);
    run(methods['/grpc.health.v1.Health/Watch'], 'nobody', call);
    expect(messages).toEqual([{ status: 'SERVING' }, { status: 'NOT_SERVING' }, { status: 'SERVICE_UNKNOWN' }]);
  });
});

describe('HealthService', () => {
  it('Check: the status of a known name, NOT_FOUND for an unknown one; INTERNAL for a request it cannot read', () => {
    const health = new HealthService({ '': 'NOT_SERVING' });
    const { call, messages, errors } = recordingCall();
    const method = health.methods()['/grpc.health.v1.Health/Check']!;
    run(method, 'missing', call);
    expect(errors).toEqual([{ code: 5, details: 'Health status unknown for service missing' }]);
    health.setStatus('', 'SERVING');
    run(method, '', call);
    expect(messages).toEqual([{ status: 'SERVING' }]);
    method.handle(Buffer.from([0x0a, 0x09]), call);
    expect(errors[1]).toMatchObject({ code: 13 });
  });

  it('Watch: the current status at once, one message per change (none for a repeat), nothing after the call ends', () => {
    const health = new HealthService({ '': 'NOT_SERVING' });
    const watch = health.methods()['/grpc.health.v1.Health/Watch'];
    const first = recordingCall();
    const other = recordingCall();
    run(watch, '', first.call);
    run(watch, 'later', other.call);
    health.setStatus('', 'SERVING');
    health.setStatus('', 'SERVING');
    health.setStatus('later', 'SERVING');
    health.setStatus('', 'NOT_SERVING');
    expect(first.messages).toEqual([{ status: 'NOT_SERVING' }, { status: 'SERVING' }, { status: 'NOT_SERVING' }]);
    expect(other.messages).toEqual([{ status: 'SERVICE_UNKNOWN' }, { status: 'SERVING' }]);
    first.finish();
    health.setStatus('', 'SERVING');
    expect(first.messages).toHaveLength(3);
  });
});
