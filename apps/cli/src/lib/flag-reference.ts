import type { Command } from 'commander';

function cell(s: string): string {
  return s.replace(/\|/g, '\\|').replace(/\n/g, ' ');
}

/**
 * The flag reference of every `kars` command, as Markdown tables (one per command, subcommands
 * included), generated from the commander definitions themselves. docs/operating.md embeds it
 * between markers, and a test fails when the two differ, so the doc cannot drift from the code.
 */
export function flagReference(program: Command): string {
  const out: string[] = [];
  const walk = (cmd: Command, path: string): void => {
    const name = path === '' ? cmd.name() : `${path} ${cmd.name()}`;
    if (path !== '') {
      const opts = cmd.options.filter((o) => !o.hidden);
      out.push(`#### \`${name}\``, '', cmd.description(), '');
      if (opts.length === 0) out.push('No flags.', '');
      else {
        out.push('| flag | default | meaning |', '|---|---|---|');
        for (const o of opts) {
          const def = o.defaultValue === undefined ? '' : `\`${String(o.defaultValue)}\``;
          const choices = o.argChoices ? ` (one of ${o.argChoices.map((c) => `\`${c}\``).join(', ')})` : '';
          out.push(`| \`${cell(o.flags)}\` | ${cell(def)} | ${cell(o.description)}${choices} |`);
        }
        out.push('');
      }
    }
    for (const sub of cmd.commands) walk(sub, name);
  };
  walk(program, '');
  return out.join('\n');
}
