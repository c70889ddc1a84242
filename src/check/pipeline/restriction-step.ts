import type { AuthRequest } from '../auth-request';
import { denial } from '../deny-reasons';
import {
  addressBytes,
  compileRestrictions,
  inRange,
  modelAllowed,
  parseRestrictionsText,
  pathAllowed,
  restrictionsStamp,
  type AddressRange,
  type CompiledRestrictions,
  type RestrictionKind,
} from '../../keys/key-restrictions';
import { modelInGenerativePath, shownModelName } from '../../metering/requested-model';
import { routingPath } from '../routes/classify';
import type { ClassifiedRoute, RouteFamily } from '../routes/route';
import type { KeyedFamily } from '../routes/route-table';
import { topLevelModelOf } from './model-step';

/**
 * A key's restrictions as one replica holds them: the stamps of the stored texts it read them from (what the store
 * confirms on every Check, src/check/ports.ts RestrictionsSent), and both parts compiled. The account's defaults and
 * the key's own are both applied, so a key can only narrow its account's. As a RestrictionsSent, it is what a Check
 * that refused nothing sends: no object is made per Check.
 */
export interface EffectiveRestrictions {
  readonly keyStamp: string;
  readonly accountStamp: string;
  readonly parts: readonly CompiledRestrictions[];
}

/** What a replica believes of a key it holds nothing for: no restrictions, the common case, which costs nothing. */
export const NO_RESTRICTIONS: EffectiveRestrictions = Object.freeze({ keyStamp: '', accountStamp: '', parts: Object.freeze([]) });

/**
 * The stored texts compiled, with their stamps (computed here from the texts the store answered, so a record whose
 * stamp is not its text's is answered as changed again, and Check fails closed); throws when one is not valid
 * restrictions (a record written by something else).
 */
export function effectiveRestrictions(keyText: string, accountText: string): EffectiveRestrictions {
  if (keyText === '' && accountText === '') return NO_RESTRICTIONS;
  const parts = [parseRestrictionsText(accountText), parseRestrictionsText(keyText)].flatMap((part) =>
    part === undefined ? [] : [compileRestrictions(part)],
  );
  return { keyStamp: restrictionsStamp(keyText), accountStamp: restrictionsStamp(accountText), parts };
}

export type RestrictionRefusal = { kind: RestrictionKind } & (
  | ReturnType<typeof denial<'address_not_permitted'>>
  | ReturnType<typeof denial<'endpoint_not_permitted'>>
  | ReturnType<typeof denial<'model_not_permitted'>>
  | ReturnType<typeof denial<'model_not_readable'>>
);

/** Reads and deletions generate nothing: they name no model, and a model restriction does not refuse them. */
const NO_MODEL_NEEDED = new Set(['GET', 'HEAD', 'DELETE']);
const READ_METHODS = new Set(['GET', 'HEAD']);

/**
 * The first restriction the request breaks, in this order: source address (who is calling), endpoint (what it
 * calls), model (what it asks for); undefined when it breaks none. Pure and offline: the store only confirms that
 * the restrictions decided on are the records' current ones.
 */
export function refusedByRestrictions(
  request: AuthRequest,
  route: ClassifiedRoute,
  restrictions: EffectiveRestrictions,
): RestrictionRefusal | undefined {
  const { parts } = restrictions;
  if (parts.length === 0) return undefined;
  // Loops, not closures: this runs on every Check of a restricted key.
  let address: Uint8Array | undefined;
  for (const part of parts) {
    if (part.ranges === undefined) continue;
    address ??= request.sourceAddress === undefined ? undefined : addressBytes(request.sourceAddress);
    // No address Envoy reported (a pipe, an internal listener) is no address in any range: fail closed.
    if (address === undefined || !inAnyRange(address, part.ranges)) return { kind: 'address', ...denial('address_not_permitted') };
  }
  const path = routingPath(route.pathWithoutQuery);
  for (const part of parts) {
    if (part.readOnly && !READ_METHODS.has(request.method)) {
      return { kind: 'endpoint', ...denial('endpoint_not_permitted', { readOnly: true }) };
    }
    if ((part.families || part.paths) && !endpointAllowed(part, route.family, path)) {
      return { kind: 'endpoint', ...denial('endpoint_not_permitted', { readOnly: false }) };
    }
  }
  if (parts.some((part) => part.models !== undefined)) {
    const model = requestedModel(request, route, path);
    if (model === undefined) {
      return NO_MODEL_NEEDED.has(request.method) ? undefined : { kind: 'model', ...denial('model_not_readable') };
    }
    if (!parts.every((part) => !part.models || modelAllowed(part.models, model))) {
      return { kind: 'model', ...denial('model_not_permitted', { model: shownModelName(model) }) };
    }
  }
  return undefined;
}

function inAnyRange(address: Uint8Array, ranges: readonly AddressRange[]): boolean {
  for (const range of ranges) if (inRange(address, range)) return true;
  return false;
}

function endpointAllowed(part: CompiledRestrictions, family: RouteFamily, path: string): boolean {
  return (part.families?.has(family as KeyedFamily) ?? false) || (part.paths !== undefined && pathAllowed(part.paths, path));
}

/**
 * The model the request names, where Check can read it: in a generative-content path, else in the top-level `model`
 * of the body when Envoy sends one (the scanner the unpriced-model step uses). A path segment that does not decode
 * names no readable model.
 */
function requestedModel(request: AuthRequest, route: ClassifiedRoute, path: string): string | undefined {
  if (route.family === 'generative-content') {
    const found = modelInGenerativePath(path);
    return found.kind === 'model' ? found.model : undefined;
  }
  return request.body === undefined ? undefined : topLevelModelOf(request.body);
}
