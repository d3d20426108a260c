// Generates packages/apiserver/src/kinds/generated.ts: the protobuf messages and the
// OpenAPI definitions of the built-in kinds kars apiserver serves, derived from Kubernetes' own
// sources (see packages/apiserver/src/kinds/README.md and docs/adr for why and how).
//
// Usage:  node scripts/gen-kube-schema.mjs <kubernetes/api checkout> <kubernetes/apimachinery checkout>
//   Each argument is a git directory (bare or not); files are read from its HEAD with `git show`.
//   Both repositories are Apache-2.0. To serve a new built-in kind, add its message to ROOTS and rerun.
//
// What it reads, per package:
//   generated.proto  message names, field numbers, proto types, labels, doc comments (descriptions)
//   types.go         for each field number: the JSON name (and `inline`), whether the Go field is a
//                    pointer (so an explicit zero must be kept), omitempty, patchStrategy/patchMergeKey
// What it writes:
//   PROTO_FILES      one proto2 text per package, only the messages reachable from ROOTS, each field
//                    annotated with [(kars.json) = "...", (kars.ptr) = true, (kars.inline) = true]
//   DEFINITIONS      OpenAPI v2 definitions (io.k8s.api.core.v1.ConfigMap, ...) for the same messages,
//                    with descriptions and x-kubernetes-group-version-kind on the root kinds
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';

const [apiRepo, machineryRepo] = process.argv.slice(2);
if (!apiRepo || !machineryRepo) {
  console.error('usage: node scripts/gen-kube-schema.mjs <kubernetes/api git dir> <kubernetes/apimachinery git dir>');
  process.exit(2);
}

/** Proto package → where its generated.proto and Go files are, and its OpenAPI definition prefix. */
const PACKAGES = {
  'k8s.io.api.core.v1': { repo: apiRepo, dir: 'core/v1', go: ['types.go'], defPrefix: 'io.k8s.api.core.v1', gv: ['', 'v1'] },
  'k8s.io.api.apps.v1': { repo: apiRepo, dir: 'apps/v1', go: ['types.go'], defPrefix: 'io.k8s.api.apps.v1', gv: ['apps', 'v1'] },
  'k8s.io.api.rbac.v1': {
    repo: apiRepo,
    dir: 'rbac/v1',
    go: ['types.go'],
    defPrefix: 'io.k8s.api.rbac.v1',
    gv: ['rbac.authorization.k8s.io', 'v1'],
  },
  'k8s.io.api.coordination.v1': {
    repo: apiRepo,
    dir: 'coordination/v1',
    go: ['types.go'],
    defPrefix: 'io.k8s.api.coordination.v1',
    gv: ['coordination.k8s.io', 'v1'],
  },
  'k8s.io.api.authentication.v1': {
    repo: apiRepo,
    dir: 'authentication/v1',
    go: ['types.go'],
    defPrefix: 'io.k8s.api.authentication.v1',
    gv: ['authentication.k8s.io', 'v1'],
  },
  'k8s.io.api.authorization.v1': {
    repo: apiRepo,
    dir: 'authorization/v1',
    go: ['types.go'],
    defPrefix: 'io.k8s.api.authorization.v1',
    gv: ['authorization.k8s.io', 'v1'],
  },
  'k8s.io.apimachinery.pkg.apis.meta.v1': {
    repo: machineryRepo,
    dir: 'pkg/apis/meta/v1',
    go: ['types.go'],
    defPrefix: 'io.k8s.apimachinery.pkg.apis.meta.v1',
    gv: null,
  },
  'k8s.io.apimachinery.pkg.runtime': {
    repo: machineryRepo,
    dir: 'pkg/runtime',
    go: ['types.go'],
    defPrefix: 'io.k8s.apimachinery.pkg.runtime',
    gv: null,
  },
  'k8s.io.apimachinery.pkg.api.resource': {
    repo: machineryRepo,
    dir: 'pkg/api/resource',
    go: [],
    defPrefix: 'io.k8s.apimachinery.pkg.api.resource',
    gv: null,
  },
  'k8s.io.apimachinery.pkg.util.intstr': {
    repo: machineryRepo,
    dir: 'pkg/util/intstr',
    go: [],
    defPrefix: 'io.k8s.apimachinery.pkg.util.intstr',
    gv: null,
  },
};

