/**
 * The router's prompt reservation (`@kars/router/inference` estimatePromptTokens) against real
 * token counts (issue 25 item 7, ADR 0027). Prints one row per kind of text: bytes of the chat
 * request body the router forwards, the text's real tokens in o200k_base and cl100k_base
 * (gpt-tokenizer), the old estimate (body bytes / 4), the new one (body bytes), and each as a ratio
 * of the larger real count (below 1 = the budget is under-reserved).
 * Run: `npm run bench:estimator` (builds first), or `node bench/estimator/dist/main.js` after a build.
 */
import { performance } from 'node:perf_hooks';
import { countTokens as o200k } from 'gpt-tokenizer/encoding/o200k_base';
import { countTokens as cl100k } from 'gpt-tokenizer/encoding/cl100k_base';
import { estimatePromptTokens } from '@kars/router/inference';

const prose =
  'The committee met on Tuesday to review the budget for the coming year. After a long discussion about staffing, ' +
  'travel and the cost of the new building, the members agreed to postpone the decision until the next meeting, ' +
  'when the final figures from the finance department would be available. ';
const code =
  'export function retry(fn, attempts = 3) {\n  for (let i = 0; i < attempts; i++) {\n    try {\n      return fn();\n' +
  '    } catch (err) {\n      if (i === attempts - 1) throw err;\n    }\n  }\n}\n';
const chinese = '委员会于星期二召开会议，审议来年的预算。经过关于人员、差旅和新大楼费用的长时间讨论，委员们同意推迟决定。';
const japanese = '委員会は火曜日に会合を開き、来年度の予算を審議しました。人員と出張費について長い議論が続きました。';
const korean = '위원회는 화요일에 모여 내년 예산을 검토했습니다. 인력과 출장비에 대한 긴 논의가 이어졌습니다.';
const emoji = '😀🎉👍🏽👨‍👩‍👧‍👦🏳️‍🌈🚀🔥✨🙏🏿🤖';
const mixed = `${prose.slice(0, 80)} ${chinese.slice(0, 20)} ${emoji.slice(0, 8)} if (x) { return 1; } `;
// Printable ASCII drawn by a fixed LCG: an agent is free to send text that tokenizes badly.
let seed = 42;
const rnd = (): number => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
const asciiNoise = Array.from({ length: 4000 }, () => String.fromCharCode(33 + Math.floor(rnd() * 94))).join('');
const digits = Array.from({ length: 4000 }, () => String.fromCharCode(48 + Math.floor(rnd() * 10))).join(' ');

const TARGET = 16_000; // bytes of text per row
const fill = (s: string): string => s.repeat(Math.max(1, Math.ceil(TARGET / Buffer.byteLength(s))));
const rows: Array<[string, string]> = [
  ['English prose', fill(prose)],
  ['code (JS)', fill(code)],
  ['Chinese', fill(chinese)],
  ['Japanese', fill(japanese)],
  ['Korean', fill(korean)],
  ['emoji', fill(emoji)],
  ['mixed', fill(mixed)],
  ['random ASCII', asciiNoise],
  ['digits', digits],
];

const pad = (v: number, n: number): string => String(v).padStart(n);
console.log(`| text | body bytes | o200k | cl100k | old (bytes/4) | new (bytes) | old ÷ real | new ÷ real |`);
console.log(`|---|---:|---:|---:|---:|---:|---:|---:|`);
for (const [kind, text] of rows) {
  const body = JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: text }], max_tokens: 1 });
  const bytes = Buffer.byteLength(body);
  const a = o200k(text);
  const b = cl100k(text);
  const real = Math.max(a, b);
  const old = Math.ceil(bytes / 4);
  const now = estimatePromptTokens(bytes);
  console.log(
    `| ${kind} | ${pad(bytes, 6)} | ${pad(a, 6)} | ${pad(b, 6)} | ${pad(old, 6)} | ${pad(now, 6)} | ${(old / real).toFixed(2)} | ${(now / real).toFixed(2)} |`,
  );
}

// CPU of an exact count on the request path: 1 MiB of mixed text (the body limit is 10 MiB).
const mib = fill(mixed)
  .repeat(Math.ceil((1 << 20) / Buffer.byteLength(fill(mixed))))
  .slice(0, 1 << 19);
const t0 = performance.now();
o200k(mib);
const ms = performance.now() - t0;
console.log(
  `\no200k_base count of ${Buffer.byteLength(mib)} bytes of mixed text: ${ms.toFixed(0)} ms (≈ ${((ms * (10 << 20)) / Buffer.byteLength(mib) / 1000).toFixed(1)} s for a 10 MiB body); RSS now ${(process.memoryUsage().rss / 1e6).toFixed(0)} MB`,
);
