/**
 * The one logger shape of kars (ADR 0016): pino's `(fields, message)` call, four levels, and
 * `child` for bindings. A pino `Logger` satisfies it as is; so does {@link silentLogger}.
 *
 * Conventions: `fields` is a flat object of structured values; an error goes under `err` as the
 * Error itself (pino's serializer renders message, stack and cause); the message is a constant
 * sentence, with the variable parts in `fields`.
 */

/** Structured fields of one log line. */
export type LogFields = Record<string, unknown>;

/** The levels kars code logs at. */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

/** A structured logger (the subset of pino's `Logger` that kars uses). */
export interface Logger {
  debug(fields: LogFields, msg: string): void;
  info(fields: LogFields, msg: string): void;
  warn(fields: LogFields, msg: string): void;
  error(fields: LogFields, msg: string): void;
  /** A logger that adds `bindings` to every line. */
  child(bindings: LogFields): Logger;
  /** Whether a level would be written (to skip building costly fields); absent means "yes". */
  isLevelEnabled?(level: LogLevel): boolean;
}

/** Writes nothing. The default wherever a logger is optional. */
export const silentLogger: Logger = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
  child: () => silentLogger,
  isLevelEnabled: () => false,
};
