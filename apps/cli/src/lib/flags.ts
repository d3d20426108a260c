/** Small commander helpers shared by the policy commands. */
import { Option } from 'commander';
import type { Command } from 'commander';
import { CliError } from './output.js';

/** Collect a repeatable option into an array. */
export function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

/**
 * A whole-number flag: decimal digits become a number; anything else is passed through as given, so policy-api's
 * validation names it with the controller's message (`must be a non-negative integer, got abc`).
 */
export function wholeNumber(value: string): number | string {
  return /^\d{1,15}$/.test(value) ? Number(value) : value;
}

/** Parse repeated `k=v` flags into a map; a flag without `=` is an error naming it. */
export function labels(values: string[] | undefined, flag: string): Record<string, string> | undefined {
  if (values === undefined) return undefined;
  const out: Record<string, string> = {};
  for (const v of values) {
    const i = v.indexOf('=');
    if (i <= 0) throw new Error(`${flag} "${v}" must be key=value`);
    out[v.slice(0, i)] = v.slice(i + 1);
  }
  return out;
}

/** The flags of a command that reads an object from a file: `-f, --filename`, and the old `--from-file`. */
export interface FilenameFlags {
  filename?: string;
  fromFile?: string;
}

/**
 * Add `-f, --filename <file>` (kubectl's and `kars compile`'s name) and the old `--from-file <file>`, hidden from the
 * help but still accepted, so scripts written against it keep working.
 */
export function addFilenameOption(cmd: Command, help: string): Command {
  return cmd.option('-f, --filename <file>', help).addOption(new Option('--from-file <file>', 'deprecated: use -f, --filename').hideHelp());
}

/**
 * The file given with `-f/--filename` or `--from-file` (undefined when neither). `--from-file` prints a deprecation
 * warning on stderr; both at once is an error naming them.
 */
export function filenameOf(f: FilenameFlags): string | undefined {
  if (f.fromFile === undefined) return f.filename;
  if (f.filename !== undefined) throw new CliError('pass the file once: -f/--filename and --from-file are the same flag');
  process.stderr.write('warning: --from-file is deprecated; use -f, --filename\n');
  return f.fromFile;
}
