// What the benches that train real swarms share: `cohort` child processes (bounded), the join code a
// founder prints, and the held-out MLM loss of a saved model.
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { loadModel } from '../src/engine/albert/checkpoint.js';
import { OrtBackend } from '../src/engine/ort-backend.js';
import { openBatchStream } from '../src/data/index.js';
import { openStore } from '../src/store/index.js';

const CLI = path.resolve('bin/cohort.js');

export interface Child {
  stdout: string;
  stderr: string;
  done: Promise<number | null>;
}

const CHILD_LIMIT_MS = 15 * 60_000;
/** Children still running: a bench that fails on one (must() throws) exits without waiting for the others, which must not outlive it. */
const running = new Set<ChildProcess>();
process.once('exit', () => running.forEach((child) => child.kill('SIGKILL')));

/** `cohort args…` as a child process, killed after 15 minutes or when the bench exits. */
export function cohort(args: string[]): Child {
  const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(child);
  const c = { stdout: '', stderr: '' } as Child;
  child.stdout.on('data', (d: Buffer) => (c.stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (c.stderr += d.toString()));
  let timedOut = false;
  const limit = setTimeout(() => {
    timedOut = true;
    child.kill('SIGKILL');
  }, CHILD_LIMIT_MS).unref(); // bounded
  c.done = new Promise((resolve) =>
    child.on('close', (code, signal) => {
      running.delete(child);
      clearTimeout(limit);
      if (timedOut) c.stderr += `\n(killed: still running after the bench's ${CHILD_LIMIT_MS / 60_000}-minute limit per process)`;
      else if (signal !== null) c.stderr += `\n(killed by ${signal})`;
      resolve(code);
    }),
  );
  return c;
}

export async function must(c: Child, what: string): Promise<void> {
  const code = await c.done;
  if (code !== 0) throw new Error(`${what} exited ${code}: ${c.stderr.slice(-3000)}`);
}

export async function joinCode(c: Child): Promise<string> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const m = c.stdout.match(/cohort run --join (cohort:\S+)/);
    if (m) return m[1]!;
    if (Date.now() > deadline) throw new Error(`the first peer printed no join code: ${c.stderr.slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Mean MLM loss of a saved model over the same held-out batches (a seed and reader no trainer uses). */
export async function evaluate(modelDir: string, dataDir: string): Promise<number> {
  const { config, params } = loadModel(modelDir);
  const store = openStore(dataDir);
  const data = openBatchStream({ store, batchSize: 16, seed: 987_654, peerId: 'convergence-eval', worker: false });
  const backend = new OrtBackend(config, { provider: 'cpu', intraOpThreads: 2 });
  try {
    const losses: number[] = [];
    for (let i = 0; i < 8; i++) {
      const batch = await data.next();
      if (batch.done) throw new Error(`the held-out batch stream of ${dataDir} closed after ${i} batches`);
      losses.push((await backend.forwardBackward(params, batch.value)).mlmLoss);
    }
    return losses.reduce((a, b) => a + b, 0) / losses.length;
  } finally {
    await backend.close();
    await data.close();
    store.close();
  }
}
