/**
 * YAML parse errors as a user needs them: the reason, the line and column, and the offending
 * lines with a caret under the column. The `yaml` library puts all of that in one message whose
 * first line ends in `at line 7, column 3:` with the code frame on the lines after it; printing
 * only the first line left the message ending mid-sentence.
 */
import type { YAMLError } from 'yaml';

/**
 * `at line L, column C: <reason>` followed by the library's code frame (the line before, the
 * offending line, and a caret), each frame line indented by two spaces. Without a position (an
 * error the library could not place), just the reason.
 */
export function describeYamlError(e: YAMLError): string {
  const pos = e.linePos?.[0];
  const [head = '', ...rest] = e.message.split('\n');
  const reason = head.replace(/ at line \d+, column \d+:?$/, '').trim() || e.code;
  const frame = [...rest];
  while (frame.length > 0 && frame.at(-1)?.trim() === '') frame.pop();
  while (frame.length > 0 && frame[0]?.trim() === '') frame.shift();
  const at = pos ? `at line ${pos.line}, column ${pos.col}: ` : '';
  return `${at}${reason}${frame.length > 0 ? `\n${frame.map((l) => `  ${l}`).join('\n')}` : ''}`;
}
