import { problemsOf, settingsOf } from '../../support/settings-results';

describe('tracing settings (the standard OTEL_* variables)', () => {
  it('are off unless OTEL_TRACES_EXPORTER=otlp', () => {
    expect(settingsOf({}).tracing).toBeUndefined();
    expect(settingsOf({ OTEL_TRACES_EXPORTER: 'none' }).tracing).toBeUndefined();
  });

  it('export to the OTLP/HTTP default on this machine, parent-based and always on, reading tracecontext', () => {
    expect(settingsOf({ OTEL_TRACES_EXPORTER: 'otlp' }).tracing).toEqual({
      tracesUrl: 'http://localhost:4318/v1/traces',
      serviceName: 'gateway-authz',
      sampler: 'parentbased_always_on',
      samplerRatio: 1,
      propagators: ['tracecontext'],
    });
  });

  it('add v1/traces to OTEL_EXPORTER_OTLP_ENDPOINT, and take OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as given', () => {
    const base = { OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' };
    expect(settingsOf(base).tracing?.tracesUrl).toBe('http://collector:4318/v1/traces');
    expect(settingsOf({ ...base, OTEL_EXPORTER_OTLP_ENDPOINT: 'https://collector/otlp' }).tracing?.tracesUrl).toBe(
      'https://collector/otlp/v1/traces',
    );
    expect(settingsOf({ ...base, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://other:9999/traces' }).tracing?.tracesUrl).toBe(
      'http://other:9999/traces',
    );
  });

  it('read the sampler, its ratio, the service name and the propagators', () => {
    expect(
      settingsOf({
        OTEL_TRACES_EXPORTER: 'otlp',
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '0.01',
        OTEL_SERVICE_NAME: 'authz-eu',
        OTEL_PROPAGATORS: 'tracecontext, baggage ,b3multi',
      }).tracing,
    ).toMatchObject({
      sampler: 'parentbased_traceidratio',
      samplerRatio: 0.01,
      serviceName: 'authz-eu',
      propagators: ['tracecontext', 'b3multi'],
    });
  });

  it('are off with OTEL_SDK_DISABLED=true, whatever the exporter', () => {
    expect(settingsOf({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_SDK_DISABLED: 'true' }).tracing).toBeUndefined();
  });

  it('refuse what they cannot honour, naming the variable', () => {
    expect(problemsOf({ OTEL_TRACES_EXPORTER: 'jaeger' })).toEqual([expect.stringMatching(/^OTEL_TRACES_EXPORTER: must be 'otlp'/)]);
    expect(problemsOf({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toEqual([
      expect.stringMatching(/^OTEL_EXPORTER_OTLP_PROTOCOL: only http\/protobuf is supported/),
    ]);
    expect(problemsOf({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' })).toEqual([
      expect.stringMatching(/^OTEL_EXPORTER_OTLP_ENDPOINT: must be an http:\/\/ or https:\/\/ URL/),
    ]);
    expect(problemsOf({ OTEL_TRACES_SAMPLER: 'ratio' })).toEqual([expect.stringMatching(/^OTEL_TRACES_SAMPLER: must be one of always_on/)]);
    expect(problemsOf({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_TRACES_SAMPLER_ARG: '1.5' })).toEqual([
      expect.stringMatching(/^OTEL_TRACES_SAMPLER_ARG: /),
    ]);
    expect(problemsOf({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_PROPAGATORS: 'tracecontext,xray' })).toEqual([
      expect.stringMatching(/^OTEL_PROPAGATORS: unknown propagator 'xray'/),
    ]);
  });

  it('refuse a half-set configuration rather than leave tracing silently off', () => {
    expect(problemsOf({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toEqual([
      'OTEL_EXPORTER_OTLP_ENDPOINT: set, but OTEL_TRACES_EXPORTER is none (tracing is off unless OTEL_TRACES_EXPORTER=otlp)',
    ]);
    expect(problemsOf({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_TRACES_SAMPLER_ARG: '0.5' })).toEqual([
      expect.stringMatching(/^OTEL_TRACES_SAMPLER_ARG: only meaningful with OTEL_TRACES_SAMPLER=traceidratio or parentbased_traceidratio/),
    ]);
    expect(problemsOf({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_PROPAGATORS: 'baggage' })).toEqual([
      expect.stringMatching(/^OTEL_PROPAGATORS: names no propagator/),
    ]);
  });
});
