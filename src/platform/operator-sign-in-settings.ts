import { z } from 'zod';
import { OPERATOR_ROLES, type OperatorRole } from '../operators/operator-permissions';

/**
 * OpenID Connect sign-in for the operator dashboard (OPERATOR_OIDC_* and
 * OPERATOR_SESSION_* settings): its own client, cookie, session keys and
 * lifetimes, apart from the customer dashboard's. Roles come from one claim
 * of the identity provider (`groups` by default), mapped to our roles.
 */
export interface OperatorSignInSettings {
  readonly issuerUrl: string;
  readonly clientId: string;
  readonly clientSecret?: string;
  /** `<public origin>` + OPERATOR_CALLBACK_PATH. */
  readonly redirectUrl: string;
  readonly publicOrigin: string;
  readonly scopes: readonly string[];
  /** Operators are always named by issuer and subject: the audit trail names them so. */
  readonly identityClaim: 'sub';
  /** The claim that holds the person's groups (a string or an array of strings). */
  readonly rolesClaim: string;
  /** IdP value → our roles; a person none of whose values is mapped cannot sign in. */
  readonly roleMap: Readonly<Record<string, readonly OperatorRole[]>>;
  readonly sessionSecret: string;
  readonly sessionIdleMs: number;
  readonly sessionMaxAgeMs: number;
  readonly plainHttpLocalhost: boolean;
}

/** The identity provider sends the browser back here, on the admin listener. */
export const OPERATOR_CALLBACK_PATH = '/dashboard/auth/callback';

const blankAsUnset = (value: unknown) => (typeof value === 'string' && value.trim() === '' ? undefined : value);
const optionalText = z
  .string()
  .optional()
  .transform((value) => (value === undefined || value.trim() === '' ? undefined : value.trim()));

/** The environment variables, spread into the settings schema (src/platform/settings.ts). */
export const operatorSignInEnv = {
  OPERATOR_OIDC_ISSUER_URL: optionalText,
  OPERATOR_OIDC_CLIENT_ID: optionalText,
  OPERATOR_OIDC_CLIENT_SECRET: optionalText,
  OPERATOR_OIDC_REDIRECT_URL: optionalText,
  OPERATOR_OIDC_SCOPES: z.preprocess(blankAsUnset, z.string().default('openid email profile groups')),
  OPERATOR_OIDC_ROLES_CLAIM: z.preprocess(
    blankAsUnset,
    z
      .string()
      .regex(/^[A-Za-z0-9_:./-]{1,100}$/)
      .default('groups'),
  ),
  OPERATOR_OIDC_ROLE_MAP: optionalText,
  OPERATOR_SESSION_SECRET: optionalText,
  // Shorter than a customer's: an operator session can move money on every account.
  OPERATOR_SESSION_IDLE_TIMEOUT_MS: z.preprocess(blankAsUnset, z.coerce.number().int().min(60_000).max(86_400_000).default(900_000)),
  OPERATOR_SESSION_MAX_AGE_MS: z.preprocess(blankAsUnset, z.coerce.number().int().min(300_000).max(86_400_000).default(28_800_000)),
  OPERATOR_PLAIN_HTTP_LOCALHOST: z.preprocess(blankAsUnset, z.enum(['true', 'false']).default('false')),
};

type OperatorEnv = { [Name in keyof typeof operatorSignInEnv]: z.output<(typeof operatorSignInEnv)[Name]> };

const isLoopbackHost = (hostname: string) => hostname === 'localhost' || hostname === '[::1]' || /^127(\.\d{1,3}){3}$/.test(hostname);

function parsedUrl(text: string): URL | undefined {
  try {
    return new URL(text);
  } catch {
    return undefined;
  }
}

/** `value=role,value=role+role`: each value of the role claim and the roles it grants. */
export function parseRoleMap(text: string): { map: Record<string, OperatorRole[]> } | { problem: string } {
  const map: Record<string, OperatorRole[]> = Object.create(null) as Record<string, OperatorRole[]>;
  for (const entry of text
    .split(',')
    .map((part) => part.trim())
    .filter(Boolean)) {
    const match = /^([^=\s]+)=([a-z+]+)$/.exec(entry);
    const roles = match?.[2]!.split('+') ?? [];
    if (!match || roles.some((role) => !(OPERATOR_ROLES as readonly string[]).includes(role))) {
      return { problem: `'${entry}' is not <claim value>=<role>[+<role>] with roles from ${OPERATOR_ROLES.join(', ')}` };
    }
    map[match[1]!] = [...new Set([...(map[match[1]!] ?? []), ...(roles as OperatorRole[])])];
  }
  return Object.keys(map).length === 0 ? { problem: 'maps no value to a role' } : { map };
}

