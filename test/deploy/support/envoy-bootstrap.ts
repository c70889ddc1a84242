/**
 * A strict checker for Envoy v3 bootstrap YAML, built on Envoy's OFFICIAL
 * protos (the copy bundled in @grpc/grpc-js-xds/deps) loaded with protobufjs.
 *
 * Envoy loads YAML as proto3 JSON and refuses unknown fields, wrong JSON
 * types, unknown enum names and unknown `@type` URLs, then runs the
 * protoc-gen-validate (PGV) rules. protobufjs' own `fromObject` does none of
 * that (it silently drops unknown fields), so this module walks the YAML tree
 * against the protobufjs reflection itself:
 *
 *  - every key must be a field of the message (proto name or lowerCamel JSON
 *    name); the problem names the full path (`a.b[0].c["key"].d`);
 *  - every value must have the JSON type of its field (string / number /
 *    bool / object / array; integers also as decimal strings, as proto3 JSON
 *    allows; `null` is refused, since Envoy would read it as "unset", e.g. an
 *    empty `http2_protocol_options:` would silently not select HTTP/2);
 *  - enum values must be defined names (or defined numbers);
 *  - well-known types use their JSON forms: Duration "0.25s", wrappers
 *    (UInt32Value, BoolValue, ...) as plain values, Struct/Value/ListValue as
 *    any JSON, Timestamp, FieldMask, Empty; Any needs "@type":
 *    "type.googleapis.com/<full.name>" resolving in the loaded root, and its
 *    other keys are checked recursively against that type;
 *  - at most one member of a oneof; deprecated fields and enum values are
 *    refused (a production config should not lean on them);
 *  - a subset of the PGV rules Envoy enforces: message/duration/any
 *    `required`, oneof `(validate.required)`, string len/bytes/prefix/suffix/
 *    contains/in/not_in/pattern/well_known_regex (header names and values),
 *    numeric const/lt/lte/gt/gte/in/not_in (also on wrapper values), duration
 *    bounds, enum defined_only/in/not_in, repeated min/max_items/unique/items,
 *    map min/max_pairs/keys/values, any in/not_in. Other PGV rules are not
 *    checked.
 *
 * The converted tree is then turned into a real `envoy.config.bootstrap.v3.
 * Bootstrap` protobufjs message (each Any packed as type_url + encoded bytes)
 * and encoded.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

import * as protobuf from 'protobufjs';

import type { EnvoyView } from './envoy-semantics';

/** <node_modules>/@grpc/grpc-js-xds/deps: Envoy's official v3 API protos and their imports. */
export const ENVOY_DEPS_DIR = path.join(path.dirname(require.resolve('@grpc/grpc-js-xds/package.json')), 'deps');

const INCLUDE_DIRS = [
  ...['envoy-api', 'googleapis', 'xds', 'protoc-gen-validate'].map((dir) => path.join(ENVOY_DEPS_DIR, dir)),
  // google/protobuf/descriptor.proto (imported by PGV) ships with protobufjs.
  path.dirname(require.resolve('protobufjs/package.json')),
];

export const BOOTSTRAP_TYPE = 'envoy.config.bootstrap.v3.Bootstrap';

/**
 * The bootstrap and every extension whose `@type` our configs use. A type URL
 * not loaded here is refused as unknown, so adding an extension to envoy.yaml
 * means adding its proto here (all of these exist in the deps copy).
 */
export const ENVOY_PROTO_FILES = [
  'envoy/config/bootstrap/v3/bootstrap.proto',
  'envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.proto',
  'envoy/extensions/filters/http/ext_authz/v3/ext_authz.proto',
  'envoy/extensions/filters/http/ext_proc/v3/ext_proc.proto',
  'envoy/extensions/filters/http/router/v3/router.proto',
  'envoy/extensions/upstreams/http/v3/http_protocol_options.proto',
  'envoy/extensions/access_loggers/stream/v3/stream.proto',
  'envoy/extensions/access_loggers/file/v3/file.proto',
  'envoy/extensions/formatter/req_without_query/v3/req_without_query.proto',
  'envoy/extensions/http/early_header_mutation/header_mutation/v3/header_mutation.proto',
  'envoy/extensions/retry/host/previous_hosts/v3/previous_hosts.proto',
  'envoy/extensions/resource_monitors/downstream_connections/v3/downstream_connections.proto',
  'envoy/config/trace/v3/opentelemetry.proto',
];

/** Proto files resolved against include directories, as protoc's -I does, with field names as written. */
export function loadProtoRoot(includeDirs: readonly string[], files: readonly string[]): protobuf.Root {
  const root = new protobuf.Root();
  root.resolvePath = (_origin: string, target: string): string | null => {
    if (path.isAbsolute(target)) return target;
    for (const dir of includeDirs) {
      const full = path.join(dir, target);
      if (fs.existsSync(full)) return full;
    }
    return null;
  };
  root.loadSync([...files], { keepCase: true });
  root.resolveAll();
  return root;
}

let cachedRoot: protobuf.Root | undefined;

