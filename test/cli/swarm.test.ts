import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { openStore } from '../../src/store/index.js';
import { CLI, runCli, startProcess, type Proc } from '../helpers/cli.js';
import { waitFor } from '../helpers/swarm.js';
import { tmpDir } from '../helpers/tmp.js';

/** Starts `cohort swarm start …`; returns its growing output and a stop() that sends SIGTERM and resolves with the exit code. */
function startPeer(t: TestContext, args: string[]): Proc & { dataDir: string } {
  const dataDir = tmpDir(t);
  return { dataDir, ...startProcess(t, [CLI, 'swarm', 'start', '--host-maddrs', '/ip4/127.0.0.1/tcp/0', '--data-dir', dataDir, ...args]) };
}

test('swarm start prints its multiaddrs and a join code; a second peer joins with the code alone', async (t) => {
  const first = startPeer(t, ['--run-id', 'cli-demo']);
  await waitFor('the join code', () => /Join code.*: (cohort:\S+)/.test(first.out()), 30_000);
  const code = /Join code.*: (cohort:\S+)/.exec(first.out())![1]!;
  const addr = /^ {2}(\/ip4\/127\.0\.0\.1\/tcp\/\d+\/p2p\/12D3\w+)$/m.exec(first.out())?.[1];
  assert.ok(addr, `a full multiaddr is printed:\n${first.out()}`);

  const decoded = await runCli(['swarm', 'join-code', '--decode', code, '--json']);
  assert.equal(decoded.code, 0, decoded.stderr);
  assert.deepEqual(JSON.parse(decoded.stdout), { runId: 'cli-demo', bootstrap: [addr], closed: false });

  const second = startPeer(t, ['--initial-peers', code]);
  await waitFor('the second peer to join', () => /Connected to 1 of 1 initial peer/.test(second.out()), 30_000);
  assert.match(second.out(), /Swarm "cli-demo"/);
  // Both serve the DHT: the first as the bootstrap, the second once the first dialed it back (AutoNAT).
  assert.match(first.out(), /\(DHT server\)/);
  assert.match(second.out(), /\(DHT server\)/);
  // The first stops while the second is still connected; on stop it writes its last stats.
  assert.equal(await first.stop(), 0);
  assert.equal(await second.stop(), 0);
  const store = openStore(first.dataDir);
  t.after(() => store.close());
  assert.ok(store.metrics.query('swarm.connected_peers').some((m) => m.value === 1), 'connected peers recorded in the store');
});

test('swarm flags and join codes are validated: exit 2 naming the flag', async (t) => {
  const dataDir = tmpDir(t);
  const cases: Array<[string[], RegExp]> = [
    [['swarm', 'start'], /--run-id: required/],
    [['swarm', 'start', '--run-id', 'r', '--psk', 'abc'], /--psk: pre-shared key must be 64 hex characters/],
    [['swarm', 'start', '--run-id', 'Bad Id'], /--run-id: run id "Bad Id" is invalid/],
    [['swarm', 'start', '--run-id', 'r', '--host-maddrs', 'nowhere'], /--host-maddrs\/--announce-maddrs: address "nowhere" is not a multiaddr/],
    [['swarm', 'start', '--run-id', 'r', '--initial-peers', '/ip4/1.2.3.4/tcp/1'], /--initial-peers: initial peer .* lacks \/p2p\/<peer id>/],
    [['swarm', 'start', '--initial-peers', 'cohort:AAAAAAAAAA'], /--initial-peers: join code checksum does not match/],
    [['swarm', 'join-code', '--decode', 'hello'], /--decode: join code must start with "cohort:"/],
    [['swarm', 'start', '--run-id', 'r', '--reachability', 'sometimes'], /--reachability: invalid value "sometimes"; accepted: auto, public, private/],
    [['swarm', 'start', '--run-id', 'r', '--client-mode', '--reachability', 'public'], /--client-mode: contradicts --reachability public/],
  ];
  for (const [args, message] of cases) {
    const r = await runCli([...args, '--data-dir', dataDir]);
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, message);
  }
});
