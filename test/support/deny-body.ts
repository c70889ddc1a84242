/**
 * A deny body as the tests read it: the fields of every body style (chat, messages, generative, generic) in
 * one view. A test reads the fields of the style it expects; a field that style lacks is undefined at run
 * time and fails the assertion.
 */
export interface DenyBodyView {
  /** messages: 'error'. */
  type: string;
  /** messages: the request id. */
  request_id: string;
  error: {
    type: string;
    /** chat and generic: the reason code; generative: the HTTP status. */
    code: string | number;
    message: string;
    param: string | null;
    /** generative: the gRPC status name; generic: the HTTP status. */
    status: string | number;
    /** messages: an object with `error_code`; generative: google.rpc detail messages. */
    details: { error_code: string } & DenyDetail[];
  };
}

/** A google.rpc detail message in a generative deny body (ErrorInfo, RetryInfo, Help, ...). */
export interface DenyDetail {
  '@type': string;
  reason?: string;
  domain?: string;
  metadata?: Record<string, string>;
  retryDelay?: string;
}

export function parseDenyBody(body: string): DenyBodyView {
  return JSON.parse(body) as DenyBodyView;
}