/** Envoy's official protos, loaded once per test file (about half a second). */
export function loadEnvoyRoot(): protobuf.Root {
  cachedRoot ??= loadProtoRoot(INCLUDE_DIRS, ENVOY_PROTO_FILES);
  return cachedRoot;
}

export class EnvoyConfigError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(`invalid Envoy config (${problems.length} problem${problems.length === 1 ? '' : 's'}):\n  ${problems.join('\n  ')}`);
    this.name = 'EnvoyConfigError';
  }
}

export interface CheckedBootstrap {
  readonly message: protobuf.Message;
  readonly bytes: Uint8Array;
  /** The decoded message as proto3 JSON, with every Any expanded to {"@type", ...fields}. */
  readonly view: EnvoyView;
}

/** Checks a parsed YAML/JSON bootstrap strictly and builds the official Bootstrap message; throws EnvoyConfigError. */
export function checkBootstrap(config: unknown, root: protobuf.Root = loadEnvoyRoot()): CheckedBootstrap {
  const type = root.lookupType(BOOTSTRAP_TYPE);
  const problems: string[] = [];
  const converted = new Converter(root, problems).message(type, config, '');
  if (problems.length > 0) throw new EnvoyConfigError(problems);
  const verifyError = type.verify(converted as Record<string, unknown>);
  if (verifyError) throw new EnvoyConfigError([`protobufjs verify: ${verifyError}`]);
  const message = type.fromObject(converted as Record<string, unknown>);
  const bytes = type.encode(message).finish();
  const decoded = type.decode(bytes);
  // The view's declared shape is what the checks read; the converter above has checked the message itself.
  return { message, bytes, view: protoJsonView(root, type, decoded) as unknown as EnvoyView };
}

/** The same strict check for any message type (used for fragments in tests). */
export function checkMessage(typeName: string, value: unknown, root: protobuf.Root = loadEnvoyRoot()): Record<string, unknown> {
  const problems: string[] = [];
  const converted = new Converter(root, problems).message(root.lookupType(typeName), value, '');
  if (problems.length > 0) throw new EnvoyConfigError(problems);
  return converted as Record<string, unknown>;
}

// ---------------------------------------------------------------------------
// YAML/JSON -> protobufjs object
// ---------------------------------------------------------------------------

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Out = unknown;

const TYPE_URL_PREFIX = 'type.googleapis.com/';
const WRAPPERS = new Set(
  ['DoubleValue', 'FloatValue', 'Int64Value', 'UInt64Value', 'Int32Value', 'UInt32Value', 'BoolValue', 'StringValue', 'BytesValue'].map(
    (name) => `.google.protobuf.${name}`,
  ),
);
/** Well-known types whose JSON form is not an object of fields; inside Any they sit under "value". */
const SPECIAL_JSON = new Set([
  ...WRAPPERS,
  '.google.protobuf.Duration',
  '.google.protobuf.Timestamp',
  '.google.protobuf.FieldMask',
  '.google.protobuf.Struct',
  '.google.protobuf.Value',
  '.google.protobuf.ListValue',
]);

const INT32_TYPES = new Set(['int32', 'sint32', 'sfixed32']);
const UINT32_TYPES = new Set(['uint32', 'fixed32']);
const INT64_TYPES = new Set(['int64', 'sint64', 'sfixed64']);
const UINT64_TYPES = new Set(['uint64', 'fixed64']);
const FLOAT_TYPES = new Set(['double', 'float']);

function jsonKind(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}

function isPlainObject(value: unknown): value is Record<string, Json> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const childPath = (base: string, key: string) => (base === '' ? key : `${base}.${key}`);
const indexPath = (base: string, index: number) => `${base}[${index}]`;
const mapPath = (base: string, key: string) => `${base}[${JSON.stringify(key)}]`;

function lowerCamel(name: string): string {
  return name.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());
}

const fieldIndexes = new WeakMap<protobuf.Type, Map<string, protobuf.Field>>();
function fieldByJsonKey(type: protobuf.Type, key: string): protobuf.Field | undefined {
  let index = fieldIndexes.get(type);
  if (!index) {
    index = new Map();
    for (const field of type.fieldsArray) {
      index.set(field.name, field);
      index.set(lowerCamel(field.name), field);
    }
    fieldIndexes.set(type, index);
  }
  return index.get(key);
}

/**
 * A parsed `(validate.rules)` option at any level: the rules of a field, or of one kind (string, enum,
 * duration, repeated items, map keys, ...). The members this checker applies are declared; numeric kinds
 * (int32, uint64, double, ...) are looked up by type name.
 */
interface Rules {
  message?: Rules;
  duration?: DurationRules;
  any?: Rules;
  timestamp?: Rules;
  enum?: Rules;
  string?: Rules;
  bool?: Rules;
  bytes?: Rules;
  map?: Rules;
  repeated?: Rules;
  items?: Rules;
  keys?: Rules;
  values?: Rules;
  required?: boolean;
  ignore_empty?: boolean;
  defined_only?: boolean;
  unique?: boolean;
  strict?: boolean;
  const?: Scalar;
  in?: Scalar[];
  not_in?: Scalar[];
  len?: number;
  min_len?: number;
  max_len?: number;
  min_bytes?: number;
  max_bytes?: number;
  prefix?: string;
  suffix?: string;
  contains?: string;
  not_contains?: string;
  pattern?: string;
  well_known_regex?: string;
  min_items?: number;
  max_items?: number;
  min_pairs?: number;
  max_pairs?: number;
  [key: string]: Json | Rules | DurationRules | undefined;
}

