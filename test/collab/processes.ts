import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import type { TestContext } from 'node:test';
import { CLI, runCli, startProcess, type Proc } from '../helpers/cli.js';
import { tmpDir } from '../helpers/tmp.js';

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

/** What a stopped `cohort run` peer prints as its last stdout line. */
export interface RunSummary {
  epoch: number;
  losses: Array<{ epoch: number; loss: number }>;
  averaged: number;
}

/** A bound only: the peers are stopped (SIGTERM) once the newcomer has averaged with them. */
const MAX_EPOCHS = 60;
const COMMON = ['--listen', '/ip4/127.0.0.1/tcp/0', '--log-level', 'info', '--refresh', '1'];
const TRAIN = [...COMMON, '--batch-size', '4', '--max-epochs', String(MAX_EPOCHS), '--matchmaking-time', '2', '--averaging-timeout', '20', '--threads', '1'];

/**
 * A run of an averaging mode as real processes: a coordinator founds it with the run-wide flags `run`
 * (the peers adopt them), two peers train; once the first has averaged with the other (`round(2)` on
 * its stderr) a newcomer joins, and once it has averaged with all (`round(3)`) everyone stops. Asserts
 * what any mode must show (clean exits, every peer averaged, the newcomer loaded the swarm's state
 * mid-run, the first peers' loss fell) and returns the peers (newcomer last) for the mode's own checks.
 */
export async function runWithNewcomer(t: TestContext, runId: string, run: readonly string[], round: (peers: number) => RegExp): Promise<Array<{ proc: Proc; summary: RunSummary }>> {
  const root = tmpDir(t);
  const [a, b, c] = await preparedDataDirs(path.join(root, 'template'), ['a', 'b', 'c']);
  const co = spawnCli(t, ['run', '--coordinator', '--run-id', runId, '--data-dir', path.join(root, 'coordinator'), ...COMMON, ...run]);
  const [, code] = await waitFor(co, /cohort run --join (cohort:\S+)/, 30_000);
  const peers = [a!, b!].map((dir) => spawnCli(t, ['run', '--join', code!, '--data-dir', dir, ...TRAIN]));
  // the newcomer starts once the first two have averaged: the swarm is mid-run, ahead of it
  await waitFor(peers[0]!, round(2), 120_000, 'stderr');
  const newcomer = spawnCli(t, ['run', '--join', code!, '--data-dir', c!, ...TRAIN]);
  const all = [...peers, newcomer];
  // however long its start-up takes, the others train on until it has averaged with them; then all stop
  await waitFor(newcomer, round(3), 150_000, 'stderr');
  for (const p of all) p.child.kill('SIGTERM');
  const codes = await Promise.all(all.map((p) => p.exited));
  co.child.kill('SIGTERM');
  const result = all.map((proc, i) => {
    assert.equal(codes[i], 0, proc.stderr.slice(-3000));
    const summary = JSON.parse(proc.stdout.trim().split('\n').at(-1)!) as RunSummary;
    assert.ok(summary.averaged > 0, `peer ${i} never averaged`);
    return { proc, summary };
  });
  assert.match(newcomer.stderr, /loaded state of epoch [1-9]\d* from /, 'the newcomer loaded the swarm’s state, mid-run');
  const first = result.slice(0, 2).flatMap((r) => r.summary.losses.slice(0, 2).map((l) => l.loss));
  const last = result.slice(0, 2).flatMap((r) => r.summary.losses.slice(-2).map((l) => l.loss));
  const mean = (xs: number[]): number => xs.reduce((s, x) => s + x, 0) / xs.length;
  t.diagnostic(`loss ${mean(first).toFixed(4)} → ${mean(last).toFixed(4)}`);
  assert.ok(mean(last) < mean(first), `loss did not fall: ${mean(first)} → ${mean(last)}`);
  assert.equal(await co.exited, 0, co.stderr.slice(-3000));
  return result;
}
