import { spawn, type ChildProcess } from 'node:child_process';
import type { TestContext } from 'node:test';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { main } from '../../src/cli/program.js';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const CLI = path.join(ROOT, 'bin', 'cohort.js');

export interface CliResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs the real `cohort` executable as a child process (bounded by `timeoutMs`). */
export function runCli(args: readonly string[], options: { env?: NodeJS.ProcessEnv; cwd?: string; timeoutMs?: number } = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      cwd: options.cwd ?? ROOT,
      env: { ...process.env, ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: options.timeoutMs ?? 60_000,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** A long-running child process whose output is collected as it runs. */
export interface Proc {
  readonly child: ChildProcess;
  stdout: string;
  stderr: string;
  /** Resolves with the exit code once the process exited and its output was read. */
  readonly exited: Promise<number | null>;
  /** stdout and stderr so far, interleaved. */
  out(): string;
  /** Sends SIGTERM and resolves with the exit code. */
  stop(): Promise<number | null>;
}

/** Started processes still running: `t.after` kills them, but not when the runner terminates this file. */
const running = new Set<ChildProcess>();

/**
 * The test runner ends a file that runs past its timeout with SIGTERM, and no `t.after` runs then:
 * without this its `cohort run` children (coordinators never exit by themselves) outlived it and
 * loaded the machine for every later file.
 */
let killOnTerminate = false;
function killStartedOnTerminate(): void {
  if (killOnTerminate) return;
  killOnTerminate = true;
  process.once('SIGTERM', () => {
    for (const child of running) child.kill('SIGKILL');
    process.exit(143);
  });
}

/** Starts `node …argv` (e.g. `[CLI, 'run', …]`), killed (SIGKILL) when the test ends, or this test process is terminated, if it is still running. */
export function startProcess(t: TestContext, argv: readonly string[], options: { env?: NodeJS.ProcessEnv; cwd?: string } = {}): Proc {
  killStartedOnTerminate();
  const child = spawn(process.execPath, argv, { cwd: options.cwd ?? ROOT, env: { ...process.env, ...options.env }, stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(child);
  child.on('close', () => running.delete(child));
  let all = '';
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  const proc: Proc = {
    child,
    stdout: '',
    stderr: '',
    exited,
    out: () => all,
    stop: () => {
      child.kill('SIGTERM');
      return exited;
    },
  };
  child.stdout.on('data', (d: Buffer) => ((proc.stdout += d.toString()), (all += d.toString())));
  child.stderr.on('data', (d: Buffer) => ((proc.stderr += d.toString()), (all += d.toString())));
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  return proc;
}

/** The CLI in this process (its argument checks need no child process): exit code and stderr. */
export async function cohortInProcess(args: readonly string[]): Promise<{ code: number; stderr: string }> {
  let stderr = '';
  const write = process.stderr.write.bind(process.stderr);
  process.stderr.write = ((chunk: string | Uint8Array) => ((stderr += chunk.toString()), true));
  try {
    return { code: await main([...args, '--log-format', 'json']), stderr };
  } finally {
    process.stderr.write = write;
  }
}
