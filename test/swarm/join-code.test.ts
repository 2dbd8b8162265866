import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { multiaddr } from '@multiformats/multiaddr';
import { resolveSwarmInit } from '../../src/swarm/config.js';
import { JoinCodeError, cohortProtocol, decodeJoinCode, encodeJoinCode, generatePsk, isJoinCode, kadProtocol } from '../../src/swarm/index.js';

const PEER = '12D3KooWDhgHNEpmtGWPq3nXBZLSxAMwHF82uXYFP7tG3m3c8iGK';
const ADDRS = [multiaddr(`/ip4/203.0.113.5/tcp/31337/p2p/${PEER}`), multiaddr(`/ip6/2001:db8::1/tcp/4001/p2p/${PEER}`)];

test('a join code round-trips run id, bootstrap addresses and PSK', () => {
  const psk = generatePsk();
  const code = encodeJoinCode({ runId: 'albert-large.v2', bootstrap: ADDRS, psk });
  assert.ok(isJoinCode(code));
  assert.match(code, /^cohort:[A-Za-z0-9_-]+$/);
  const back = decodeJoinCode(`  ${code}\n`);
  assert.equal(back.runId, 'albert-large.v2');
  assert.deepEqual(back.bootstrap.map(String), ADDRS.map(String));
  assert.deepEqual(back.psk, psk);
  const open = decodeJoinCode(encodeJoinCode({ runId: 'r1', bootstrap: ADDRS.slice(0, 1) }));
  assert.equal(open.psk, undefined);
});

test('malformed join codes are refused with a message saying what is wrong', () => {
  const code = encodeJoinCode({ runId: 'r1', bootstrap: ADDRS });
  const body = code.slice('cohort:'.length);
  const flipped = body.slice(0, 10) + (body[10] === 'A' ? 'B' : 'A') + body.slice(11);
  const cases: Array<[string, RegExp]> = [
    ['/ip4/1.2.3.4/tcp/1', /must start with "cohort:"/],
    ['cohort:abc$def', /outside base64url/],
    ['cohort:', /^join code has nothing after "cohort:"; was it copied whole\?$/],
    ['cohort:AA', /too short/],
    [`cohort:${body.slice(0, -6)}`, /checksum/],
    [`cohort:${flipped}`, /checksum/],
    [versioned(body, 9), /version 9 is not supported/],
  ];
  for (const [bad, message] of cases) {
    assert.throws(() => decodeJoinCode(bad), (err: unknown) => err instanceof JoinCodeError && message.test(err.message), bad);
  }
  assert.throws(() => encodeJoinCode({ runId: 'r1', bootstrap: [multiaddr('/ip4/1.2.3.4/tcp/1')] }), /lacks its \/p2p/);
  assert.throws(() => encodeJoinCode({ runId: 'Bad Run', bootstrap: ADDRS }), /run id/);
});

test('initial peers accept a join code, which supplies run id and PSK', () => {
  const psk = generatePsk();
  const code = encodeJoinCode({ runId: 'from-code', bootstrap: ADDRS, psk });
  const cfg = resolveSwarmInit({ initialPeers: [code] });
  assert.equal(cfg.runId, 'from-code');
  assert.deepEqual(cfg.psk, psk);
  assert.deepEqual(cfg.initialPeers.map(String), ADDRS.map(String));
  assert.throws(() => resolveSwarmInit({ runId: 'other', initialPeers: code }), /differs from the join code/);
  assert.throws(() => resolveSwarmInit({ runId: 'r', initialPeers: ['/ip4/1.2.3.4/tcp/1'] }), /lacks \/p2p/);
  assert.throws(() => resolveSwarmInit({ runId: 'r', initialPeers: ['not-an-addr'] }), /is not a multiaddr/);
  assert.throws(() => resolveSwarmInit({}), /no run id/);
});

test('protocol ids are namespaced by run id', () => {
  assert.equal(kadProtocol('run-a'), '/cohort/run-a/kad/1.0.0');
  assert.equal(cohortProtocol('run-a', 'allreduce/1.0.0'), '/cohort/run-a/allreduce/1.0.0');
  assert.throws(() => cohortProtocol('run-a', 'allreduce'), /ending in a version/);
  assert.throws(() => cohortProtocol('run-a', 'records/1.0.0'), /reserved/);
  assert.throws(() => kadProtocol('../x'), /run id/);
});

/** Re-encodes a code's body with another version byte and a correct checksum. */
function versioned(body: string, version: number): string {
  const raw = Buffer.from(body, 'base64url');
  const inner = Buffer.from(raw.subarray(0, raw.length - 4));
  inner[0] = version;
  const sum = createHash('sha256').update(inner).digest().subarray(0, 4);
  return 'cohort:' + Buffer.concat([inner, sum]).toString('base64url');
}
