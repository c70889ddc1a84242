// The page scripts take the customer API's answer types from the server's own view modules (one description of the
// wire contract). Some modules those import use Node built-ins; for the browser type check they are opaque.
declare module 'node:crypto';
declare module 'node:zlib';
