import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import type { WriteStream } from 'node:fs';

/** How a managed process ended. */
export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** What {@link ManagedProcess.start} runs. */
export interface ManagedProcessOptions {
  /** Its name in messages: `"kube-apiserver"`. */
  name: string;
  bin: string;
  args: readonly string[];
  /** Every line it prints (stdout and stderr) is appended here. */
  logFile: string;
  env?: NodeJS.ProcessEnv;
}

const TAIL_BYTES = 16 * 1024;

// Children still running when this process exits (a test that forgot stop(), an uncaught
// exception) are killed on the way out, so no control-plane process outlives its owner.
const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of live) c.kill('SIGKILL');
});

/**
 * One control-plane process: spawned directly (no shell, so its pid is the binary's), its output
 * kept in a log file and the last 16 KB in memory for error messages, stopped with SIGTERM then
 * SIGKILL.
 */
export class ManagedProcess {
  readonly name: string;
  readonly logFile: string;
  readonly child: ChildProcess;
  /** Resolves once the process has exited (or failed to spawn: code null, signal null). */
  readonly exited: Promise<Exit>;
  private tailBuf = '';
  private ended: Exit | undefined;
  private spawnError: Error | undefined;
  private readonly log: WriteStream;

  private constructor(opts: ManagedProcessOptions) {
    this.name = opts.name;
    this.logFile = opts.logFile;
    this.log = createWriteStream(opts.logFile, { flags: 'a' });
    this.child = spawn(opts.bin, [...opts.args], { stdio: ['ignore', 'pipe', 'pipe'], env: opts.env ?? process.env });
    live.add(this.child);
    const keep = (d: Buffer): void => {
      this.log.write(d);
      this.tailBuf = (this.tailBuf + d.toString('utf8')).slice(-TAIL_BYTES);
    };
    this.child.stdout?.on('data', keep);
    this.child.stderr?.on('data', keep);
    this.exited = new Promise((resolve) => {
      const done = (e: Exit): void => {
        if (this.ended) return;
        this.ended = e;
        live.delete(this.child);
        this.log.end();
        resolve(e);
      };
      this.child.once('error', (err) => {
        this.spawnError = err;
        done({ code: null, signal: null });
      });
      // 'close' (not 'exit'): the output pipes are drained, so the tail is complete.
      this.child.once('close', (code, signal) => done({ code, signal }));
    });
  }

  /** Spawn `opts.bin`. Never throws: a spawn failure shows up in {@link exited} and {@link describeExit}. */
  static start(opts: ManagedProcessOptions): ManagedProcess {
    return new ManagedProcess(opts);
  }

  /** The process id (undefined when the spawn failed). */
  get pid(): number | undefined {
    return this.child.pid;
  }

  /** Whether it has not exited yet. */
  get running(): boolean {
    return this.ended === undefined;
  }

  /** The last `lines` lines it printed. */
  tail(lines = 25): string {
    return this.tailBuf
      .split('\n')
      .slice(-lines - 1)
      .join('\n')
      .trimEnd();
  }

  /** "exited with code 1", "was killed by SIGKILL", "could not be started: spawn … ENOENT". */
  describeExit(): string {
    if (this.spawnError) return `could not be started: ${this.spawnError.message}`;
    if (!this.ended) return 'is running';
    return this.ended.signal ? `was killed by ${this.ended.signal}` : `exited with code ${String(this.ended.code)}`;
  }

  /**
   * Stop it: SIGTERM, then SIGKILL when it has not exited after `graceMs`. Resolves once it has
   * exited and its output is flushed; at once when it already had.
   */
  async stop(graceMs = 10_000): Promise<Exit> {
    if (this.ended) return this.ended;
    this.child.kill('SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    const killed = new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        this.child.kill('SIGKILL');
        resolve();
      }, graceMs);
    });
    await Promise.race([this.exited, killed]);
    clearTimeout(timer);
    return this.exited;
  }

  /** SIGKILL, no grace (a crash, for fault tests). Resolves once it has exited. */
  kill(): Promise<Exit> {
    if (!this.ended) this.child.kill('SIGKILL');
    return this.exited;
  }
}
