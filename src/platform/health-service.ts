/**
 * grpc.health.v1.Health (grpc/doc/health-checking.md), for Envoy's cluster
 * health check and Kubernetes `grpc:` probes: Check and Watch. The health
 * monitor writes the statuses through HealthSink.
 *
 * - Check: the status of a known service name ('' is the whole server);
 *   an unknown one fails NOT_FOUND, as the spec says.
 * - Watch: the current status at once (SERVICE_UNKNOWN for an unknown name,
 *   and the call stays open), then one message per change. close() ends the
 *   open Watches UNAVAILABLE, after which a client retries elsewhere.
 *
 * Messages (grpc/health/v1/health.proto): HealthCheckRequest{service=1};
 * HealthCheckResponse{status=1}, UNKNOWN=0, SERVING=1, NOT_SERVING=2,
 * SERVICE_UNKNOWN=3. Both are small enough to be read and written here;
 * test/unit/grpc/health-service.test.ts checks the bytes against protobufjs
 * with the official proto.
 */
import type { HealthSink, ServingStatus } from './health-monitor';
import { ProtobufReader, WIRE_BYTES } from '../transport/protobuf-reader';
import type { ServerStreamingCall, SingleMessageMethodHandler, UnaryCall } from '../transport/grpc-server';
import { GrpcStatus } from '../transport/status';

export const HEALTH_SERVICE_NAME = 'grpc.health.v1.Health';

const STATUS_NUMBER = { SERVING: 1, NOT_SERVING: 2, SERVICE_UNKNOWN: 3 } as const;

/** A length-prefixed HealthCheckResponse{status}: tag 0x08, the enum as one varint byte. */
function responseFrame(status: number): Buffer {
  return Buffer.from([0, 0, 0, 0, 2, 0x08, status]);
}

const FRAMES: Readonly<Record<keyof typeof STATUS_NUMBER, Buffer>> = {
  SERVING: responseFrame(STATUS_NUMBER.SERVING),
  NOT_SERVING: responseFrame(STATUS_NUMBER.NOT_SERVING),
  SERVICE_UNKNOWN: responseFrame(STATUS_NUMBER.SERVICE_UNKNOWN),
};

/** HealthCheckRequest.service; throws on malformed bytes (the call then fails INTERNAL). */
export function decodeHealthCheckRequest(bytes: Buffer): string {
  const reader = new ProtobufReader(bytes, 0, bytes.length);
  let service = '';
  while (reader.pos < reader.end) {
    const tag = reader.uint32();
    if (tag >>> 3 === 1 && (tag & 7) === WIRE_BYTES) service = reader.string();
    else reader.skip(tag & 7);
  }
  return service;
}

export class HealthService implements HealthSink {
  private readonly statuses = new Map<string, ServingStatus>();
  private readonly watchers = new Map<string, Set<ServerStreamingCall>>();

  /** `initial`: the services known from the start and their status. */
  constructor(initial: Readonly<Record<string, ServingStatus>>) {
    for (const [service, status] of Object.entries(initial)) this.statuses.set(service, status);
  }

  setStatus(service: string, status: ServingStatus): void {
    const previous = this.statuses.get(service);
    this.statuses.set(service, status);
    if (previous === status) return;
    for (const call of this.watchers.get(service) ?? []) call.write(FRAMES[status]);
  }

  statusOf(service: string): ServingStatus | undefined {
    return this.statuses.get(service);
  }

  /** The two methods, by path, for GrpcServer.addMethod. */
  methods(): Record<string, SingleMessageMethodHandler> {
    return {
      [`/${HEALTH_SERVICE_NAME}/Check`]: {
        kind: 'unary',
        handle: (message, call) => {
          const service = decodeRequest(message, call);
          if (service === undefined) return;
          const status = this.statuses.get(service);
          if (status) call.respond(FRAMES[status]);
          else call.fail({ code: GrpcStatus.NOT_FOUND, details: `Health status unknown for service ${service}` });
        },
      },
      [`/${HEALTH_SERVICE_NAME}/Watch`]: {
        kind: 'server-streaming',
        handle: (message, call) => {
          const service = decodeRequest(message, call);
          if (service === undefined) return;
          let watching = this.watchers.get(service);
          if (!watching) this.watchers.set(service, (watching = new Set()));
          const set = watching;
          set.add(call);
          call.onFinished(() => {
            set.delete(call);
            if (set.size === 0 && this.watchers.get(service) === set) this.watchers.delete(service);
          });
          call.write(FRAMES[this.statuses.get(service) ?? 'SERVICE_UNKNOWN']);
        },
      },
    };
  }
}

function decodeRequest(message: Buffer, call: UnaryCall): string | undefined {
  try {
    return decodeHealthCheckRequest(message);
  } catch (error) {
    call.fail({ code: GrpcStatus.INTERNAL, details: `Error deserializing request: ${(error as Error).message}` });
    return undefined;
  }
}
