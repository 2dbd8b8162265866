import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { ROOT } from '../helpers/cli.js';

const run = promisify(execFile);

/**
 * mDNS is multicast: to keep it off every real network, the fixture runs in a fresh network
 * namespace (`unshare --net`) whose only interface is its own loopback, with multicast routed there.
 * The namespace disappears with the process, so nothing on the host changes. Needs root (or
 * CAP_SYS_ADMIN) and util-linux's unshare; skipped otherwise.
 */
test('mDNS: peers of one run on a LAN find each other without initial peers; a peer of another run is not contacted', async (t) => {
  if (process.platform !== 'linux' || process.getuid?.() !== 0) return t.skip('needs root on Linux to create a private network namespace');
  const setup = 'ip link set lo up && ip link set lo multicast on && ip route add 224.0.0.0/4 dev lo';
  try {
    await run('unshare', ['--net', 'sh', '-c', setup]);
  } catch (err) {
    return t.skip(`cannot set up a private network namespace here (unshare, iproute2): ${(err as Error).message}`);
  }
  const { stdout } = await run('unshare', ['--net', 'sh', '-c', `${setup} && exec "$0" --import tsx test/fixtures/mdns-peers.ts`, process.execPath], { cwd: ROOT, timeout: 60_000 });
  const result = JSON.parse(stdout.trim().split('\n').at(-1)!) as { sameRunConnected: boolean; routingTables: number[]; otherRunConnections: number };
  assert.equal(result.sameRunConnected, true, 'the two peers of the run connected through mDNS alone');
  assert.deepEqual(result.routingTables, [1, 1], 'and are in each other’s DHT routing table');
  assert.equal(result.otherRunConnections, 0, 'the peer of another run (another mDNS service tag) was never contacted');
});
