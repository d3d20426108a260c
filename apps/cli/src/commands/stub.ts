import { Command } from 'commander';
import { startAnthropicStub, startMcpStub, startOpenAIStub } from '@kars/router/stubs';
import { collect } from '../lib/flags.js';

/** What every stub gives back: where it listens, and how to stop it. */
interface RunningStub {
  url: URL;
  close(): Promise<void>;
}

/** Resolves once `close` has run after the first SIGINT or SIGTERM. */
function untilSignal(close: () => Promise<void>): Promise<void> {
  return new Promise((resolve) => {
    const stop = (): void => void close().then(resolve);
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
}

/**
 * Add `kars stub NAME` with `--listen <host:port>` (default `listen`), whose action starts the stub with the parsed
 * flags, prints `listening: URL` and serves until SIGINT or SIGTERM. Returns the subcommand, for further options.
 */
function addStub<F extends { listen: string }>(
  parent: Command,
  name: string,
  listen: string,
  description: string,
  start: (flags: F) => Promise<RunningStub>,
): Command {
  return parent
    .command(name)
    .description(description)
    .option('--listen <host:port>', 'address to listen on', listen)
    .action(async (flags: F) => {
      const stub = await start(flags);
      process.stdout.write(`listening: ${stub.url.toString()}\n`);
      await untilSignal(() => stub.close());
    });
}

/** One `--tool name[=description]` value, as the MCP stub takes it. */
function mcpTool(t: string): { name: string; description?: string } {
  const i = t.indexOf('=');
  return i < 0 ? { name: t } : { name: t.slice(0, i), description: t.slice(i + 1) };
}

const OPENAI_HELP =
  'an Azure-shaped OpenAI upstream: chat completions, Responses, embeddings and moderations at /v1/…, /openai/v1/… and /openai/deployments/{d}/… (JSON and streamed)';
const ANTHROPIC_HELP =
  'an Anthropic Messages upstream: POST /v1/messages (JSON and streamed), /v1/messages/count_tokens, GET /v1/models; errors in Anthropic’s shape';
const MCP_HELP = 'an MCP-over-HTTP server (JSON-RPC tools/list and tools/call) at /mcp';

/** `kars stub openai|anthropic|mcp`: local upstreams for demos and tests (not for production). */
export function stubCommand(): Command {
  const cmd = new Command('stub').description('run a local upstream stub for demos and tests');
  addStub(cmd, 'openai', '127.0.0.1:9000', OPENAI_HELP, (f) => startOpenAIStub({ listen: f.listen }));
  addStub(cmd, 'anthropic', '127.0.0.1:9002', ANTHROPIC_HELP, (f) => startAnthropicStub({ listen: f.listen }));
  addStub(cmd, 'mcp', '127.0.0.1:9001', MCP_HELP, (f: { listen: string; tool?: string[] }) => {
    const tools = f.tool?.map(mcpTool);
    return startMcpStub({ listen: f.listen, ...(tools ? { tools } : {}) });
  }).option('--tool <name[=description]>', 'a tool to list and answer (repeatable; default: echo)', collect);
  return cmd;
}
