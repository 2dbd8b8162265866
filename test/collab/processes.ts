import fs from 'node:fs';
import path from 'node:path';
import type { TestContext } from 'node:test';
import { CLI, runCli, startProcess, type Proc } from '../helpers/cli.js';

export type { Proc };

/** Spawns `cohort args…`, killed (SIGKILL) when the test ends if still running. */
export function spawnCli(t: TestContext, args: readonly string[]): Proc {
  return startProcess(t, [CLI, ...args]);
}

/** Resolves with the first match of `pattern` in the process's stdout (or stderr), bounded by `timeoutMs`. */
export async function waitFor(proc: Proc, pattern: RegExp, timeoutMs: number, stream: 'stdout' | 'stderr' = 'stdout'): Promise<RegExpMatchArray> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const m = proc[stream].match(pattern);
    if (m) return m;
    if (proc.child.exitCode !== null) throw new Error(`process exited (${proc.child.exitCode}) before ${pattern}: ${proc.stderr.slice(-2000)}`);
    if (Date.now() > deadline) throw new Error(`no ${pattern} within ${timeoutMs} ms: ${proc.stderr.slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Prepares the bundled corpus once into `template` and copies it per peer (the identity is created later, per copy). */
export async function preparedDataDirs(template: string, names: readonly string[]): Promise<string[]> {
  const r = await runCli(['data', 'prepare', '--data-dir', template, '--log-level', 'error'], { timeoutMs: 120_000 });
  if (r.code !== 0) throw new Error(`data prepare failed: ${r.stderr}`);
  return names.map((n) => {
    const dir = path.join(path.dirname(template), n);
    fs.cpSync(template, dir, { recursive: true });
    return dir;
  });
}