/** Every problem with the OPERATOR_OIDC_* and OPERATOR_SESSION_* settings (none when operator sign-in is not configured). */
export function operatorSignInProblems(e: OperatorEnv): string[] {
  const problems: string[] = [];
  if (!e.OPERATOR_OIDC_ISSUER_URL) {
    const stray = (
      [
        'OPERATOR_OIDC_CLIENT_ID',
        'OPERATOR_OIDC_CLIENT_SECRET',
        'OPERATOR_OIDC_REDIRECT_URL',
        'OPERATOR_OIDC_ROLE_MAP',
        'OPERATOR_SESSION_SECRET',
      ] as const
    ).filter((name) => e[name] !== undefined);
    if (stray.length > 0)
      problems.push(`OPERATOR_OIDC_ISSUER_URL: required when ${stray.join(', ')} ${stray.length > 1 ? 'are' : 'is'} set`);
    return problems;
  }
  const plainHttp = e.OPERATOR_PLAIN_HTTP_LOCALHOST === 'true';
  const checkUrl = (name: string, text: string | undefined): URL | undefined => {
    const url = text === undefined ? undefined : parsedUrl(text);
    if (!url) {
      problems.push(`${name}: ${text === undefined ? 'required with OPERATOR_OIDC_ISSUER_URL' : `not a URL: '${text}'`}`);
      return undefined;
    }
    if (url.protocol !== 'https:' && !(url.protocol === 'http:' && plainHttp && isLoopbackHost(url.hostname))) {
      problems.push(`${name}: must be an https:// URL (plain http:// only on a loopback host with OPERATOR_PLAIN_HTTP_LOCALHOST=true)`);
    }
    return url;
  };
  checkUrl('OPERATOR_OIDC_ISSUER_URL', e.OPERATOR_OIDC_ISSUER_URL);
  const redirect = checkUrl('OPERATOR_OIDC_REDIRECT_URL', e.OPERATOR_OIDC_REDIRECT_URL);
  if (redirect && redirect.href !== `${redirect.origin}${OPERATOR_CALLBACK_PATH}`) {
    problems.push(
      `OPERATOR_OIDC_REDIRECT_URL: must be the operator dashboard's public origin followed by ${OPERATOR_CALLBACK_PATH} and nothing else`,
    );
  }
  if (!e.OPERATOR_OIDC_CLIENT_ID) problems.push('OPERATOR_OIDC_CLIENT_ID: required with OPERATOR_OIDC_ISSUER_URL');
  if (!e.OPERATOR_OIDC_SCOPES.split(/\s+/).includes('openid')) problems.push("OPERATOR_OIDC_SCOPES: must include 'openid'");
  if (!e.OPERATOR_OIDC_ROLE_MAP)
    problems.push('OPERATOR_OIDC_ROLE_MAP: required with OPERATOR_OIDC_ISSUER_URL (e.g. gw-admins=admin,gw-support=support)');
  else {
    const parsed = parseRoleMap(e.OPERATOR_OIDC_ROLE_MAP);
    if ('problem' in parsed) problems.push(`OPERATOR_OIDC_ROLE_MAP: ${parsed.problem}`);
  }
  if (!e.OPERATOR_SESSION_SECRET || e.OPERATOR_SESSION_SECRET.length < 32) {
    problems.push(
      'OPERATOR_SESSION_SECRET: required with OPERATOR_OIDC_ISSUER_URL, at least 32 random characters, the same on every replica',
    );
  }
  if (e.OPERATOR_SESSION_IDLE_TIMEOUT_MS > e.OPERATOR_SESSION_MAX_AGE_MS) {
    problems.push('OPERATOR_SESSION_IDLE_TIMEOUT_MS: must not exceed OPERATOR_SESSION_MAX_AGE_MS');
  }
  return problems;
}

/** The settings, once operatorSignInProblems found none; undefined when operator sign-in is not configured. */
export function operatorSignInOf(e: OperatorEnv): OperatorSignInSettings | undefined {
  if (!e.OPERATOR_OIDC_ISSUER_URL) return undefined;
  const redirectUrl = new URL(e.OPERATOR_OIDC_REDIRECT_URL!);
  const parsed = parseRoleMap(e.OPERATOR_OIDC_ROLE_MAP!);
  return {
    issuerUrl: e.OPERATOR_OIDC_ISSUER_URL,
    clientId: e.OPERATOR_OIDC_CLIENT_ID!,
    ...(e.OPERATOR_OIDC_CLIENT_SECRET ? { clientSecret: e.OPERATOR_OIDC_CLIENT_SECRET } : {}),
    redirectUrl: redirectUrl.href,
    publicOrigin: redirectUrl.origin,
    scopes: e.OPERATOR_OIDC_SCOPES.split(/\s+/).filter(Boolean),
    identityClaim: 'sub',
    rolesClaim: e.OPERATOR_OIDC_ROLES_CLAIM,
    roleMap: 'map' in parsed ? parsed.map : {},
    sessionSecret: e.OPERATOR_SESSION_SECRET!,
    sessionIdleMs: e.OPERATOR_SESSION_IDLE_TIMEOUT_MS,
    sessionMaxAgeMs: e.OPERATOR_SESSION_MAX_AGE_MS,
    plainHttpLocalhost: e.OPERATOR_PLAIN_HTTP_LOCALHOST === 'true',
  };
}

/** The roles a person's claim value(s) grant, in OPERATOR_ROLES order; none: they may not sign in. */
export function rolesFromClaim(claim: unknown, roleMap: Readonly<Record<string, readonly OperatorRole[]>>): OperatorRole[] {
  const values = typeof claim === 'string' ? [claim] : Array.isArray(claim) ? claim.filter((value) => typeof value === 'string') : [];
  const granted = new Set(values.flatMap((value: string) => (Object.hasOwn(roleMap, value) ? roleMap[value]! : [])));
  return OPERATOR_ROLES.filter((role) => granted.has(role));
}
