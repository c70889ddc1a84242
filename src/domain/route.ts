/** Route families: which rules (credential headers, extra headers) a path follows. */
export type RouteFamily = 'chat-completions' | 'messages' | 'generative-content' | 'models' | 'other' | 'public';

/** The client style decides the shape of error bodies the caller's SDK understands. */
export type ClientStyle = 'chat' | 'messages' | 'generative' | 'generic';

export interface ClassifiedRoute {
  family: RouteFamily;
  style: ClientStyle;
  /** Path without the query string: the only form of the path that is ever logged. */
  pathWithoutQuery: string;
}
