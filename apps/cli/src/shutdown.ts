/** Logger subset the shutdown helper needs. */
interface InfoLogger {
  info(obj: Record<string, unknown>, msg: string): void;
}

/** An AbortController that aborts on the first SIGINT or SIGTERM (logged), for long-running commands. */
export function abortOnSignals(log: InfoLogger): AbortController {
  const ac = new AbortController();
  const stop = (signal: string): void => {
    log.info({ signal }, 'shutting down');
    ac.abort();
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  return ac;
}