/** The kinds whose request bodies are decoded (and whose schemas are published), plus the envelope. */
const ROOTS = [
  'k8s.io.api.core.v1.Namespace',
  'k8s.io.api.core.v1.ConfigMap',
  'k8s.io.api.core.v1.Secret',
  'k8s.io.api.core.v1.Event',
  'k8s.io.api.core.v1.ServiceAccount',
  'k8s.io.api.core.v1.Service',
  'k8s.io.api.apps.v1.Deployment',
  'k8s.io.api.coordination.v1.Lease',
  'k8s.io.api.rbac.v1.Role',
  'k8s.io.api.rbac.v1.RoleBinding',
  'k8s.io.api.rbac.v1.ClusterRole',
  'k8s.io.api.rbac.v1.ClusterRoleBinding',
  'k8s.io.api.authentication.v1.TokenRequest',
  'k8s.io.api.authentication.v1.SelfSubjectReview',
  'k8s.io.api.authorization.v1.SelfSubjectAccessReview',
  'k8s.io.api.authorization.v1.SelfSubjectRulesReview',
  'k8s.io.api.authorization.v1.SubjectAccessReview',
  'k8s.io.api.authorization.v1.LocalSubjectAccessReview',
  'k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions',
  'k8s.io.apimachinery.pkg.runtime.Unknown',
];

/**
 * Messages whose JSON form is not their proto form (custom Marshal/UnmarshalJSON in Go):
 * how the decoder turns them into JSON, and the OpenAPI schema kube-apiserver publishes for them.
 */
const SPECIAL = {
  'k8s.io.apimachinery.pkg.apis.meta.v1.Time': {
    json: 'time',
    schema: {
      type: 'string',
      format: 'date-time',
      description:
        'Time is a wrapper around time.Time which supports correct marshaling to YAML and JSON.  Wrappers are provided for many of the factory methods that the time package offers.',
    },
  },
  'k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime': {
    json: 'microtime',
    schema: { type: 'string', format: 'date-time', description: 'MicroTime is version of Time with microsecond level precision.' },
  },
  'k8s.io.apimachinery.pkg.apis.meta.v1.Duration': {
    json: 'duration',
    schema: {
      type: 'string',
      description: 'Duration is a wrapper around time.Duration which supports correct marshaling to YAML and JSON.',
    },
  },
  'k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1': {
    json: 'rawjson',
    schema: { type: 'object', description: 'FieldsV1 stores a set of fields in a data structure like a Trie, in JSON format.' },
  },
  'k8s.io.apimachinery.pkg.runtime.RawExtension': {
    json: 'rawjson',
    schema: { type: 'object', description: 'RawExtension is used to hold extensions in external versions.' },
  },
  'k8s.io.apimachinery.pkg.api.resource.Quantity': {
    json: 'quantity',
    schema: {
      type: 'string',
      description: 'Quantity is a fixed-point representation of a number, serialized as a string such as "100m", "1Gi" or "0.5".',
    },
  },
  'k8s.io.apimachinery.pkg.util.intstr.IntOrString': {
    json: 'intorstring',
    schema: {
      type: 'string',
      format: 'int-or-string',
      'x-kubernetes-int-or-string': true,
      description: 'IntOrString is a type that can hold an int32 or a string.',
    },
  },
};

const SCALARS = new Set([
  'string',
  'bool',
  'bytes',
  'int32',
  'int64',
  'uint32',
  'uint64',
  'double',
  'float',
  'sint32',
  'sint64',
  'fixed32',
  'fixed64',
]);

function show(repo, path) {
  return execFileSync('git', ['--git-dir', repo, 'show', `HEAD:${path}`], { encoding: 'utf8', maxBuffer: 64 << 20 });
}

function gitDir(repo) {
  try {
    return execFileSync('git', ['-C', repo, 'rev-parse', '--git-dir'], { encoding: 'utf8' })
      .trim()
      .replace(/^(?!\/)/, `${repo}/`);
  } catch {
    return repo;
  }
}

function commitOf(repo) {
  return execFileSync('git', ['--git-dir', repo, 'rev-parse', 'HEAD'], { encoding: 'utf8' }).trim();
}