type Scalar = string | number | boolean;

/** google.protobuf.Duration rules: the bounds and the constant are durations ({seconds, nanos}). */
interface DurationRules {
  required?: boolean;
  [key: string]: Json | undefined;
}

/** Merges every `(validate.rules)` entry of a field's parsed options. */
function pgvRules(field: protobuf.Field): Rules | undefined {
  const entries = (field.parsedOptions ?? []) as Array<Record<string, unknown>>;
  let merged: Rules | undefined;
  for (const entry of entries) {
    const rules = entry['(validate.rules)'];
    if (isPlainObject(rules)) merged = deepMerge(merged ?? {}, rules);
  }
  return merged;
}

function deepMerge(target: Rules, source: Rules): Rules {
  for (const [key, value] of Object.entries(source)) {
    target[key] = isPlainObject(value) && isPlainObject(target[key]) ? deepMerge({ ...target[key] }, value) : value;
  }
  return target;
}

function isDeprecated(options: Record<string, unknown> | undefined): boolean {
  return options?.deprecated === true;
}

class Converter {
  constructor(
    private readonly root: protobuf.Root,
    private readonly problems: string[],
  ) {}

  private problem(at: string, message: string): undefined {
    this.problems.push(`${at === '' ? '(root)' : at}: ${message}`);
    return undefined;
  }

  /** A message value: special JSON forms for well-known types, otherwise an object of fields. */
  message(type: protobuf.Type, value: unknown, at: string): Out {
    const full = type.fullName;
    if (full === '.google.protobuf.Any') return this.any(value, at);
    if (WRAPPERS.has(full)) {
      const inner = this.scalar(type.fields.value!, value, at);
      return inner === undefined ? undefined : { value: inner };
    }
    if (full === '.google.protobuf.Duration') return this.duration(value, at);
    if (full === '.google.protobuf.Timestamp') return this.timestamp(value, at);
    if (full === '.google.protobuf.FieldMask') return this.fieldMask(value, at);
    if (full === '.google.protobuf.Struct') return this.struct(value, at);
    if (full === '.google.protobuf.Value') return this.structValue(value, at);
    if (full === '.google.protobuf.ListValue') return this.listValue(value, at);

    if (value === null) return this.problem(at, `null is not allowed for message ${full.slice(1)} (write {} for an empty message)`);
    if (!isPlainObject(value)) return this.problem(at, `expected an object (message ${full.slice(1)}), got ${jsonKind(value)}`);

    const out: Record<string, Out> = {};
    const failed = new Set<string>();
    const oneofMembers = new Map<string, string>();
    for (const [key, raw] of Object.entries(value)) {
      const here = childPath(at, key);
      const field = fieldByJsonKey(type, key);
      if (!field) {
        this.problem(here, `unknown field '${key}' in ${full.slice(1)}`);
        continue;
      }
      if (out[field.name] !== undefined) {
        this.problem(here, `field '${field.name}' given twice (proto and JSON spellings)`);
        continue;
      }
      if (isDeprecated(field.options)) this.problem(here, `field '${field.name}' of ${full.slice(1)} is deprecated`);
      const oneof = field.partOf;
      if (oneof) {
        const previous = oneofMembers.get(oneof.name);
        if (previous !== undefined) this.problem(here, `oneof '${oneof.name}' already set by '${previous}'`);
        oneofMembers.set(oneof.name, field.name);
      }
      const converted = this.fieldValue(field, raw, here);
      if (converted !== undefined) out[field.name] = converted;
      else failed.add(field.name);
    }
    this.checkMessageRules(type, out, failed, at);
    return out;
  }

  private fieldValue(field: protobuf.Field, value: unknown, at: string): Out {
    if (field instanceof protobuf.MapField) return this.mapValue(field, value, at);
    if (field.repeated) {
      if (!Array.isArray(value)) return this.problem(at, `expected an array (repeated ${field.type}), got ${jsonKind(value)}`);
      const items: Out[] = [];
      value.forEach((item, index) => {
        const converted = this.single(field, item, indexPath(at, index));
        if (converted !== undefined) items.push(converted);
      });
      return items;
    }
    return this.single(field, value, at);
  }

  private single(field: protobuf.FieldBase, value: unknown, at: string): Out {
    const resolved = field.resolvedType;
    if (resolved instanceof protobuf.Type) return this.message(resolved, value, at);
    if (resolved instanceof protobuf.Enum) return this.enumValue(resolved, value, at);
    return this.scalar(field, value, at);
  }

  private mapValue(field: protobuf.MapField, value: unknown, at: string): Out {
    if (!isPlainObject(value)) return this.problem(at, `expected an object (map<${field.keyType}, ${field.type}>), got ${jsonKind(value)}`);
    const out: Record<string, Out> = {};
    for (const [key, raw] of Object.entries(value)) {
      const here = mapPath(at, key);
      if (field.keyType !== 'string' && !this.mapKeyOk(field.keyType, key)) {
        this.problem(here, `map key '${key}' is not a valid ${field.keyType}`);
        continue;
      }
      const converted = this.single(field, raw, here);
      if (converted !== undefined) out[key] = converted;
    }
    return out;
  }

