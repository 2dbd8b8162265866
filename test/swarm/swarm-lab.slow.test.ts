// The swarm lab's short variant (bench/swarm-lab.ts): 8 real `cohort run` peers and a coordinator in
// network namespaces for 3 minutes, 5 of the peers behind NAT routers (client mode, through relays),
// links shaped, one peer leaving (SIGTERM or SIGKILL) every 45 s and a newcomer taking its place.
// Needs root (namespaces, tc, nftables: installed by the lab when missing); skipped otherwise. The
// peers' logs (at debug level: each records read with its duration and answers, slow DHT lookups
// with their errors) stay in /tmp/cohort-swarm-lab-*/logs when it fails.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import test from 'node:test';
import { ROOT } from '../helpers/cli.js';

function canMakeNamespaces(): boolean {
  if (process.getuid?.() !== 0) return false;
  try {
    execFileSync('ip', ['netns', 'list'], { stdio: 'ignore' });
    execFileSync('tc', ['-V'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

test('swarm lab, 8 peers for 3 minutes with NAT and churn: nobody crashes, every peer that stayed 3 epochs averaged, NAT’d peers included, churn brings newcomers', { timeout: 880_000, skip: canMakeNamespaces() ? false : 'needs root with ip netns and tc' }, async (t) => {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'bench', 'swarm-lab.ts'), '--peers', '8', '--minutes', '3', '--churn-every', '45', '--epoch-seconds', '4', '--keep-logs', '--log-level', 'debug'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], timeout: 860_000 });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  t.diagnostic(out.split('\n').filter((l) => l.startsWith('  ') || l.startsWith('swarm lab')).join('\n'));
  // the peers' logs are kept so that a failure (its message ends with "logs in …") can be diagnosed
  const kept = /logs in (\S+)\/logs$/m.exec(out)?.[1];
  assert.equal(code, 0, out.slice(-4000));
  const f = JSON.parse(out.trim().split('\n').at(-1)!) as Record<string, number | null>;
  assert.equal(f.peers_crashed, 0, out.slice(-4000));
  assert.equal(f.peers_unclean_stop, 0, out.slice(-4000));
  // how many epochs and peers get that far depends on the machine's load (at load 20 on 2 cores: 3
  // epochs of a minute, 3 peers stepping 3+ of them); what must hold at any load is below
  assert.ok(f.epochs! >= 3, `only ${f.epochs} epochs in 3 minutes`);
  assert.ok(f.peers_long_lived! >= 1, 'no peer stepped 3+ epochs');
  assert.equal(f.peers_never_averaged, 0, `peers that stepped 3+ epochs without ever averaging: ${out.slice(-3000)}`);
  assert.ok(f.nat_peers! >= 1, 'no NAT’d peer stepped 3+ epochs');
  assert.equal(f.nat_peers_averaged, f.nat_peers, 'a NAT’d peer that stepped 3+ epochs never averaged');
  assert.ok(f.joiners! >= 2, `churn brought ${f.joiners} newcomers`);
  assert.ok(f.averaged_share! > 0, 'no epoch averaged');
  if (kept !== undefined) fs.rmSync(kept, { recursive: true, force: true });
});
