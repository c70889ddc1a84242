// Preloaded (node --require) into a gateway-authz process by tests that need it to run "on" another Node.js
// version: process.versions.node reads REPORTED_NODE_VERSION, nothing else changes.
'use strict';
Object.defineProperty(process, 'versions', { value: Object.freeze({ ...process.versions, node: process.env.REPORTED_NODE_VERSION }) });
