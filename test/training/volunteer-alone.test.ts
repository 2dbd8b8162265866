// Start with the join code of a swarm whose peers are all gone: the node trains on this machine alone
// and tells the dashboard why (the controller turns it into the state's detail); it tries the swarm
// again from time to time and trains with it once it answers.
import assert from 'node:assert/strict';
import net from 'node:net';
import path from 'node:path';
import test from 'node:test';
import { createLogger } from '../../src/log/logger.js';
import { DEFAULT_SETTINGS } from '../../src/shared/settings-schema.js';
import { openStore } from '../../src/store/index.js';
import type { TrainingEvent } from '../../src/training/events.js';
import { SharedSwarm, SwarmCoordinatorRole, VolunteerTraining } from '../../src/training/volunteer.js';
import { preparedDataDirs, spawnCli, waitFor } from '../collab/processes.js';
import { startNode } from '../helpers/swarm.js';
import { tmpDir } from '../helpers/tmp.js';

const log = createLogger({ logLevel: (process.env.TEST_LOG as 'info' | undefined) ?? 'silent', logFormat: 'json' });
const LISTEN = ['/ip4/127.0.0.1/tcp/0'];

test('Start with the join code of a swarm that is gone trains alone and says why; the coordinator switch says at once that it cannot serve that swarm', { timeout: 180_000 }, async (t) => {
  const gone = await startNode(t, { runId: 'gone-run' });
  const code = gone.joinCode();
  await gone.stop();
  const root = tmpDir(t);
  const [dir] = await preparedDataDirs(path.join(root, 'template'), ['node']);
  const store = openStore(dir!);
  const options = { store, log, dataDir: dir!, listen: LISTEN };
  const swarm = new SharedSwarm(options);
  const runtime = new VolunteerTraining(options, swarm);
  t.after(() => runtime.pause().finally(() => store.close()));
  runtime.configure({ policies: { ...DEFAULT_SETTINGS.policies, maxCpuThreads: 1 }, joinCode: code, displayName: '' });
  const events: TrainingEvent[] = [];
  runtime.subscribe((e) => events.push(e));
  await runtime.start();
  const alone = events.filter((e) => e.type === 'alone');
  assert.equal(alone.length, 1);
  assert.match(alone[0]!.type === 'alone' ? alone[0]!.reason : '', /^could not reach any peer of the join code's swarm: \/ip4\/127\.0\.0\.1\/tcp\/\d+\/p2p\/\S+: .*ECONNREFUSED/);

  // not after minutes of looking for the swarm's run record, and holding no swarm node afterwards
  const role = new SwarmCoordinatorRole(options, swarm, () => runtime.target);
  await assert.rejects(role.start(), { message: /^could not reach any peer of the join code's swarm: .*ECONNREFUSED.*\. A coordinator serves the swarm of the join code in Settings: clear the code there to start a swarm of your own$/ });
  assert.equal(swarm.peerId(), null, 'the swarm node was released');
});

test('Start with the join code of a coordinator that is down trains alone, then trains with the swarm once the coordinator is back', { timeout: 180_000 }, async (t) => {
  const root = tmpDir(t);
  const [dir] = await preparedDataDirs(path.join(root, 'template'), ['node']);
  // the coordinator's port and identity (kept in its data directory) stay the same across its restart, so its join code does too
  const port = await freePort();
  const coordinator = ['run', '--coordinator', '--run-id', 'back-run', '--data-dir', path.join(root, 'co'), '--listen', `/ip4/127.0.0.1/tcp/${port}`, '--refresh', '1', '--target-batch-size', '16'];
  const first = spawnCli(t, coordinator);
  const [, code] = await waitFor(first, /cohort run --join (cohort:\S+)/, 60_000);
  await first.stop();

  const store = openStore(dir!);
  const options = { store, log, dataDir: dir!, listen: LISTEN, run: { targetBatchSize: 16 }, optimizer: { matchmakingTime: 1 }, swarmRetryMs: 500 };
  const runtime = new VolunteerTraining(options, new SharedSwarm(options));
  t.after(() => runtime.pause().finally(() => store.close()));
  runtime.configure({ policies: { ...DEFAULT_SETTINGS.policies, maxCpuThreads: 1 }, joinCode: code!, displayName: '' });
  const events: TrainingEvent[] = [];
  runtime.subscribe((e) => events.push(e));
  await runtime.start();
  assert.deepEqual(events.map((e) => e.type).filter((type) => type === 'alone' || type === 'joined'), ['alone'], 'the coordinator is down: Start trains alone');
  assert.match(events[0]?.type === 'alone' ? events[0].reason : '', /ECONNREFUSED.*\(Cohort tries the swarm again from time to time\)$/);

  const back = spawnCli(t, coordinator);
  await waitFor(back, /cohort run --join cohort:/, 60_000);
  const joinedAt = async (): Promise<number> => {
    for (const stop = Date.now() + 90_000; Date.now() < stop; await new Promise((r) => setTimeout(r, 200))) {
      const at = events.findIndex((e) => e.type === 'joined');
      if (at >= 0 && events.slice(at).some((e) => e.type === 'stepped' && !e.alone)) return at;
    }
    return -1;
  };
  const at = await joinedAt();
  assert.ok(at >= 0, `never trained with the swarm once its coordinator was back: ${JSON.stringify(events.filter((e) => e.type !== 'progress').slice(-4))}`);
  assert.deepEqual(events[at], { type: 'joined', runId: 'back-run', at: events[at]!.at });
  assert.equal(events.filter((e) => e.type === 'alone').length, 1, 'one "alone" for the one Start, however many tries it took');
  // Pause saves the peer's state: before the temporary directory goes
  await runtime.pause();
});

/** A TCP port nobody listens on now. */
async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
