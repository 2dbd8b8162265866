import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { test, type TestContext } from 'node:test';
import { ROOT } from '../helpers/cli.js';
import { progressSchema, startSwarm, waitFor } from '../helpers/swarm.js';
import { tmpDir } from '../helpers/tmp.js';

const FIXTURE = path.join(ROOT, 'test', 'fixtures', 'swarm-peer.ts');

interface Peer {
  readonly child: ChildProcessWithoutNullStreams;
  /** Resolves with the next JSON line whose `event` is `name` (bounded wait). */
  next(name: string): Promise<Record<string, unknown>>;
}

function spawnPeer(t: TestContext, args: string[]): Peer {
  const child = spawn(process.execPath, ['--import', 'tsx', FIXTURE, ...args], { cwd: ROOT, stdio: ['pipe', 'pipe', 'pipe'] });
  t.after(() => child.kill('SIGKILL'));
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const lines: Array<Record<string, unknown>> = [];
  createInterface({ input: child.stdout }).on('line', (line) => lines.push(JSON.parse(line) as Record<string, unknown>));
  return {
    child,
    next: async (name) => {
      await waitFor(`"${name}" from the child peer (stderr: ${stderr.slice(-500)})`, () => lines.some((l) => l.event === name) || child.exitCode !== null, 30_000);
      const line = lines.find((l) => l.event === name);
      if (line === undefined) throw new Error(`child peer exited with ${child.exitCode} before "${name}": ${stderr.slice(-1000)}`);
      return line;
    },
  };
}

test('a peer killed with SIGKILL and restarted with the same identity rejoins and its records are found again', async (t) => {
  const swarm = await startSwarm(t, 4, { runId: 'restart' });
  const progress = swarm.map((n) => n.registerNamespace('progress', progressSchema));
  const dataDir = tmpDir(t);
  const expiration = Date.now() + 120_000;
  const bootstrap = swarm[0]!.multiaddrs()[0]!;

  const first = spawnPeer(t, [dataDir, 'restart', bootstrap, '42', String(expiration)]);
  const { peerId } = await first.next('started');
  assert.ok(((await first.next('stored')).replicas as number) >= 3);
  first.child.kill('SIGKILL');
  await new Promise((resolve) => first.child.once('exit', resolve));
  // Its record outlives it on the replicas.
  for (const p of progress) assert.equal((await p.get('progress')).get(String(peerId))?.value.samples, 42);

  const second = spawnPeer(t, [dataDir, 'restart', bootstrap, '43', String(expiration + 1000)]);
  assert.equal((await second.next('started')).peerId, peerId, 'same peer id after the restart (identity kept in the store)');
  assert.deepEqual((await second.next('got')).entries, { [String(peerId)]: 42 }, 'the restarted peer finds its own record again');
  assert.ok(((await second.next('stored')).replicas as number) >= 3);
  await waitFor('the restarted peer to be connected again', () => swarm[0]!.libp2p.getConnections().some((c) => c.remotePeer.toString() === peerId));
  // Same identity, so it may replace its own entry: everyone now reads the newer value.
  for (const p of progress) assert.equal((await p.get('progress')).get(String(peerId))?.value.samples, 43);
});
