/** Route families: which rules (credential headers, extra headers) a path follows. */
export type RouteFamily = 'chat-completions' | 'messages' | 'generative-content' | 'models' | 'other' | 'public';

/**
 * Route families that cost money the usage processor cannot meter today,
 * refused until the operator enables them (config `enabledRoutes`):
 * - batches: the answers come later, in a results file whose per-request
 *   usage is never seen by ext_proc; metering them means reading each
 *   result exactly once per result id, not done yet;
 * - files: uploads that feed batches (and are stored on the operator's
 *   upstream account);
 * - unlisted: every path no route names (family `other`): image and audio
 *   generation, fine-tuning, realtime sessions and the endpoints that mint
 *   short-lived upstream credentials, whose use never passes the gateway.
 */
export const GATED_ROUTE_FAMILIES = ['batches', 'files', 'unlisted'] as const;
export type GatedRouteFamily = (typeof GATED_ROUTE_FAMILIES)[number];

/** The client style decides the shape of error bodies the caller's SDK understands. */
export type ClientStyle = 'chat' | 'messages' | 'generative' | 'generic';

export interface ClassifiedRoute {
  family: RouteFamily;
  style: ClientStyle;
  /** Path without the query string: the only form of the path that is ever logged. */
  pathWithoutQuery: string;
}
