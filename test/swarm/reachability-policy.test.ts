import assert from 'node:assert/strict';
import { test } from 'node:test';
import { multiaddr } from '@multiformats/multiaddr';
import { resolveSwarmInit } from '../../src/swarm/config.js';
import { mdnsServiceTag } from '../../src/swarm/node.js';
import { dialTargets, type DialbackAnswer } from '../../src/swarm/reachability/dialback.js';
import { tally } from '../../src/swarm/reachability/reachability.js';

const ok = (a: string): PromiseSettledResult<DialbackAnswer> => ({ status: 'fulfilled', value: { t: 'ok', a } });
const failed: PromiseSettledResult<DialbackAnswer> = { status: 'fulfilled', value: { t: 'failed', reason: 'ECONNREFUSED' } };
const refused: PromiseSettledResult<DialbackAnswer> = { status: 'fulfilled', value: { t: 'refused', reason: 'rate-limited' } };
const silent: PromiseSettledResult<DialbackAnswer> = { status: 'rejected', reason: new Error('timeout') };

test('AutoNAT verdict: a majority of at least two answers (one when only one peer was asked); refusals and silence count neither way', () => {
  assert.equal(tally(['a'], [ok('/ip4/1.2.3.4/tcp/1')]).decided, 'public');
  assert.equal(tally(['a'], [failed]).decided, 'private');
  assert.equal(tally(['a'], [refused]).decided, undefined);
  assert.equal(tally(['a', 'b', 'c'], [ok('x'), silent, refused]).decided, undefined, 'one answer of three asked is not enough');
  assert.equal(tally(['a', 'b', 'c'], [ok('x'), ok('x'), failed]).decided, 'public');
  assert.equal(tally(['a', 'b', 'c'], [ok('x'), failed, failed]).decided, 'private');
  assert.equal(tally(['a', 'b'], [ok('x'), failed]).decided, undefined, 'a tie decides nothing');
  const outcome = tally(['a', 'b', 'c'], [failed, silent, failed]);
  assert.deepEqual([outcome.decided, outcome.failed.map((f) => f.peer), outcome.silent], ['private', ['a', 'c'], 1]);
});

test('dial-back targets: only the IP the request came from; its ports when none of the named addresses is on that IP', () => {
  const from = multiaddr('/ip4/203.0.113.7/tcp/50123');
  const bytes = (...addrs: string[]): Uint8Array[] => addrs.map((a) => multiaddr(a).bytes);
  // Named on the same IP: dialed as named. Other IPs are never dialed (no dialing third parties).
  assert.deepEqual(dialTargets(bytes('/ip4/203.0.113.7/tcp/4001', '/ip4/198.51.100.1/tcp/4002'), from).map(String), ['/ip4/203.0.113.7/tcp/4001']);
  // Behind NAT the node only knows its LAN address: try its port on the address it is seen at (a forwarded port).
  assert.deepEqual(dialTargets(bytes('/ip4/192.168.1.5/tcp/31337'), from).map(String), ['/ip4/203.0.113.7/tcp/31337']);
  // Relayed, non-TCP and garbage addresses are ignored; ports are deduplicated and capped.
  assert.deepEqual(dialTargets([...bytes('/ip4/192.168.1.5/tcp/1/p2p-circuit', '/ip4/192.168.1.5/udp/9'), new Uint8Array([1, 2, 3])], from), []);
  assert.equal(dialTargets(bytes(...Array.from({ length: 10 }, (_, i) => `/ip4/10.0.0.1/tcp/${1000 + (i % 6)}`)), from).length, 4);
  // A request over a relayed connection has no IP to dial.
  assert.deepEqual(dialTargets(bytes('/ip4/203.0.113.7/tcp/4001'), multiaddr('/p2p-circuit')), []);
});

test('reachability config: auto by default, client mode is private, contradictions and unknown modes are refused; mDNS off by default', () => {
  const base = { runId: 'r' };
  assert.deepEqual(pick(resolveSwarmInit(base)), { reachability: 'auto', relayServer: true, mdns: false, listen: ['/ip4/0.0.0.0/tcp/0'] });
  assert.deepEqual(pick(resolveSwarmInit({ ...base, clientMode: true })), { reachability: 'private', relayServer: false, mdns: false, listen: [] });
  assert.deepEqual(pick(resolveSwarmInit({ ...base, reachability: 'public', mdns: true })), { reachability: 'public', relayServer: true, mdns: true, listen: ['/ip4/0.0.0.0/tcp/0'] });
  assert.throws(() => resolveSwarmInit({ ...base, clientMode: true, reachability: 'public' }), /client mode contradicts reachability "public"/);
  assert.throws(() => resolveSwarmInit({ ...base, reachability: 'maybe' as 'auto' }), /reachability "maybe" is invalid; accepted: auto, public, private/);
  // mDNS service tags are per run and valid DNS labels whatever the run id holds.
  assert.notEqual(mdnsServiceTag('run-a'), mdnsServiceTag('run-b'));
  assert.match(mdnsServiceTag('a.b_c'), /^_cohort-[0-9a-f]{16}\._udp\.local$/);
});

function pick(cfg: ReturnType<typeof resolveSwarmInit>): object {
  return { reachability: cfg.reachability, relayServer: cfg.relayServer, mdns: cfg.mdns, listen: cfg.listen };
}
