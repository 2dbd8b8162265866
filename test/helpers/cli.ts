import { spawn } from 'node:child_process';
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

export interface LongRunning {
  /** stdout and stderr so far, interleaved. */
  out(): string;
  /** Sends SIGTERM and resolves with the exit code. */
  stop(): Promise<number | null>;
}

/** Starts a long-running command (`node …argv`), killed when the test ends if it is still running. */
export function startProcess(t: TestContext, argv: readonly string[], options: { env?: NodeJS.ProcessEnv; cwd?: string } = {}): LongRunning {
  const child = spawn(process.execPath, argv, { cwd: options.cwd ?? ROOT, env: { ...process.env, ...options.env }, stdio: ['ignore', 'pipe', 'pipe'] });
  t.after(() => child.kill('SIGKILL'));
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    out: () => out,
    stop: () => {
      child.kill('SIGTERM');
      return exited;
    },
  };
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
