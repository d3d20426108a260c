// Captures the request bodies real kubectl binaries send for `kubectl create <kind>`, as golden
// fixtures for packages/apiserver/src/protobuf/codec.test.ts:
//   <name>.<version>.pb   the protobuf body kubectl 1.32 / 1.33 sends (from its -v=9 hex dump)
//   <name>.json           the JSON body kubectl 1.31 sends for the same command
// Usage: KUBECONFIG=<kubeconfig of a running kars apiserver> node scripts/capture-protobuf-fixtures.mjs
// Every command runs with --dry-run=server, so nothing is stored.
import { execFileSync } from 'node:child_process';
import { mkdirSync, realpathSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

const dir = dirname(realpathSync(execFileSync('sh', ['-c', 'command -v kubectl'], { encoding: 'utf8' }).trim()));
const out = 'packages/apiserver/src/protobuf/testdata';
mkdirSync(out, { recursive: true });
const binFile = join(out, 'binary.bin');
writeFileSync(binFile, Buffer.from([0, 1, 2, 0xfe, 0xff]));

const COMMANDS = {
  configmap: ['create', 'configmap', 'cm', '--from-literal=a=b', '--from-literal=empty=', `--from-file=bin=${binFile}`],
  'secret-generic': ['create', 'secret', 'generic', 's', '--from-literal=password=hunter2', '--type=Opaque'],
  'secret-docker-registry': [
    'create',
    'secret',
    'docker-registry',
    'reg',
    '--docker-server=r.example',
    '--docker-username=u',
    '--docker-password=p',
  ],
  namespace: ['create', 'namespace', 'ns1'],
  serviceaccount: ['create', 'serviceaccount', 'sa1'],
  deployment: ['create', 'deployment', 'web', '--image=nginx:1.27', '--replicas=0', '--port=8080', '--', 'sleep', '3600'],
  'service-clusterip': ['create', 'service', 'clusterip', 'svc', '--tcp=80:8080', '--tcp=443:https'],
  'service-nodeport': ['create', 'service', 'nodeport', 'np', '--tcp=80:8080', '--node-port=30080'],
  role: ['create', 'role', 'reader', '--verb=get,list', '--resource=configmaps', '--resource-name=a'],
  rolebinding: ['create', 'rolebinding', 'rb', '--role=reader', '--user=bob', '--group=devs', '--serviceaccount=default:sa1'],
  clusterrole: ['create', 'clusterrole', 'cr', '--verb=get', '--non-resource-url=/healthz'],
  'clusterrole-aggregated': ['create', 'clusterrole', 'agg', '--aggregation-rule=rbac.example.com/aggregate=true'],
  clusterrolebinding: ['create', 'clusterrolebinding', 'crb', '--clusterrole=cr', '--user=bob'],
};

function stderrOf(bin, args) {
  const r = execFileSync('sh', ['-c', `"$0" --dry-run=server -o name -v=9 "$@" 2>&1 >/dev/null; true`, join(dir, bin), ...args], {
    encoding: 'utf8',
  });
  return r;
}

for (const [name, args] of Object.entries(COMMANDS)) {
  const json = /Request Body: (\{.*\})$/m.exec(stderrOf('kubectl.1.31', args));
  if (!json) throw new Error(`${name}: no JSON body from kubectl 1.31`);
  writeFileSync(join(out, `${name}.json`), JSON.stringify(JSON.parse(json[1]), null, 2) + '\n');
  for (const v of ['1.32', '1.33']) {
    const text = stderrOf(`kubectl.${v}`, args);
    const m = /"Request Body" body=<\n((?:\t[0-9a-f]{8} .*\n)+) >/.exec(text);
    if (!m) throw new Error(`${name}: no protobuf body from kubectl ${v}:\n${text}`);
    const bytes = [];
    for (const line of m[1].split('\n')) {
      const hex = line.slice(1 + 8, 1 + 8 + 50);
      for (const h of hex.trim().split(/\s+/)) if (/^[0-9a-f]{2}$/.test(h)) bytes.push(parseInt(h, 16));
    }
    writeFileSync(join(out, `${name}.${v}.pb`), Buffer.from(bytes));
  }
  console.log(`captured ${name}`);
}
