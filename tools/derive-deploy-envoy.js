#!/usr/bin/env node
// Writes deploy/envoy.yaml (the Kubernetes pod's Envoy) from envoy.yaml (docker compose): `npm run deploy:envoy`.
//
// Why a generator and not a kustomize patch: kustomize puts envoy.yaml into the ConfigMap as one opaque string, which
// its patches cannot edit, and it refuses to read ../envoy.yaml from outside deploy/. So deploy/envoy.yaml stays a
// committed file (what `kubectl apply -k deploy/` reads), and test/deploy/envoy-derived.test.ts fails whenever it is
// not exactly what this script makes of envoy.yaml: edit envoy.yaml, then run the script.
//
// The differences are the list below, and nothing else. Each replaced text must occur in envoy.yaml exactly as often
// as stated, or the script stops and names it: an edit there needs a decision about the pod's copy.
//
//   node tools/derive-deploy-envoy.js                 writes deploy/envoy.yaml
//   node tools/derive-deploy-envoy.js --stdout [FILE] prints what it would write (from FILE instead of envoy.yaml)
'use strict';

const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.join(__dirname, '..');
const SOURCE = path.join(ROOT, 'envoy.yaml');
const TARGET = path.join(ROOT, 'deploy', 'envoy.yaml');

/** Replaces envoy.yaml's leading comment block. */
const HEADER = `# GENERATED from ../envoy.yaml by tools/derive-deploy-envoy.js (npm run deploy:envoy).
# Edit envoy.yaml, or the differences listed in the script, then run it; not this file.
#
# Envoy v3 static bootstrap for the Kubernetes pod (deploy/deployment.yaml):
# Envoy and gateway-authz run side by side in every pod. kustomize turns this
# file into the ConfigMap \`gateway-authz-envoy\` (configMapGenerator in
# kustomization.yaml; its name gets a content hash, so editing this file rolls
# the pods).
#
# This is ../envoy.yaml (docker compose) with ONLY the cluster addresses
# changed (test/deploy/envoy-config.test.ts enforces that the rest is equal):
#   ext_authz,    STATIC 127.0.0.1:9191, the gateway-authz container of the same
#   ext_proc:     pod (no DNS, no extra hop; each Envoy checks and meters with
#                 its own replica, and the grpc health check sees that replica drain).
#   upstream_api: STRICT_DNS upstream-api:8081. Point the name at the LLM API
#                 with a Service called \`upstream-api\` in the namespace
#                 (ClusterIP in front of its pods, or ExternalName), or
#                 replace this file in an overlay (configMapGenerator with
#                 behavior: replace). For an upstream reached over TLS, add an
#                 UpstreamTlsContext transport_socket to that cluster.
#
# Every field here is checked against Envoy's official v3 protos by
# test/deploy/kubernetes.test.ts and test/deploy/envoy-config.test.ts.
`;

/** @type {{ why: string, from: string, to: string, times?: number }[]} */
const DIFFERENCES = [
  {
    why: 'ext_authz: the gateway-authz container of the same pod, not the compose service name',
    from: `    type: STRICT_DNS
    # Every A record of the name is a host: \`docker compose up --scale gateway-authz=3\`
    # spreads Checks over all replicas (round robin).
    dns_lookup_family: V4_PREFERRED
`,
    to: `    # The gateway-authz container of this pod.
    type: STATIC
`,
  },
  {
    why: 'ext_authz circuit breaker: one replica behind each Envoy',
    from: '    # Envoy (1; with `--scale gateway-authz=N`, N x 128). Why 128: a\n',
    to: '    # Envoy (1: the gateway-authz container of this pod). Why 128: a\n',
  },
  {
    why: 'ext_authz health check: with one host, panic mode always applies',
    from: `    # grpc.health.v1.Health/Check (service "") on the gRPC port. gateway-authz
    # answers SERVING only while Redis answers, and NOT_SERVING from SIGTERM, so
    # Envoy moves Checks to other replicas. If every host is unhealthy Envoy's
    # panic mode still sends Checks to them; gateway-authz then answers 503
    # store_unavailable itself (fail closed either way).
`,
    to: `    # grpc.health.v1.Health/Check (service "") on the gRPC port. With one host
    # (this pod's replica) an unhealthy host is still used (Envoy's panic mode):
    # gateway-authz then answers 503 store_unavailable itself, fail closed. The
    # check still matters: it shows in Envoy's stats, and the same status drives
    # the pod's readiness probe, which takes the pod out of the Service.
`,
  },
  {
    why: 'ext_authz and ext_proc endpoints: the same pod',
    from: '        - endpoint: { address: { socket_address: { address: gateway-authz, port_value: 9191 } } }\n',
    to: '        - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: 9191 } } }\n',
    times: 2,
  },
  {
    why: 'ext_proc: the gateway-authz container of the same pod, as for ext_authz',
    from: `    # The same gateway-authz replicas and gRPC port as ext_authz.
    type: STRICT_DNS
    dns_lookup_family: V4_PREFERRED
`,
    to: `    # The gateway-authz container of this pod, as for ext_authz.
    type: STATIC
`,
  },
  {
    why: 'upstream_api: the Service name upstream-api, not tools/fake-upstream',
    from: '    # The LLM API. In docker-compose.yml: tools/fake-upstream.\n',
    to: '    # The LLM API, behind the Service name `upstream-api` (see the top of this file).\n',
  },
  {
    why: 'upstream_api endpoint',
    from: '        - endpoint: { address: { socket_address: { address: upstream, port_value: 8081 } } }\n',
    to: '        - endpoint: { address: { socket_address: { address: upstream-api, port_value: 8081 } } }\n',
  },
];

/** deploy/envoy.yaml's text, from envoy.yaml's. Throws, naming the difference, when envoy.yaml no longer has its text. */
function deriveDeployEnvoy(composeEnvoy) {
  const body = composeEnvoy.replace(/^(#.*\n)+/, '');
  if (body === composeEnvoy) throw new Error('envoy.yaml does not start with a comment block to replace');
  let text = body;
  for (const { why, from, to, times = 1 } of DIFFERENCES) {
    const found = text.split(from).length - 1;
    if (found !== times) {
      throw new Error(`envoy.yaml has ${found} times, not ${times}, the text replaced for "${why}":\n${from}`);
    }
    text = text.split(from).join(to);
  }
  return HEADER + text;
}

if (require.main === module) {
  const args = process.argv.slice(2);
  try {
    if (args[0] === '--stdout') {
      process.stdout.write(deriveDeployEnvoy(fs.readFileSync(args[1] ?? SOURCE, 'utf8')));
    } else if (args.length === 0) {
      fs.writeFileSync(TARGET, deriveDeployEnvoy(fs.readFileSync(SOURCE, 'utf8')));
    } else {
      process.stderr.write('usage: derive-deploy-envoy.js [--stdout [FILE]]\n');
      process.exitCode = 2;
    }
  } catch (error) {
    process.stderr.write(`derive-deploy-envoy: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  }
}

module.exports = { deriveDeployEnvoy };
