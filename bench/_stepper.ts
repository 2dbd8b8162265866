import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import readline from 'node:readline';

/** One step as the child measured it: wall time, and the CPU time of its whole process. */
export interface StepTime {
  readonly ms: number;
  readonly cpuMs: number;
}

/**
 * A child process that takes one training step per "step" line on stdin and answers one JSON line
 * ({"ms", "cpu_ms"}); "quit" makes it print a summary line and exit. Lets the engine bench interleave ORT
 * and PyTorch steps so both see the same load on a shared machine.
 */
export class Stepper {
  private readonly child: ChildProcessWithoutNullStreams;
  private readonly lines: AsyncIterator<string>;
  private stderr = '';

  constructor(
    readonly label: string,
    command: string,
    args: readonly string[],
    private readonly timeoutMs: number,
    env: NodeJS.ProcessEnv = process.env,
  ) {
    this.child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'], env });
    this.child.stderr.on('data', (d: Buffer) => (this.stderr = (this.stderr + d.toString()).slice(-2000)));
    this.lines = readline.createInterface({ input: this.child.stdout })[Symbol.asyncIterator]();
  }

  /** One step; its wall and CPU time as the child measured them, in ms. */
  async step(): Promise<StepTime> {
    const r = (await this.send('step')) as { ms: number; cpu_ms: number };
    return { ms: r.ms, cpuMs: r.cpu_ms };
  }

  /** Ends the child and returns its summary line. */
  async quit(): Promise<Record<string, unknown>> {
    const summary = await this.send('quit');
    this.child.stdin.end();
    return summary;
  }

  kill(): void {
    this.child.kill();
  }

  private async send(command: string): Promise<Record<string, unknown>> {
    this.child.stdin.write(command + '\n');
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${this.label}: no answer to "${command}" within ${this.timeoutMs} ms`)), this.timeoutMs);
    });
    try {
      const next = await Promise.race([this.lines.next(), timeout]);
      if (next.done) throw new Error(`${this.label} exited: ${this.stderr.trim().split('\n').slice(-3).join(' ')}`);
      return JSON.parse(next.value) as Record<string, unknown>;
    } finally {
      clearTimeout(timer);
    }
  }
}