  private mapKeyOk(keyType: string, key: string): boolean {
    if (keyType === 'bool') return key === 'true' || key === 'false';
    return /^-?\d+$/.test(key);
  }

  private enumValue(type: protobuf.Enum, value: unknown, at: string): Out {
    const name = type.fullName.slice(1);
    if (typeof value === 'string') {
      const number = type.values[value];
      if (number === undefined)
        return this.problem(at, `'${value}' is not a value of enum ${name} (${Object.keys(type.values).join(', ')})`);
      if (isDeprecated(type.valuesOptions?.[value])) this.problem(at, `enum value ${name}.${value} is deprecated`);
      return number;
    }
    if (typeof value === 'number' && Number.isInteger(value)) {
      if (!Object.values(type.values).includes(value)) return this.problem(at, `${value} is not a value of enum ${name}`);
      return value;
    }
    return this.problem(at, `expected an enum name of ${name} (string), got ${jsonKind(value)}`);
  }

  scalar(field: protobuf.FieldBase, value: unknown, at: string): Out {
    const type = field.type;
    if (type === 'string') {
      if (typeof value !== 'string') return this.problem(at, `expected a string, got ${jsonKind(value)}`);
      return value;
    }
    if (type === 'bool') {
      if (typeof value !== 'boolean')
        return this.problem(at, `expected a bool (true/false), got ${jsonKind(value)}${typeof value === 'string' ? ` '${value}'` : ''}`);
      return value;
    }
    if (type === 'bytes') {
      if (typeof value !== 'string' || !/^[A-Za-z0-9+/_-]*={0,2}$/.test(value))
        return this.problem(at, `expected base64 bytes (string), got ${jsonKind(value)}`);
      return Buffer.from(value, 'base64');
    }
    if (FLOAT_TYPES.has(type)) {
      if (typeof value === 'number') return value;
      if (typeof value === 'string' && ['NaN', 'Infinity', '-Infinity'].includes(value)) return Number(value);
      if (typeof value === 'string' && value.trim() !== '' && Number.isFinite(Number(value))) return Number(value);
      return this.problem(at, `expected a number (${type}), got ${jsonKind(value)}`);
    }
    const integer = this.integer(value, at, type);
    if (integer === undefined) return undefined;
    const [min, max] = INT32_TYPES.has(type)
      ? [-(2n ** 31n), 2n ** 31n - 1n]
      : UINT32_TYPES.has(type)
        ? [0n, 2n ** 32n - 1n]
        : INT64_TYPES.has(type)
          ? [-(2n ** 63n), 2n ** 63n - 1n]
          : UINT64_TYPES.has(type)
            ? [0n, 2n ** 64n - 1n]
            : [undefined, undefined];
    if (min === undefined || max === undefined) return this.problem(at, `unsupported scalar type ${type}`);
    if (integer < min || integer > max) return this.problem(at, `${integer} is out of range for ${type}`);
    return integer >= BigInt(Number.MIN_SAFE_INTEGER) && integer <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(integer) : integer.toString();
  }

  /** proto3 JSON integers: a JSON number with no fraction, or a decimal string. */
  private integer(value: unknown, at: string, type: string): bigint | undefined {
    if (typeof value === 'number') {
      if (!Number.isInteger(value)) return this.problem(at, `expected an integer (${type}), got ${value}`);
      return BigInt(value);
    }
    if (typeof value === 'string' && /^-?\d+$/.test(value)) return BigInt(value);
    return this.problem(at, `expected an integer (${type}), got ${jsonKind(value)}${typeof value === 'string' ? ` '${value}'` : ''}`);
  }

  private any(value: unknown, at: string): Out {
    if (!isPlainObject(value)) return this.problem(at, `expected an object with "@type" (google.protobuf.Any), got ${jsonKind(value)}`);
    const typeUrl = value['@type'];
    if (typeof typeUrl !== 'string') return this.problem(at, `google.protobuf.Any needs a string "@type"`);
    const here = `${at}(${typeUrl.slice(typeUrl.lastIndexOf('/') + 1)})`;
    if (!typeUrl.startsWith(TYPE_URL_PREFIX)) return this.problem(at, `"@type" must start with ${TYPE_URL_PREFIX}, got '${typeUrl}'`);
    const typeName = typeUrl.slice(TYPE_URL_PREFIX.length);
    let type: protobuf.Type;
    try {
      type = this.root.lookupType(typeName);
    } catch {
      return this.problem(at, `unknown "@type" '${typeUrl}' (no message ${typeName} in the loaded Envoy protos)`);
    }
    const { '@type': _ignored, ...rest } = value;
    let converted: Out;
    if (SPECIAL_JSON.has(type.fullName)) {
      const extraKeys = Object.keys(rest).filter((key) => key !== 'value');
      for (const key of extraKeys) this.problem(childPath(here, key), `unknown field '${key}' in Any of ${typeName} (only "value")`);
      converted = this.message(type, rest.value, childPath(here, 'value'));
    } else {
      converted = this.message(type, rest, here);
    }
    if (converted === undefined) return undefined;
    try {
      const bytes = type.encode(type.fromObject(converted as Record<string, unknown>)).finish();
      return { type_url: typeUrl, value: bytes };
    } catch (error) {
      return this.problem(here, `cannot encode ${typeName}: ${(error as Error).message}`);
    }
  }

