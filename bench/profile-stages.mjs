#!/usr/bin/env node
// Where does kars apiserver spend its time per write? Aggregates V8 `--cpu-prof` profiles
// (.cpuprofile files) into INCLUSIVE time per request stage: each sample is charged to the
// innermost frame on its stack that opens a stage (e.g. a JSON.parse inside readBody counts as
// "body read + JSON.parse", a clone inside trackUpdate as "managedFields"), so a stage's figure is
// the whole subtree under its entry functions, minus nested stages. Samples of module loading are
// "startup"; idle samples are left out. Only the window from the first to the last sample with the
// HTTP handler on the stack counts (so key generation at start and the idle tail do not), unless --all.
// --skip-ms N drops the first N ms of that window (e.g. the JIT warm-up), --take-ms N keeps N ms.
//
//   node bench/profile-stages.mjs /tmp/prof-storage/*.cpuprofile [--ops N] [--top 12] [--json]
//
// With --ops N (writes served while profiling, e.g. 4,201 for one phase-0 server: namespace +
// 200 warm-up + 2,000 creates + 2,000 updates) the table also gives µs per write. Without it, only
// ms and shares. --top N lists, per stage, the N functions with the most self time inside it.
// --stage NAME prints the call paths (innermost 6 frames) that carry most of that stage's time.
// Profiles are wall-clock samples of the main thread: on a loaded machine, time the thread spent
// descheduled lands on whatever was on the stack. Compare shares, and compare runs at similar load.
import { readFileSync } from 'node:fs';

/**
 * Stage rules, tried from the innermost frame outwards; the first frame that matches any rule
 * decides the stage. `fn` matches the function name exactly (string) or by RegExp; `url` is a
 * RegExp on the script URL. Order within the list only matters for a frame matching two rules.
 */
