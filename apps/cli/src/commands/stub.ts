import { Command } from 'commander';
import { startAnthropicStub, startMcpStub, startOpenAIStub } from '@kars/router/stubs';

/** `kars stub openai|anthropic|mcp`: local upstreams for demos and tests (not for production). */
export function stubCommand(): Command {
  const cmd = new Command('stub').description('run a local upstream stub for demos and tests');
  const wait = (close: () => Promise<void>): Promise<void> =>
    new Promise((resolve) => {
      const stop = (): void => void close().then(resolve);
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    });
  cmd
    .command('openai')
    .description(
      'an Azure-shaped OpenAI upstream: chat completions, Responses, embeddings and moderations at /v1/…, /openai/v1/… and /openai/deployments/{d}/… (JSON and streamed)',
    )
    .option('--listen <host:port>', 'address to listen on', '127.0.0.1:9000')
    .action(async (flags: { listen: string }) => {
      const stub = await startOpenAIStub({ listen: flags.listen });
      process.stdout.write(`listening: ${stub.url.toString()}\n`);
      await wait(() => stub.close());
    });
  cmd
    .command('anthropic')
    .description(
      'an Anthropic Messages upstream: POST /v1/messages (JSON and streamed), /v1/messages/count_tokens, GET /v1/models; errors in Anthropic’s shape',
    )
    .option('--listen <host:port>', 'address to listen on', '127.0.0.1:9002')
    .action(async (flags: { listen: string }) => {
      const stub = await startAnthropicStub({ listen: flags.listen });
      process.stdout.write(`listening: ${stub.url.toString()}\n`);
      await wait(() => stub.close());
    });
  cmd
    .command('mcp')
    .description('an MCP-over-HTTP server (JSON-RPC tools/list and tools/call) at /mcp')
    .option('--listen <host:port>', 'address to listen on', '127.0.0.1:9001')
    .option(
      '--tool <name[=description]>',
      'a tool to list and answer (repeatable; default: echo)',
      (v: string, prev: string[] | undefined) => [...(prev ?? []), v],
    )
    .action(async (flags: { listen: string; tool?: string[] }) => {
      const tools = flags.tool?.map((t) => {
        const i = t.indexOf('=');
        return i < 0 ? { name: t } : { name: t.slice(0, i), description: t.slice(i + 1) };
      });
      const stub = await startMcpStub({ listen: flags.listen, ...(tools ? { tools } : {}) });
      process.stdout.write(`listening: ${stub.url.toString()}\n`);
      await wait(() => stub.close());
    });
  return cmd;
}