  private duration(value: unknown, at: string): Out {
    const match = typeof value === 'string' ? /^(-)?(\d+)(?:\.(\d{1,9}))?s$/.exec(value) : null;
    if (!match)
      return this.problem(
        at,
        `expected a duration string such as "0.25s", got ${jsonKind(value)}${typeof value !== 'object' ? ` ${JSON.stringify(value)}` : ''}`,
      );
    const sign = match[1] ? -1 : 1;
    const seconds = Number(match[2]);
    if (seconds > 315_576_000_000) return this.problem(at, `duration ${String(value)} is out of range`);
    const nanos = match[3] ? Number(match[3].padEnd(9, '0')) : 0;
    return { seconds: sign * seconds, nanos: sign * nanos };
  }

  private timestamp(value: unknown, at: string): Out {
    const millis = typeof value === 'string' && /^\d{4}-\d{2}-\d{2}T/.test(value) ? Date.parse(value) : NaN;
    if (!Number.isFinite(millis)) return this.problem(at, `expected an RFC 3339 timestamp string, got ${jsonKind(value)}`);
    return { seconds: Math.floor(millis / 1000), nanos: (millis % 1000) * 1_000_000 };
  }

  private fieldMask(value: unknown, at: string): Out {
    if (typeof value !== 'string') return this.problem(at, `expected a field mask string ("a.b,c"), got ${jsonKind(value)}`);
    return { paths: value === '' ? [] : value.split(',').map((p) => p.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)) };
  }

  private struct(value: unknown, at: string): Out {
    if (!isPlainObject(value)) return this.problem(at, `expected an object (google.protobuf.Struct), got ${jsonKind(value)}`);
    const fields: Record<string, Out> = {};
    for (const [key, raw] of Object.entries(value)) fields[key] = this.structValue(raw, mapPath(at, key));
    return { fields };
  }

  private structValue(value: unknown, at: string): Out {
    const member = (kind: ValueKind, v: Out) => ({ [valueFieldName(this.root, kind)]: v });
    if (value === null) return member('null', 0);
    if (typeof value === 'number') return member('number', value);
    if (typeof value === 'string') return member('string', value);
    if (typeof value === 'boolean') return member('bool', value);
    if (Array.isArray(value)) return member('list', this.listValue(value, at));
    if (isPlainObject(value)) return member('struct', this.struct(value, at));
    return this.problem(at, `not a JSON value: ${typeof value}`);
  }

  private listValue(value: unknown, at: string): Out {
    if (!Array.isArray(value)) return this.problem(at, `expected an array (google.protobuf.ListValue), got ${jsonKind(value)}`);
    return { values: value.map((item, index) => this.structValue(item, indexPath(at, index))) };
  }

  // -------------------------------------------------------------------------
  // PGV (protoc-gen-validate) rules, the subset Envoy configs commonly meet
  // -------------------------------------------------------------------------

  /** `failed`: fields given but already reported as wrong; their rules are not checked again. */
  private checkMessageRules(type: protobuf.Type, out: Record<string, Out>, failed: ReadonlySet<string>, at: string): void {
    const typeOptions = type.options ?? {};
    if (typeOptions['(validate.disabled)'] === true || typeOptions['(validate.ignored)'] === true) return;
    for (const oneof of type.oneofsArray) {
      if (oneof.fieldsArray.some((f) => failed.has(f.name))) continue;
      if (oneof.options?.['(validate.required)'] === true && !oneof.fieldsArray.some((f) => out[f.name] !== undefined)) {
        this.problem(at, `one of ${oneof.fieldsArray.map((f) => f.name).join(' | ')} is required in ${type.fullName.slice(1)}`);
      }
    }
    for (const field of type.fieldsArray) {
      const rules = pgvRules(field);
      if (!rules || failed.has(field.name)) continue;
      const here = childPath(at, field.name);
      const value = out[field.name];
      const present = value !== undefined;
      // PGV checks only the chosen member of a oneof (and unset proto3 `optional` fields not at all).
      if (!present && field.partOf) continue;
      if (field instanceof protobuf.MapField) {
        this.checkMapRules(field, rules.map, (value ?? {}) as Record<string, Out>, here);
        continue;
      }
      if (field.repeated) {
        this.checkRepeatedRules(field, rules.repeated, (value ?? []) as Out[], here);
        continue;
      }
      this.checkSingleRules(field, rules, value, here);
    }
  }

  private checkSingleRules(field: protobuf.FieldBase, rules: Rules, value: Out, at: string): void {
    const resolved = field.resolvedType;
    if (resolved instanceof protobuf.Type) {
      const full = resolved.fullName;
      if (value === undefined) {
        if (rules.message?.required || rules.duration?.required || rules.any?.required || rules.timestamp?.required) {
          this.problem(at, `required field '${field.name}' is missing`);
        }
        return;
      }
      if (full === '.google.protobuf.Duration' && rules.duration)
        this.checkDuration(rules.duration, value as { seconds: number; nanos: number }, at);
      if (full === '.google.protobuf.Any' && rules.any) this.checkAny(rules.any, value as { type_url: string }, at);
      if (WRAPPERS.has(full)) {
        const inner = (value as { value: Out }).value;
        this.checkScalarRules(resolved.fields.value!.type, rules, inner, at);
      }
      return;
    }
    if (resolved instanceof protobuf.Enum) {
      const number = (value ?? 0) as number;
      const enumRules = rules.enum;
      if (!enumRules) return;
      if (enumRules.defined_only && !Object.values(resolved.values).includes(number))
        this.problem(at, `${number} is not a defined enum value`);
      if (enumRules.const !== undefined && number !== enumRules.const) this.problem(at, `must be enum value ${enumRules.const}`);
      if (Array.isArray(enumRules.in) && !enumRules.in.includes(number))
        this.problem(at, `must be one of enum values ${enumRules.in.join(', ')}`);
      if (Array.isArray(enumRules.not_in) && enumRules.not_in.includes(number)) this.problem(at, `must not be enum value ${number}`);
      return;
    }
    this.checkScalarRules(field.type, rules, value ?? defaultScalar(field.type), at);
  }

  private checkScalarRules(type: string, rules: Rules, value: Out, at: string): void {
    if (type === 'string') {
      this.checkString(rules.string, value as string, at);
    } else if (type === 'bool') {
      if (rules.bool?.const !== undefined && value !== rules.bool.const) this.problem(at, `must be ${rules.bool.const}`);
    } else if (type === 'bytes') {
      const bytes = rules.bytes;
      const length = (value as Uint8Array).length;
      if (bytes?.min_len !== undefined && length < bytes.min_len) this.problem(at, `must be at least ${bytes.min_len} bytes`);
      if (bytes?.max_len !== undefined && length > bytes.max_len) this.problem(at, `must be at most ${bytes.max_len} bytes`);
    } else {
      const numeric = rules[type] as Rules | undefined;
      if (numeric) this.checkNumber(numeric, Number(value), at);
    }
  }

  private checkString(rules: Rules | undefined, value: string, at: string): void {
    if (!rules) return;
    if (rules.ignore_empty && value === '') return;
    const chars = [...value].length;
    const bytes = Buffer.byteLength(value, 'utf8');
    if (rules.const !== undefined && value !== rules.const) this.problem(at, `must be '${rules.const}'`);
    if (rules.len !== undefined && chars !== Number(rules.len)) this.problem(at, `must be exactly ${rules.len} characters`);
    if (rules.min_len !== undefined && chars < Number(rules.min_len)) {
      this.problem(at, value === '' ? 'must not be empty (required)' : `must be at least ${rules.min_len} characters`);
    }
    if (rules.max_len !== undefined && chars > Number(rules.max_len)) this.problem(at, `must be at most ${rules.max_len} characters`);
    if (rules.min_bytes !== undefined && bytes < Number(rules.min_bytes)) this.problem(at, `must be at least ${rules.min_bytes} bytes`);
    if (rules.max_bytes !== undefined && bytes > Number(rules.max_bytes)) this.problem(at, `must be at most ${rules.max_bytes} bytes`);
    if (rules.prefix !== undefined && !value.startsWith(rules.prefix)) this.problem(at, `must start with '${rules.prefix}'`);
    if (rules.suffix !== undefined && !value.endsWith(rules.suffix)) this.problem(at, `must end with '${rules.suffix}'`);
    if (rules.contains !== undefined && !value.includes(rules.contains)) this.problem(at, `must contain '${rules.contains}'`);
    if (rules.not_contains !== undefined && value.includes(rules.not_contains))
      this.problem(at, `must not contain '${rules.not_contains}'`);
    if (Array.isArray(rules.in) && !rules.in.includes(value)) this.problem(at, `must be one of ${rules.in.join(', ')}`);
    if (Array.isArray(rules.not_in) && rules.not_in.includes(value)) this.problem(at, `must not be '${value}'`);
    if (typeof rules.pattern === 'string') {
      let pattern: RegExp | undefined;
      try {
        pattern = new RegExp(rules.pattern, 'u'); // RE2 patterns in Envoy's protos are also valid JS patterns
      } catch {
        pattern = undefined;
      }
      if (pattern && !pattern.test(value)) this.problem(at, `'${value}' does not match ${rules.pattern}`);
    }
    if (typeof rules.well_known_regex === 'string') {
      const strict = rules.strict !== false;
      const regex = wellKnownRegex(rules.well_known_regex, strict);
      if (regex && !regex.test(value)) this.problem(at, `'${value}' is not a valid ${rules.well_known_regex}`);
    }
  }

  private checkNumber(rules: Rules, value: number, at: string): void {
    if (rules.ignore_empty && value === 0) return;
    if (rules.const !== undefined && value !== Number(rules.const)) this.problem(at, `must be ${rules.const}`);
    if (Array.isArray(rules.in) && !rules.in.map(Number).includes(value)) this.problem(at, `must be one of ${rules.in.join(', ')}`);
    if (Array.isArray(rules.not_in) && rules.not_in.map(Number).includes(value)) this.problem(at, `must not be ${value}`);
    const bound = (key: string) => (rules[key] === undefined ? undefined : Number(rules[key]));
    this.checkRange(value, bound('gt'), bound('gte'), bound('lt'), bound('lte'), String(value), at);
  }

  private checkDuration(rules: DurationRules, value: { seconds: number; nanos: number }, at: string): void {
    const nanos = (d: unknown) => {
      const o = (isPlainObject(d) ? d : {}) as { seconds?: number | string; nanos?: number };
      return Number(o.seconds ?? 0) * 1e9 + Number(o.nanos ?? 0);
    };
    const actual = value.seconds * 1e9 + value.nanos;
    const bound = (key: string) => (rules[key] === undefined ? undefined : nanos(rules[key]));
    if (rules.const !== undefined && actual !== nanos(rules.const)) this.problem(at, `must be exactly ${nanos(rules.const) / 1e9}s`);
    this.checkRange(actual, bound('gt'), bound('gte'), bound('lt'), bound('lte'), `${actual / 1e9}s`, at, (n) => `${n / 1e9}s`);
  }

  /** PGV range semantics, including exclusive ranges (lt < gt means "outside"). */
  private checkRange(
    value: number,
    gt: number | undefined,
    gte: number | undefined,
    lt: number | undefined,
    lte: number | undefined,
    shown: string,
    at: string,
    format: (n: number) => string = String,
  ): void {
    const lower =
      gt !== undefined
        ? { v: gt, ok: (x: number) => x > gt, text: `> ${format(gt)}` }
        : gte !== undefined
          ? { v: gte, ok: (x: number) => x >= gte, text: `>= ${format(gte)}` }
          : undefined;
    const upper =
      lt !== undefined
        ? { v: lt, ok: (x: number) => x < lt, text: `< ${format(lt)}` }
        : lte !== undefined
          ? { v: lte, ok: (x: number) => x <= lte, text: `<= ${format(lte)}` }
          : undefined;
    if (lower && upper && upper.v < lower.v) {
      if (!(lower.ok(value) || upper.ok(value))) this.problem(at, `${shown} must be ${upper.text} or ${lower.text}`);
      return;
    }
    if (lower && !lower.ok(value)) this.problem(at, `${shown} must be ${lower.text}`);
    if (upper && !upper.ok(value)) this.problem(at, `${shown} must be ${upper.text}`);
  }

  private checkAny(rules: Rules, value: { type_url: string }, at: string): void {
    if (Array.isArray(rules.in) && !rules.in.includes(value.type_url)) this.problem(at, `"@type" must be one of ${rules.in.join(', ')}`);
    if (Array.isArray(rules.not_in) && rules.not_in.includes(value.type_url))
      this.problem(at, `"@type" ${value.type_url} is not allowed here`);
  }

  private checkRepeatedRules(field: protobuf.Field, rules: Rules | undefined, items: Out[], at: string): void {
    if (!rules) return;
    if (rules.ignore_empty && items.length === 0) return;
    if (rules.min_items !== undefined && items.length < Number(rules.min_items))
      this.problem(at, `needs at least ${rules.min_items} item(s), has ${items.length}`);
    if (rules.max_items !== undefined && items.length > Number(rules.max_items))
      this.problem(at, `allows at most ${rules.max_items} item(s), has ${items.length}`);
    if (rules.unique) {
      const seen = new Set(items.map((item) => JSON.stringify(item)));
      if (seen.size !== items.length) this.problem(at, 'items must be unique');
    }
    if (isPlainObject(rules.items)) {
      items.forEach((item, index) => this.checkSingleRules(field, rules.items as Rules, item, indexPath(at, index)));
    }
  }

  private checkMapRules(field: protobuf.MapField, rules: Rules | undefined, entries: Record<string, Out>, at: string): void {
    if (!rules) return;
    const keys = Object.keys(entries);
    if (rules.ignore_empty && keys.length === 0) return;
    if (rules.min_pairs !== undefined && keys.length < Number(rules.min_pairs))
      this.problem(at, `needs at least ${rules.min_pairs} entr(ies)`);
    if (rules.max_pairs !== undefined && keys.length > Number(rules.max_pairs))
      this.problem(at, `allows at most ${rules.max_pairs} entr(ies)`);
    for (const key of keys) {
      if (isPlainObject(rules.keys))
        this.checkScalarRules(field.keyType, rules.keys, field.keyType === 'string' ? key : Number(key), mapPath(at, key));
      if (isPlainObject(rules.values)) this.checkSingleRules(field, rules.values, entries[key], mapPath(at, key));
    }
  }
}