const RULES = [
  // kars apiserver and its libraries
  { stage: 'authn/authz', url: /apiserver\/dist\/auth\// },
  {
    stage: 'routing + negotiation',
    fn: /^(parseRoute|requireJsonAcceptable|lookup|handleObject|manager|fieldValidation|writeOpts|writeHeadersFor|warningHeaders)$/,
    url: /apiserver\/dist\/(http|registry)\//,
  },
  {
    stage: 'routing + negotiation',
    fn: /^(URL|URLSearchParams|parse|get|getAll|#updateSearchParams|toString|searchParams)$/,
    url: /node:internal\/url/,
  },
  { stage: 'body read + JSON.parse', fn: /^(readBody|decodeBody|decodeWriteBody|checkJsonDepth|readJson)$/ },
  { stage: 'body read + JSON.parse', url: /kube-core\/dist\/body/ },
  { stage: 'admission (validate, prune, schema)', url: /apiserver\/dist\/(admission|kinds\/)/ },
  { stage: 'admission (validate, prune, schema)', url: /kube-schema\/dist\// },
  { stage: 'admission (validate, prune, schema)', fn: 'validateMeta' },
  {
    stage: 'defaulting + strategy',
    fn: /^(coerceBody|shapeCauses|finalizeForCreate|finalizeForUpdate|bumpGeneration|sameIgnoringManagedTimes|checkPreconditions|ownerUids|randomUUID|randomSuffix|requireNamespace|fieldOptions)$/,
  },
  { stage: 'managedFields (trackUpdate/SSA)', url: /kube-patch\/dist\// },
  { stage: 'encode object (JSON.stringify at stage)', fn: 'render', url: /apiserver\/dist\/service\.js/ },
  { stage: 'storage: stage rows (SQLite)', fn: /^(stage|inSavepoint|sp|openBatch)$/, url: /storage\/store\.js|better-sqlite3/ },
  { stage: 'storage: read (SQLite get)', fn: 'get', url: /storage\/store\.js/ },
  {
    stage: 'storage: commit + WAL sync',
    fn: /^(flush|commitBatch|drainSync|afterSync|settleBatch|syncDone|startSync|checkpointIfLarge|maybeCheckpoint|pinReader|unpinReader|publishBatch)$/,
    url: /storage\/store\.js/,
  },
  { stage: 'storage: commit + WAL sync', url: /storage\/store\.js/ },
  { stage: 'watch cache + after-commit', url: /apiserver\/dist\/(watch\/|lifecycle)/ },
  { stage: 'watch cache + after-commit', fn: /^(afterCommit|syncCrd|publish)$/ },
  {
    stage: 'response (sendJson, writeHead, end)',
    fn: /^(sendJson|writeHead|end|_implicitHeader|_storeHeader|_send|_writeRaw|write_|_finish|processHeader)$/,
    url: /apiserver\/dist\/http\/compat|node:_http_outgoing|node:_http_server/,
  },
  { stage: 'logging', url: /pino|apiserver\/dist\/server\.js.*log/ },
  // whatever of the service's write path is not one of the stages above
  { stage: 'object service glue', url: /apiserver\/dist\/service\.js/ },
  { stage: 'handler glue (async, await)', url: /apiserver\/dist\/http\/handler\.js/ },
  // Node's HTTP/1.1 and TLS machinery, when no kars stage is on the stack
  { stage: 'HTTP parse (node:_http_*)', url: /node:_http_(server|common|incoming)/ },
  { stage: 'TLS + socket I/O', url: /node:(_tls_wrap|tls|net|internal\/stream_base_commons|internal\/streams|stream|internal\/tls)/ },
];

const STARTUP = /node:internal\/modules\/|node:internal\/main\/|node:internal\/bootstrap|\/apps\/cli\/bin\//;
const SPECIAL = {
  '(garbage collector)': 'GC',
  '(program)': '(program): native, unattributed',
  '(idle)': '(idle)',
  '(root)': '(idle)',
};

function matches(rule, frame) {
  if (rule.fn !== undefined) {
    if (typeof rule.fn === 'string' ? frame.functionName !== rule.fn : !rule.fn.test(frame.functionName)) return false;
  }
  if (rule.url !== undefined && !rule.url.test(frame.url)) return false;
  return true;
}

function ruleStage(frame) {
  for (const r of RULES) if (matches(r, frame)) return r.stage;
  return undefined;
}

/** Aggregate one profile into `acc`. */
function addProfile(prof, acc) {
  const nodes = new Map(prof.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of prof.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const stageOf = new Map();
  const classify = (id) => {
    const hit = stageOf.get(id);
    if (hit) return hit;
    const n = nodes.get(id);
    let stage = Object.hasOwn(SPECIAL, n.callFrame.functionName) ? SPECIAL[n.callFrame.functionName] : undefined;
    if (!stage) {
      const chain = [];
      for (let cur = id; cur !== undefined; cur = parent.get(cur)) chain.push(nodes.get(cur).callFrame);
      if (chain.some((f) => STARTUP.test(f.url))) stage = 'startup (module load)';
      else {
        for (const f of chain) {
          stage = ruleStage(f);
          if (stage) break;
        }
        if (!stage) stage = chain.some((f) => /\/kars|packages\//.test(f.url)) ? 'other kars' : 'other node (timers, microtasks, native)';
      }
    }
    stageOf.set(id, stage);
    return stage;
  };
  const { samples, timeDeltas } = prof;
  // The window: from the first to the last sample with the HTTP handler on its stack (what comes
  // before is startup: key generation, bootstrap; after is idle until SIGTERM). --all: everything.
  const inHandler = new Map();
  const handles = (id) => {
    let v = inHandler.get(id);
    if (v === undefined) {
      v = false;
      for (let cur = id; cur !== undefined; cur = parent.get(cur))
        if (/apiserver\/dist\/http\/handler\.js/.test(nodes.get(cur).callFrame.url)) v = true;
      inHandler.set(id, v);
    }
    return v;
  };
  let first = 0;
  let last = samples.length - 1;
  if (!acc.all) {
    while (first < samples.length && !handles(samples[first])) first++;
    while (last > first && !handles(samples[last])) last--;
  }
  if (acc.skipMs > 0) {
    for (let t = 0; first < last && t < acc.skipMs * 1000; first++) t += timeDeltas[first + 1] ?? 0;
  }
  if (acc.takeMs > 0) {
    let t = 0;
    let end = first;
    for (; end < last && t < acc.takeMs * 1000; end++) t += timeDeltas[end + 1] ?? 0;
    last = end;
  }
  let windowUs = 0;
  for (let i = first; i <= last; i++) windowUs += timeDeltas[i + 1] ?? 0;
  acc.windowUs += windowUs;
  for (let i = first; i <= last; i++) {
    // timeDeltas[i] is the gap before sample i; the sample stands for the gap after it.
    const us = timeDeltas[i + 1] ?? timeDeltas[i] ?? 0;
    const id = samples[i];
    const stage = classify(id);
    acc.stages.set(stage, (acc.stages.get(stage) ?? 0) + us);
    const f = nodes.get(id).callFrame;
    const key = `${stage}\u0000${f.functionName || '(anonymous)'} ${shortUrl(f.url)}:${f.lineNumber + 1}`;
    acc.self.set(key, (acc.self.get(key) ?? 0) + us);
    if (acc.pathStage && stage === acc.pathStage) {
      const path = [];
      for (let cur = id; cur !== undefined && path.length < 6; cur = parent.get(cur)) {
        const cf = nodes.get(cur).callFrame;
        path.push(`${cf.functionName || '(anon)'}@${shortUrl(cf.url).split('/').pop()}`);
      }
      const p = path.join(' < ');
      acc.paths.set(p, (acc.paths.get(p) ?? 0) + us);
    }
  }
}

function shortUrl(u) {
  return u.replace(/^file:\/\/.*?\/(packages|node_modules)\//, '$1/');
}

function main() {
  const args = process.argv.slice(2);
  const files = [];
  let ops;
  let top = 0;
  let json = false;
  let pathStage;
  let all = false;
  let skipMs = 0;
  let takeMs = 0;
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === '--ops') ops = Number(args[++i]);
    else if (a === '--top') top = Number(args[++i]);
    else if (a === '--json') json = true;
    else if (a === '--stage') pathStage = args[++i];
    else if (a === '--all') all = true;
    else if (a === '--skip-ms') skipMs = Number(args[++i]);
    else if (a === '--take-ms') takeMs = Number(args[++i]);
    else files.push(a);
  }
  if (files.length === 0) {
    process.stderr.write('usage: node bench/profile-stages.mjs <file.cpuprofile>... [--ops N] [--top N] [--stage NAME] [--json]\n');
    process.exit(2);
  }
  const acc = { stages: new Map(), self: new Map(), paths: new Map(), pathStage, all, windowUs: 0, skipMs, takeMs };
  for (const f of files) addProfile(JSON.parse(readFileSync(f, 'utf8')), acc);
  const busy = [...acc.stages].filter(([s]) => s !== '(idle)' && s !== 'startup (module load)').reduce((t, [, us]) => t + us, 0);
  const rows = [...acc.stages].sort((a, b) => b[1] - a[1]);
  if (json) {
    process.stdout.write(`${JSON.stringify({ files, ops, busyUs: busy, stages: Object.fromEntries(rows) }, null, 2)}\n`);
    return;
  }
  const perOps = ops ? files.length * ops : undefined;
  const lines = [
    `${files.length} profile(s); window ${(acc.windowUs / 1000).toFixed(0)} ms${all ? ' (whole profile)' : ' (first to last request)'}; busy (not idle, not startup): ${(busy / 1000).toFixed(0)} ms` +
      (perOps ? ` = ${(busy / perOps).toFixed(0)} µs per write over ${perOps} writes` : ''),
    '',
    `| stage | ms | share of busy |${perOps ? ' µs per write |' : ''}`,
    `|---|---|---|${perOps ? '---|' : ''}`,
  ];
  for (const [s, us] of rows) {
    const share = s === '(idle)' || s === 'startup (module load)' ? '–' : `${((100 * us) / busy).toFixed(1)}%`;
    lines.push(`| ${s} | ${(us / 1000).toFixed(0)} | ${share} |${perOps ? ` ${(us / perOps).toFixed(1)} |` : ''}`);
  }
  if (top > 0) {
    for (const [s] of rows) {
      if (s === '(idle)' || s === 'startup (module load)') continue;
      const fns = [...acc.self]
        .filter(([k]) => k.startsWith(`${s}\u0000`))
        .sort((a, b) => b[1] - a[1])
        .slice(0, top);
      lines.push('', `**${s}**, self time:`);
      for (const [k, us] of fns) lines.push(`- ${(us / 1000).toFixed(0)} ms ${k.split('\u0000')[1]}`);
    }
  }
  if (pathStage) {
    lines.push('', `**${pathStage}**, heaviest call paths (innermost first):`);
    for (const [p, us] of [...acc.paths].sort((a, b) => b[1] - a[1]).slice(0, 25)) lines.push(`- ${(us / 1000).toFixed(0)} ms ${p}`);
  }
  process.stdout.write(`${lines.join('\n')}\n`);
}

main();
