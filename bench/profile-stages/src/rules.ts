/**
 * Which request stage a stack frame opens: the stage rules, the startup pattern and V8's special
 * nodes.
 */

/** A V8 `.cpuprofile` call frame (the fields read here). */
export interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  [k: string]: unknown;
}

/**
 * One stage rule. `fn` matches the function name exactly (string) or by RegExp; `url` is a RegExp
 * on the script URL.
 */
export interface Rule {
  stage: string;
  fn?: string | RegExp;
  url?: RegExp;
}

/**
 * Stage rules, tried from the innermost frame outwards; the first frame that matches any rule
 * decides the stage. `fn` matches the function name exactly (string) or by RegExp; `url` is a
 * RegExp on the script URL. Order within the list only matters for a frame matching two rules.
 */
export const RULES: readonly Rule[] = [
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

/** Frames of module loading and bootstrap: a sample with one on its stack is "startup". */
export const STARTUP = /node:internal\/modules\/|node:internal\/main\/|node:internal\/bootstrap|\/apps\/cli\/bin\//;

/** V8's own nodes, by function name, and the stage each is charged to. */
export const SPECIAL: Readonly<Record<string, string>> = {
  '(garbage collector)': 'GC',
  '(program)': '(program): native, unattributed',
  '(idle)': '(idle)',
  '(root)': '(idle)',
};

function matches(rule: Rule, frame: CallFrame): boolean {
  if (rule.fn !== undefined) {
    if (typeof rule.fn === 'string' ? frame.functionName !== rule.fn : !rule.fn.test(frame.functionName)) return false;
  }
  if (rule.url !== undefined && !rule.url.test(frame.url)) return false;
  return true;
}

/** The stage of the first rule `frame` matches, undefined when none does. */
export function ruleStage(frame: CallFrame): string | undefined {
  for (const r of RULES) if (matches(r, frame)) return r.stage;
  return undefined;
}