/** Parse a generated.proto: messages with doc comments and fields. */
function parseProto(text, pkg) {
  const messages = new Map();
  const lines = text.split('\n');
  let comment = [];
  let cur = null;
  for (const raw of lines) {
    const line = raw.trim();
    if (line.startsWith('//')) {
      comment.push(line.replace(/^\/\/ ?/, ''));
      continue;
    }
    let m;
    if ((m = /^message (\w+) \{$/.exec(line))) {
      cur = { name: m[1], fqn: `${pkg}.${m[1]}`, doc: comment.join('\n'), fields: [] };
      messages.set(cur.fqn, cur);
    } else if (cur && (m = /^(optional|repeated) ([.\w]+) (\w+) = (\d+);$/.exec(line))) {
      cur.fields.push({ label: m[1], type: resolve(m[2], pkg), name: m[3], number: Number(m[4]), doc: comment.join('\n') });
    } else if (cur && (m = /^map<(\w+), ([.\w]+)> (\w+) = (\d+);$/.exec(line))) {
      cur.fields.push({ label: 'map', keyType: m[1], type: resolve(m[2], pkg), name: m[3], number: Number(m[4]), doc: comment.join('\n') });
    } else if (line === '}') {
      cur = null;
    } else if (cur && line !== '') {
      throw new Error(`unparsed line in ${pkg}: ${line}`);
    }
    comment = [];
  }
  return messages;
}

function resolve(type, pkg) {
  if (SCALARS.has(type)) return type;
  if (type.startsWith('.')) return type.slice(1);
  return `${pkg}.${type}`;
}

/** Parse Go struct fields with protobuf tags: struct name → field number → facts. */
function parseGo(text) {
  const structs = new Map();
  let cur = null;
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    let m;
    if ((m = /^type (\w+) struct \{$/.exec(line))) {
      cur = new Map();
      structs.set(m[1], cur);
      continue;
    }
    if (line === '}') {
      cur = null;
      continue;
    }
    if (!cur || line.startsWith('//')) continue;
    m = /^(\w+)?\s*(\S+)\s+`(.*)`$/.exec(line);
    if (!m) continue;
    const goType = m[1] ? m[2] : m[2];
    const tags = Object.fromEntries([...m[3].matchAll(/(\w+):"([^"]*)"/g)].map((t) => [t[1], t[2]]));
    if (!tags.protobuf) continue;
    const num = Number(tags.protobuf.split(',')[1]);
    const protoName = /name=(\w+)/.exec(tags.protobuf)?.[1] ?? '';
    const json = (tags.json ?? protoName).split(',');
    cur.set(num, {
      jsonName: json[0] ?? '',
      omitempty: json.includes('omitempty'),
      pointer: goType.startsWith('*'),
      patchStrategy: tags.patchStrategy,
      patchMergeKey: tags.patchMergeKey,
    });
  }
  return structs;
}

const all = new Map();
const goFacts = new Map();
const commits = { api: commitOf(gitDir(apiRepo)), apimachinery: commitOf(gitDir(machineryRepo)) };
for (const [pkg, p] of Object.entries(PACKAGES)) {
  p.repo = gitDir(p.repo);
  for (const [k, v] of parseProto(show(p.repo, `${p.dir}/generated.proto`), pkg)) all.set(k, v);
  const structs = new Map();
  for (const f of p.go) for (const [k, v] of parseGo(show(p.repo, `${p.dir}/${f}`))) structs.set(k, v);
  goFacts.set(pkg, structs);
}

// The transitive closure of ROOTS.
const needed = new Set();
const queue = [...ROOTS];
while (queue.length > 0) {
  const fqn = queue.pop();
  if (needed.has(fqn)) continue;
  const msg = all.get(fqn);
  if (!msg) throw new Error(`message ${fqn} not found`);
  needed.add(fqn);
  if (SPECIAL[fqn]) continue;
  for (const f of msg.fields) if (!SCALARS.has(f.type)) queue.push(f.type);
}

function pkgOf(fqn) {
  return fqn.slice(0, fqn.lastIndexOf('.'));
}

/** A Go named slice (`type ExtraValue []string`): proto wraps it as `repeated T items = 1`, JSON is the bare array. */
function isNamedSlice(msg) {
  const st = goFacts.get(pkgOf(msg.fqn))?.get(msg.name);
  return !st && msg.fields.length === 1 && msg.fields[0].name === 'items' && msg.fields[0].label === 'repeated';
}

function factsOf(msg, field) {
  const pkg = pkgOf(msg.fqn);
  const st = goFacts.get(pkg)?.get(msg.name);
  const f = st?.get(field.number);
  if (f) return f;
  if (SPECIAL[msg.fqn] || isNamedSlice(msg) || pkg === 'k8s.io.apimachinery.pkg.runtime')
    return { jsonName: field.name, omitempty: true, pointer: false };
  throw new Error(`no Go field for ${msg.fqn}.${field.name} = ${field.number}`);
}

// --- proto text, one per package ---
const byPkg = new Map();
for (const fqn of [...needed].sort()) {
  const pkg = pkgOf(fqn);
  if (!byPkg.has(pkg)) byPkg.set(pkg, []);
  byPkg.get(pkg).push(all.get(fqn));
}
const protoFiles = [];
for (const [pkg, msgs] of byPkg) {
  const out = [`syntax = "proto2";`, `package ${pkg};`, ''];
  for (const msg of msgs) {
    out.push(`message ${msg.name} {`);
    if (isNamedSlice(msg)) out.push('  option (kars.items) = true;');
    for (const f of [...msg.fields].sort((a, b) => a.number - b.number)) {
      const facts = factsOf(msg, f);
      const opts = [];
      if (facts.jsonName === '') opts.push('(kars.inline) = true');
      else opts.push(`(kars.json) = "${facts.jsonName}"`);
      if (facts.pointer) opts.push('(kars.ptr) = true');
      const type = SCALARS.has(f.type) ? f.type : `.${f.type}`;
      const decl = f.label === 'map' ? `map<${f.keyType}, ${type}>` : `${f.label} ${type}`;
      out.push(`  ${decl} ${f.name} = ${f.number} [${opts.join(', ')}];`);
    }
    out.push('}', '');
  }
  protoFiles.push({ name: `${pkg.replaceAll('.', '/')}/generated.proto`, text: out.join('\n') });
}

// --- OpenAPI v2 definitions ---
function defName(fqn) {
  const pkg = pkgOf(fqn);
  return `${PACKAGES[pkg].defPrefix}.${fqn.slice(pkg.length + 1)}`;
}

function scalarSchema(type) {
  switch (type) {
    case 'string':
      return { type: 'string' };
    case 'bool':
      return { type: 'boolean' };
    case 'bytes':
      return { type: 'string', format: 'byte' };
    case 'int32':
    case 'sint32':
    case 'uint32':
    case 'fixed32':
      return { type: 'integer', format: 'int32' };
    case 'double':
    case 'float':
      return { type: 'number', format: 'double' };
    default:
      return { type: 'integer', format: 'int64' };
  }
}

function typeSchema(type) {
  return SCALARS.has(type) ? scalarSchema(type) : { $ref: `#/definitions/${defName(type)}` };
}

/** Go doc comments become descriptions; drop the +marker lines the way the OpenAPI generator does. */
function description(doc) {
  // Lines of a paragraph are joined with spaces, paragraphs with a blank line, as kube-openapi does.
  const paras = [];
  let cur = [];
  for (const l of doc.split('\n')) {
    if (l.startsWith('+') || l.startsWith('---')) continue;
    if (l.trim() === '') {
      if (cur.length > 0) paras.push(cur.join(' '));
      cur = [];
    } else cur.push(l.trim());
  }
  if (cur.length > 0) paras.push(cur.join(' '));
  return paras.join('\n\n').trim();
}

const rootKinds = new Map(ROOTS.map((fqn) => [fqn, PACKAGES[pkgOf(fqn)].gv]));
const definitions = {};
for (const fqn of [...needed].sort()) {
  const msg = all.get(fqn);
  if (fqn === 'k8s.io.apimachinery.pkg.runtime.Unknown' || fqn === 'k8s.io.apimachinery.pkg.runtime.TypeMeta') continue;
  if (SPECIAL[fqn]) {
    definitions[defName(fqn)] = SPECIAL[fqn].schema;
    continue;
  }
  if (isNamedSlice(msg)) {
    definitions[defName(fqn)] = { type: 'array', items: typeSchema(msg.fields[0].type) };
    continue;
  }
  const schema = { type: 'object', properties: {} };
  const desc = description(msg.doc);
  if (desc) schema.description = desc;
  const required = [];
  const inlined = [];
  for (const f of msg.fields) {
    const facts = factsOf(msg, f);
    if (facts.jsonName === '') {
      inlined.push(f.type);
      continue;
    }
    let s;
    if (f.label === 'map') s = { type: 'object', additionalProperties: typeSchema(f.type) };
    else if (f.label === 'repeated') s = { type: 'array', items: typeSchema(f.type) };
    else s = typeSchema(f.type);
    const d = description(f.doc);
    if (d) s = s.$ref ? { ...s, description: d } : { ...s, description: d };
    if (facts.patchStrategy) s['x-kubernetes-patch-strategy'] = facts.patchStrategy;
    if (facts.patchMergeKey) s['x-kubernetes-patch-merge-key'] = facts.patchMergeKey;
    if (!facts.omitempty && !facts.pointer && !f.doc.includes('+optional') && f.label !== 'map') required.push(facts.jsonName);
    schema.properties[facts.jsonName] = s;
  }
  // Inlined structs (VolumeSource in Volume, ...) contribute their properties directly.
  for (const t of inlined) {
    const inner = all.get(t);
    if (!inner) throw new Error(`inline ${t} in ${fqn} not found`);
    for (const f of inner.fields) {
      const facts = factsOf(inner, f);
      let s =
        f.label === 'map'
          ? { type: 'object', additionalProperties: typeSchema(f.type) }
          : f.label === 'repeated'
            ? { type: 'array', items: typeSchema(f.type) }
            : typeSchema(f.type);
      const d = description(f.doc);
      if (d) s = { ...s, description: d };
      schema.properties[facts.jsonName] = s;
    }
  }
  if (required.length > 0) schema.required = required;
  const gv = rootKinds.get(fqn);
  if (gv) {
    schema['x-kubernetes-group-version-kind'] = [{ group: gv[0], kind: msg.name, version: gv[1] }];
    schema.properties.apiVersion = {
      type: 'string',
      description:
        'APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources',
    };
    schema.properties.kind = {
      type: 'string',
      description:
        'Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds',
    };
  }
  definitions[defName(fqn)] = schema;
}

const rootIndex = ROOTS.filter((r) => rootKinds.get(r)).map((fqn) => ({
  group: rootKinds.get(fqn)[0],
  version: rootKinds.get(fqn)[1],
  kind: all.get(fqn).name,
  message: fqn,
  definition: defName(fqn),
}));

const header = `// GENERATED by scripts/gen-kube-schema.mjs from kubernetes/api@${commits.api} and
// kubernetes/apimachinery@${commits.apimachinery} (Apache-2.0). Do not edit; rerun the script.
`;
const ts = `${header}
/** A built-in kind with a protobuf message and an OpenAPI definition. */
export interface BuiltinKind {
  group: string;
  version: string;
  kind: string;
  /** Fully qualified protobuf message name. */
  message: string;
  /** OpenAPI v2 definition name (also the v3 component schema name). */
  definition: string;
}

/** The kinds, by group/version/kind. */
export const BUILTIN_KINDS: readonly BuiltinKind[] = ${JSON.stringify(rootIndex, null, 2)};

/** proto2 definitions, one file per Kubernetes package, annotated with kars.json / kars.ptr / kars.inline. */
export const PROTO_FILES: readonly { name: string; text: string }[] = [
${protoFiles
  .map((f) => {
    if (f.text.includes('`') || f.text.includes('${')) throw new Error('proto text cannot be a template literal');
    return `  {\n    name: ${JSON.stringify(f.name)},\n    text: String.raw\`\n${f.text}\`,\n  },`;
  })
  .join('\n')}
];

/** OpenAPI v2 definitions of the built-in kinds and everything they reference. */
export const DEFINITIONS: Readonly<Record<string, Record<string, unknown>>> = ${JSON.stringify(definitions, null, 1)};
`;
const out = 'packages/apiserver/src/kinds/generated.ts';
writeFileSync(out, ts);
console.log(`wrote ${out}: ${needed.size} messages, ${protoFiles.length} packages, ${ts.length} bytes`);
