import { readFile } from 'node:fs/promises';
import { Command } from 'commander';
import { parseAllDocuments } from 'yaml';
import { compileDocuments, type CompileError } from '@kars/policy-compiler';
import { describeYamlError } from '../lib/yaml-errors.js';

/** Where `kars compile` reads and writes. Defaults to the process; tests pass their own. */
export interface CompileIo {
  readFile(path: string): Promise<string>;
  readStdin(): Promise<string>;
  stdout(text: string): void;
  stderr(text: string): void;
  /** The current time (RFC 3339). */
  now(): string;
  /** The controller environment to assume (`EGRESS_APPROVAL_MAX_TTL_SECONDS`). */
  env(): Readonly<Record<string, string | undefined>>;
  setExitCode(code: number): void;
}

async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  return Buffer.concat(chunks).toString('utf8');
}

const processIo: CompileIo = {
  readFile: (p) => readFile(p, 'utf8'),
  readStdin: () => readAll(process.stdin),
  stdout: (t) => process.stdout.write(t),
  stderr: (t) => process.stderr.write(t),
  now: () => new Date().toISOString(),
  env: () => process.env,
  setExitCode: (c) => {
    process.exitCode = c;
  },
};

interface CompileFlags {
  filename: string[];
  namespace: string;
  now?: string;
}

/** Where one parsed document came from, for error messages: `policies.yaml doc 2`. */
interface Source {
  file: string;
  doc: number;
}

function where(s: Source | undefined): string {
  if (s === undefined) return '(options)';
  return `${s.file === '-' ? '<stdin>' : s.file} doc ${s.doc}`;
}

function describeError(e: CompileError, sources: readonly Source[]): string {
  if (e.index < 0) return `error: --${e.field}: ${e.message}`;
  const what = e.kind === '' ? '' : ` ${e.kind} ${e.namespace}/${e.name || '(unnamed)'}`;
  const field = e.field === '' ? '' : ` ${e.field}:`;
  return `error: ${where(sources[e.index])}:${what}:${field} ${e.message} (${e.reason})`;
}

/**
 * `kars compile -f FILE [-f FILE...]`: compile kars policies offline into the ConfigMaps and digests the
 * controller would write, printed as JSON `{configMaps, digests}`. No cluster, no kubeconfig.
 *
 * Any invalid document fails the whole run: every problem goes to stderr (file, document, kind,
 * name, field), nothing goes to stdout, and the exit code is 1.
 */
export function compileCommand(io: CompileIo = processIo): Command {
  return new Command('compile')
    .description('compile kars policies offline into the ConfigMaps and digests the controller would write (JSON on stdout)')
    .requiredOption(
      '-f, --filename <file>',
      'YAML file with one or more documents; "-" reads stdin; repeatable',
      (v: string, prev: string[] | undefined) => [...(prev ?? []), v],
    )
    .option('-n, --namespace <namespace>', 'namespace of documents that do not set metadata.namespace', 'default')
    .option('--now <rfc3339>', 'compile as of this time (EgressApproval effectiveAt and expiry); default: the current time')
    .addHelpText(
      'after',
      '\nEgressApproval TTLs are checked against EGRESS_APPROVAL_MAX_TTL_SECONDS from this environment (default 24h, at most 7d), as the controller would.',
    )
    .action(async (flags: CompileFlags) => {
      const docs: unknown[] = [];
      const sources: Source[] = [];
      const problems: string[] = [];
      let stdinText: string | undefined;
      for (const file of flags.filename) {
        let text: string;
        try {
          if (file === '-') text = stdinText ??= await io.readStdin();
          else text = await io.readFile(file);
        } catch (e) {
          problems.push(`error: ${file}: cannot read: ${e instanceof Error ? e.message : String(e)}`);
          continue;
        }
        parseAllDocuments(text).forEach((d, i) => {
          const source = { file, doc: i + 1 };
          const err = d.errors[0];
          if (err !== undefined) {
            problems.push(`error: ${where(source)}: invalid YAML ${describeYamlError(err)}`);
            return;
          }
          let value: unknown;
          try {
            value = d.toJS();
          } catch (e) {
            problems.push(`error: ${where(source)}: invalid YAML: ${e instanceof Error ? e.message : String(e)}`);
            return;
          }
          docs.push(value);
          sources.push(source);
        });
      }

      const result = compileDocuments(docs, { now: flags.now ?? io.now(), env: io.env(), namespace: flags.namespace });
      for (const e of result.errors) problems.push(describeError(e, sources));
      for (const w of result.warnings)
        io.stderr(`warning: ${where(sources[w.index])}: ${w.kind || 'document'} ${w.namespace}/${w.name || '(unnamed)'}: ${w.message}\n`);
      if (problems.length > 0) {
        io.stderr(problems.join('\n') + '\n');
        io.setExitCode(1);
        return;
      }
      io.stdout(JSON.stringify({ configMaps: result.configMaps, digests: result.digests }, null, 2) + '\n');
    });
}
