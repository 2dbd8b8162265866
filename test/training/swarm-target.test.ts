import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { multiaddr } from '@multiformats/multiaddr';
import { encodeJoinCode, generatePsk } from '../../src/swarm/index.js';
import { DEFAULT_RUN_ID, DEFAULT_SWARM_FILE, defaultSwarmTarget, describeJoinCode, describeSwarm, readDefaultSwarm } from '../../src/training/swarm-target.js';
import { tmpDir } from '../helpers/tmp.js';

const PEER = '12D3KooWDhgHNEpmtGWPq3nXBZLSxAMwHF82uXYFP7tG3m3c8iGK';
const ADDR = `/ip4/203.0.113.5/tcp/31337/p2p/${PEER}`;
const CODE = encodeJoinCode({ runId: 'public-run', bootstrap: [multiaddr(ADDR)] });

test('a join code or multiaddrs describe the swarm they name; a bad one says what is wrong', () => {
  assert.deepEqual(describeSwarm({ initialPeers: [CODE] }), { runId: 'public-run', peers: [ADDR], closed: false });
  assert.equal(describeSwarm({ initialPeers: [encodeJoinCode({ runId: 'closed', bootstrap: [multiaddr(ADDR)], psk: generatePsk() })] }).closed, true);
  assert.deepEqual(describeSwarm({ initialPeers: [ADDR] }), { runId: DEFAULT_RUN_ID, peers: [ADDR], closed: false }, 'multiaddrs alone: the default run id');
  assert.deepEqual(describeSwarm({ initialPeers: [ADDR], runId: 'other' }).runId, 'other');
  assert.throws(() => describeSwarm({ initialPeers: [CODE.slice(0, -2)] }), /checksum does not match/);
  assert.throws(() => describeSwarm({ initialPeers: ['/ip4/203.0.113.5/tcp/1'] }), /lacks \/p2p\/<peer id>/);
  // what a volunteer pastes as a join code must be one: multiaddrs belong to --initial-peers
  assert.deepEqual(describeJoinCode(CODE), { runId: 'public-run', peers: [ADDR], closed: false });
  assert.throws(() => describeJoinCode(ADDR), /^JoinCodeError: join code must start with "cohort:"/);
});

test('the default run: configured initial peers win over the build file; no file means none; a bad file names itself', (t) => {
  const dir = tmpDir(t);
  const file = path.join(dir, 'default-swarm.json');
  assert.equal(readDefaultSwarm(file), undefined, 'absent: no default run');
  assert.equal(defaultSwarmTarget([], file), undefined);
  fs.writeFileSync(file, JSON.stringify({ initialPeers: [CODE] }));
  assert.deepEqual(defaultSwarmTarget([], file), { initialPeers: [CODE] });
  assert.deepEqual(defaultSwarmTarget([ADDR], file), { initialPeers: [ADDR] }, '--initial-peers / COHORT_INITIAL_PEERS / the config file win');
  fs.writeFileSync(file, JSON.stringify({ initialPeers: [] }));
  assert.throws(() => readDefaultSwarm(file), (e: Error) => e.message.includes(file) && /initialPeers: lists no initial peer/.test(e.message));
  fs.writeFileSync(file, JSON.stringify({ initialPeers: ['cohort:nonsense'] }));
  assert.throws(() => readDefaultSwarm(file), /is invalid: join code/);
  fs.writeFileSync(file, '{');
  assert.throws(() => readDefaultSwarm(file), /default-swarm\.json is invalid/);
  // this repository ships no default run: there is no public swarm to join yet
  assert.equal(fs.existsSync(DEFAULT_SWARM_FILE), false);
});