/**
 * google.protobuf.Value's oneof members by field number. protobufjs bundles its
 * own struct.proto whose field names are lowerCamel (numberValue), unlike the
 * upstream file (number_value); the numbers, and so the wire format, agree.
 */
const VALUE_FIELD_IDS = { null: 1, number: 2, string: 3, bool: 4, struct: 5, list: 6 } as const;
type ValueKind = keyof typeof VALUE_FIELD_IDS;

function valueFieldName(root: protobuf.Root, kind: ValueKind): string {
  return root.lookupType('google.protobuf.Value').fieldsById[VALUE_FIELD_IDS[kind]]!.name;
}

function defaultScalar(type: string): Out {
  if (type === 'string') return '';
  if (type === 'bool') return false;
  if (type === 'bytes') return new Uint8Array();
  return 0;
}

/** PGV's well_known_regex for header names and values (RFC 7230), strict or not. */
function wellKnownRegex(name: string, strict: boolean): RegExp | undefined {
  // eslint-disable-next-line no-control-regex -- PGV's rule is about control characters: NUL is refused
  const relaxed = /^[^\u0000\n\r]*$/;
  if (name === 'HTTP_HEADER_NAME') return strict ? /^:?[0-9a-zA-Z!#$%&'*+\-.^_|~`]+$/ : relaxed;
  // eslint-disable-next-line no-control-regex -- PGV's rule is about control characters: all but HTAB are refused
  if (name === 'HTTP_HEADER_VALUE') return strict ? /^[^\u0000-\u0008\u000A-\u001F\u007F]*$/ : relaxed;
  return undefined;
}

// ---------------------------------------------------------------------------
// decoded message -> proto3 JSON view (Any expanded), for assertions
// ---------------------------------------------------------------------------

type ProtoMessage = protobuf.Message & Record<string, unknown>;

/** An int64 as protobufjs decodes it: a number, or a Long, whose toString() gives the exact decimal. */
type Int64 = number | { toString(): string };

export function protoJsonView(root: protobuf.Root, type: protobuf.Type, message: protobuf.Message): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const msg = message as ProtoMessage;
  for (const field of type.fieldsArray) {
    if (!Object.prototype.hasOwnProperty.call(msg, field.name)) continue;
    const raw = msg[field.name];
    if (raw === null || raw === undefined) continue;
    if (field instanceof protobuf.MapField) {
      const entries = Object.entries(raw as Record<string, unknown>);
      if (entries.length === 0) continue;
      out[field.name] = Object.fromEntries(entries.map(([k, v]) => [k, viewValue(root, field, v)]));
    } else if (field.repeated) {
      const items = raw as unknown[];
      if (items.length === 0) continue;
      out[field.name] = items.map((item) => viewValue(root, field, item));
    } else {
      out[field.name] = viewValue(root, field, raw);
    }
  }
  return out;
}

