/** Child: the OpenAI stub (`main.js --stub`) or the Anthropic stub (`main.js --stub anthropic`). */
import { startAnthropicStub, startOpenAIStub } from '@kars/router/stubs';

/** What this child uses of either stub. */
interface Stub {
  readonly url: URL;
  readonly requests: unknown[];
  close(): Promise<void>;
}

/** Start the stub of `kind` on a free port, print `listening: <url>`, stop on SIGTERM / SIGINT. */
export async function stubMain(kind = 'openai'): Promise<void> {
  const start = kind === 'anthropic' ? startAnthropicStub : startOpenAIStub;
  const stub: Stub = await start({ listen: '127.0.0.1:0' });
  // The stub records every request it receives in `requests` (tests read it) and never drops
  // them. Nothing here reads them: make the push a no-op, so the stub's heap does not grow by
  // ~1–2 KB per request (and old-space GC pauses do not land in the "direct" numbers).
  stub.requests.push = () => 0;
  process.stdout.write(`listening: ${stub.url.toString()}\n`);
  const stop = (): void => {
    void stub.close().then(() => process.exit(0));
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}