function viewValue(root: protobuf.Root, field: protobuf.FieldBase, value: unknown): unknown {
  const resolved = field.resolvedType;
  if (resolved instanceof protobuf.Enum) return resolved.valuesById[value as number] ?? value;
  if (resolved instanceof protobuf.Type) return viewMessage(root, resolved, value as ProtoMessage);
  if (value && typeof value === 'object' && 'low' in value) return Number((value as Int64).toString());
  if (value instanceof Uint8Array) return Buffer.from(value).toString('base64');
  return value;
}

function viewMessage(root: protobuf.Root, type: protobuf.Type, message: ProtoMessage): unknown {
  const full = type.fullName;
  if (full === '.google.protobuf.Any') {
    const typeUrl = String(message.type_url);
    const inner = root.lookupType(typeUrl.slice(typeUrl.lastIndexOf('/') + 1));
    const decoded = inner.decode(message.value as Uint8Array);
    const view = viewMessage(root, inner, decoded as ProtoMessage);
    return SPECIAL_JSON.has(inner.fullName) ? { '@type': typeUrl, value: view } : { '@type': typeUrl, ...(view as object) };
  }
  if (WRAPPERS.has(full)) {
    const value = message.value;
    if (value === undefined || value === null) return defaultScalar(type.fields.value!.type);
    return viewValue(root, type.fields.value!, value);
  }
  if (full === '.google.protobuf.Duration') {
    const seconds = Number(((message.seconds ?? 0) as Int64).toString());
    const nanos = Number(message.nanos ?? 0);
    return `${Number((seconds + nanos / 1e9).toFixed(9))}s`;
  }
  if (full === '.google.protobuf.Struct') {
    const fields = (message.fields ?? {}) as Record<string, ProtoMessage>;
    return Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, viewMessage(root, root.lookupType('google.protobuf.Value'), v)]));
  }
  if (full === '.google.protobuf.Value') {
    // `kind` is protobufjs' virtual oneof property: the name of the member that is set.
    const kind = message.kind as string | undefined;
    const name = (k: ValueKind) => valueFieldName(root, k);
    if (kind === name('number') || kind === name('string') || kind === name('bool')) return message[kind];
    if (kind === name('struct')) return viewMessage(root, root.lookupType('google.protobuf.Struct'), message[kind] as ProtoMessage);
    if (kind === name('list')) {
      const values = ((message[kind] as ProtoMessage).values ?? []) as ProtoMessage[];
      return values.map((v) => viewMessage(root, type, v));
    }
    return null;
  }
  return protoJsonView(root, type, message);
}
