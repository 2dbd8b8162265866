import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import net, { type AddressInfo } from 'node:net';
import { test } from 'node:test';
import { generateKeyPair } from '@libp2p/crypto/keys';
import { peerIdFromPrivateKey } from '@libp2p/peer-id';
import { multiaddr } from '@multiformats/multiaddr';
import { buildProgram } from '../../src/cli/program.js';
import { electronBinary } from '../../src/doctor/electron.js';
import { openStore } from '../../src/store/index.js';
import { encodeJoinCode } from '../../src/swarm/join-code.js';
import { CLI, cohortInProcess, runCli } from '../helpers/cli.js';
import { waitFor } from '../helpers/swarm.js';
import { tmpDir } from '../helpers/tmp.js';

const { version } = createRequire(import.meta.url)('../../package.json') as { version: string };

test('--version prints the package version', async () => {
  const r = await runCli(['--version']);
  assert.equal(r.code, 0);
  assert.equal(r.stdout.trim(), version);
});

test('--help works for the program and every command', async () => {
  const top = await runCli(['--help']);
  assert.equal(top.code, 0);
  const commands = [...top.stdout.matchAll(/^ {2}(\w[\w-]*)(?: \[options\])?/gm)].map((m) => m[1]!).filter((c) => c !== 'help');
  assert.ok(commands.includes('doctor') && commands.includes('start'), `commands listed: ${commands.join(', ')}`);
  for (const c of commands) {
    const r = await runCli([c, '--help']);
    assert.equal(r.code, 0, `${c} --help`);
    assert.match(r.stdout, new RegExp(`Usage: cohort ${c}`));
  }
});

test('an unknown flag exits 2 and names the flag', async () => {
  const r = await runCli(['doctor', '--no-such-flag']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /unknown option '--no-such-flag'/);
});

test('a bad flag value exits 2 and lists the accepted values', async () => {
  const r = await runCli(['doctor', '--log-format', 'xml']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /--log-format: invalid value "xml".*accepted: pretty, json/);
});

test('a bad environment value exits 2 and names the variable', async () => {
  const r = await runCli(['doctor'], { env: { COHORT_LOG_LEVEL: 'chatty' } });
  assert.equal(r.code, 2);
  assert.match(r.stderr, /COHORT_LOG_LEVEL: invalid value "chatty"/);
});

test('doctor reports Electron, onnxruntime providers (CPU, CUDA, WebGPU), SQLite and the data dir, and exits 0', async (t) => {
  const dataDir = tmpDir(t);
  const r = await runCli(['doctor', '--json', '--data-dir', dataDir], { timeoutMs: 120_000 });
  assert.equal(r.code, 0, r.stderr);
  const report = JSON.parse(r.stdout) as { ok: boolean; checks: Array<{ name: string; status: string; detail: string }> };
  const byName = new Map(report.checks.map((c) => [c.name, c]));
  assert.equal(report.ok, true);
  assert.equal(byName.get('onnxruntime-node')?.status, 'ok');
  assert.match(byName.get('onnxruntime-node')!.detail, /CPU execution provider loads/);
  assert.equal(byName.get('SQLite')?.status, 'ok');
  assert.equal(byName.get('Data directory')?.status, 'ok');
  assert.ok(byName.get('Data directory')!.detail.startsWith(dataDir));

  assert.equal(byName.get('Electron')?.status, electronBinary().found ? 'ok' : 'missing');
  // the CUDA provider check must say what happened, whichever way it went
  const cuda = byName.get('CUDA provider');
  assert.ok(cuda && (cuda.status === 'ok' || /does not load: \S/.test(cuda.detail)), JSON.stringify(cuda));
  const webgpu = byName.get('WebGPU provider');
  assert.ok(webgpu && (webgpu.status === 'ok' || /does not load: \S/.test(webgpu.detail)), JSON.stringify(webgpu));
});

test('doctor --gpu adds the CUDA training step: where there is no CUDA provider it says so and still exits 0', async (t) => {
  const r = await runCli(['doctor', '--json', '--gpu', '--data-dir', tmpDir(t)], { timeoutMs: 120_000 });
  const report = JSON.parse(r.stdout) as { ok: boolean; checks: Array<{ name: string; status: string; detail: string }> };
  const step = report.checks.find((c) => c.name === 'CUDA training step');
  const cuda = report.checks.find((c) => c.name === 'CUDA provider');
  if (cuda?.status === 'ok') {
    // on a GPU machine the step must run and match the CPU
    assert.equal(step?.status, 'ok', JSON.stringify(step));
    assert.match(step.detail, /matches the CPU \(tolerance: loss 0\.002, each gradient tensor 0\.01 relative\); fp32: .*; fp16: /);
  } else {
    assert.equal(step?.status, 'missing', JSON.stringify(step));
    assert.match(step.detail, /^not run: no CUDA provider here \(\S/);
    assert.equal(r.code, 0, r.stderr);
  }
  const plain = await runCli(['doctor', '--json', '--data-dir', tmpDir(t)], { timeoutMs: 120_000 });
  assert.ok(!(JSON.parse(plain.stdout) as typeof report).checks.some((c) => c.name === 'CUDA training step'), 'the step runs only with --gpu');
});

test('doctor reports an unreachable peer without failing', async (t) => {
  const r = await runCli(['doctor', '--json', '--data-dir', tmpDir(t), '--initial-peers', '/ip4/127.0.0.1/tcp/9/p2p/x'], { timeoutMs: 120_000 });
  assert.equal(r.code, 0, r.stderr);
  const report = JSON.parse(r.stdout) as { checks: Array<{ name: string; status: string; detail: string }> };
  const peer = report.checks.find((c) => c.name.startsWith('Peer '));
  assert.equal(peer?.status, 'warn');
  assert.match(peer.detail, /unreachable/);
});

test('doctor --initial-peers with a join code checks the peers the code holds; a damaged code is named', async (t) => {
  const server = net.createServer((socket) => socket.destroy());
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => server.close());
  const { port } = server.address() as AddressInfo;
  const peer = peerIdFromPrivateKey(await generateKeyPair('Ed25519'));
  const code = encodeJoinCode({ runId: 'doctor-run', bootstrap: [multiaddr(`/ip4/127.0.0.1/tcp/${port}/p2p/${peer.toString()}`)] });
  const r = await runCli(['doctor', '--json', '--data-dir', tmpDir(t), '--initial-peers', code], { timeoutMs: 120_000 });
  assert.equal(r.code, 0, r.stderr);
  const report = JSON.parse(r.stdout) as { checks: Array<{ name: string; status: string; detail: string }> };
  const peers = report.checks.filter((c) => c.name.startsWith('Peer '));
  assert.deepEqual(peers.map((c) => [c.name, c.status, c.detail]), [[`Peer /ip4/127.0.0.1/tcp/${port}/p2p/${peer.toString()}`, 'ok', `TCP 127.0.0.1:${port} reachable`]]);

  const damaged = await runCli(['doctor', '--json', '--data-dir', tmpDir(t), '--initial-peers', code.slice(0, 20)], { timeoutMs: 120_000 });
  assert.equal(damaged.code, 0, damaged.stderr);
  const bad = (JSON.parse(damaged.stdout) as typeof report).checks.find((c) => c.name === 'Join code');
  assert.equal(bad?.status, 'warn');
  assert.match(bad.detail, /join code/);
});

test('an expected failure is one line saying what to do, exit 1, no stack: a swarm whose peers are gone or hung (within --wait), nothing to export, a bad identity file', async (t) => {
  const dir = tmpDir(t);
  const noStack = (r: { code: number; stderr: string }, line: RegExp) => {
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, line);
    assert.doesNotMatch(r.stderr, /\n\s+at /);
  };
  // a valid join code whose one peer is no longer listening (port 9: nothing listens on it)
  const peer = peerIdFromPrivateKey(await generateKeyPair('Ed25519'));
  const gone = encodeJoinCode({ runId: 'gone-run', bootstrap: [multiaddr(`/ip4/127.0.0.1/tcp/9/p2p/${peer.toString()}`)] });
  noStack(await cohortInProcess(['status', '--join', gone, '--wait', '1']), /cohort: could not reach any peer of the join code's swarm "gone-run" within 1 s \(--wait; .*\): check that the peer which printed the code is still running\n/);
  // waiting out the bootstrap's attempts: its error says what failed, and not that this client, which accepts no connection, can be joined
  const waited = await cohortInProcess(['status', '--join', gone, '--wait', '60']);
  noStack(waited, /none of the 1 initial peer\(s\) answered after \d+ attempts each/);
  assert.doesNotMatch(waited.stderr, /can be joined by others/);
  // a peer that accepts connections and never answers (a hung process): the bootstrap alone would retry for half a minute
  const silent = net.createServer(() => {});
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  t.after(() => silent.close());
  const hung = encodeJoinCode({ runId: 'hung-run', bootstrap: [multiaddr(`/ip4/127.0.0.1/tcp/${(silent.address() as AddressInfo).port}/p2p/${peer.toString()}`)] });
  noStack(await cohortInProcess(['status', '--join', hung, '--wait', '1']), /cohort: could not reach any peer of the join code's swarm "hung-run" within 1 s /);

  openStore(dir).close();
  noStack(await cohortInProcess(['model', 'export', '--data-dir', dir, '--out', `${dir}/export`]), /cohort: no model checkpoint in \S+checkpoints\.db\n/);

  const key = `${dir}/bad.key`;
  fs.writeFileSync(key, '{"not": "a key"}');
  noStack(await cohortInProcess(['swarm', 'start', '--run-id', 'bad-key', '--data-dir', dir, '--identity', key, '--host-maddrs', '/ip4/127.0.0.1/tcp/0']), /cohort: --identity \S+bad\.key: not a libp2p private key/);
});

test('a port another program holds is one line naming it, exit 1, no stack: the swarm’s --listen, the metrics port, the dashboard port', async (t) => {
  const dir = tmpDir(t);
  const taken = net.createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  t.after(() => taken.close());
  const port = (taken.address() as AddressInfo).port;
  const cases: Array<[string[], string]> = [
    [['run', '--coordinator', '--listen', `/ip4/127.0.0.1/tcp/${port}`], `cohort: cannot listen on /ip4/127.0.0.1/tcp/${port} (listen EADDRINUSE: address already in use 127.0.0.1:${port}): another program or Cohort node may hold the port`],
    [['swarm', 'start', '--run-id', 'taken', '--host-maddrs', '/ip4/127.0.0.1/tcp/0', '--metrics-port', String(port)], `cohort: the metrics server cannot listen on 127.0.0.1:${port}: listen EADDRINUSE`],
    [['start', '--dashboard-port', String(port), '--training', 'off'], `cohort: dashboard cannot listen on 127.0.0.1:${port}: listen EADDRINUSE`],
  ];
  for (const [args, line] of cases) {
    const r = await runCli([...args, '--data-dir', dir, '--log-level', 'error']);
    assert.equal(r.code, 1, `${args[0]}: ${r.stderr}`);
    assert.ok(r.stderr.startsWith(line), `${args[0]}: ${r.stderr}`);
    assert.doesNotMatch(r.stderr, /\n\s+at /, args[0]);
  }
});

test('a reader that closes stdout (`cohort run … | grep -m1 cohort:`) leaves the node running; it stops on SIGTERM, exit 0', async (t) => {
  const child = spawn(process.execPath, [CLI, 'run', '--coordinator', '--run-id', 'closed-stdout', '--listen', '/ip4/127.0.0.1/tcp/0', '--data-dir', tmpDir(t)], { stdio: ['ignore', 'pipe', 'pipe'] });
  t.after(() => child.kill('SIGKILL'));
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  await once(child.stdout, 'data');
  child.stdout.destroy();
  // the run record is resolved after the addresses are printed: it runs on with its stdout gone
  await waitFor('the coordinator to found its run', () => /founding run "closed-stdout"/.test(stderr) || child.exitCode !== null, 60_000);
  child.kill('SIGTERM');
  const [code] = (await once(child, 'close')) as [number | null];
  assert.equal(code, 0, stderr);
  assert.doesNotMatch(stderr, /EPIPE/);
});

test('a data directory a newer Cohort wrote: `run` and `start` exit 1 with one line saying to upgrade Cohort or use another --data-dir, and --move-aside leaves it where it is', async (t) => {
  const dir = tmpDir(t);
  const store = openStore(dir);
  const newer = (store.db.pragma('user_version', { simple: true }) as number) + 1;
  store.db.pragma(`user_version = ${newer}`);
  store.close();
  for (const args of [['run'], ['run', '--move-aside'], ['start', '--move-aside']]) {
    const r = await cohortInProcess([...args, '--data-dir', dir]);
    assert.equal(r.code, 1, r.stderr);
    assert.equal(r.stderr, `cohort: ${dir}/cohort.db has schema version ${newer}, newer than this Cohort understands (${newer - 1}); it was left untouched. Upgrade Cohort to use it, or use another --data-dir.\n`, args.join(' '));
  }
  assert.deepEqual(fs.readdirSync(dir).filter((f) => f.includes('.moved-')), []);
});

test('--move-aside, which the message about a damaged database names, is a flag of every command that opens the store, and moves the file aside', async (t) => {
  const program = buildProgram();
  const command = (names: readonly string[]) => names.reduce((c, name) => c.commands.find((s) => s.name() === name)!, program);
  for (const names of [['start'], ['run'], ['train'], ['swarm', 'start'], ['data', 'prepare'], ['data', 'stats'], ['data', 'sample']]) {
    assert.ok(command(names).options.some((o) => o.long === '--move-aside'), `cohort ${names.join(' ')} lacks --move-aside`);
  }
  const dir = tmpDir(t);
  const garbage = 'not a database '.repeat(100);
  fs.writeFileSync(`${dir}/cohort.db`, garbage);
  const refused = await cohortInProcess(['data', 'stats', '--data-dir', dir]);
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /not a readable Cohort database .*Pass --move-aside/);
  // commands that only read (exports) take no --move-aside, and their message does not offer it
  for (const args of [['metrics', 'export'], ['model', 'export', '--out', `${dir}/exported`]]) {
    const exported = await cohortInProcess([...args, '--data-dir', dir]);
    assert.equal(exported.code, 1, exported.stderr);
    assert.match(exported.stderr, /not a readable Cohort database .*left untouched: restore it from a backup/);
    assert.doesNotMatch(exported.stderr, /move-aside/);
  }
  const moved = await cohortInProcess(['data', 'stats', '--data-dir', dir, '--move-aside']);
  assert.equal(moved.code, 0, moved.stderr);
  // what was wrong and where it went, not the advice to pass the flag just passed
  assert.match(moved.stderr, /moved the unreadable database aside to \S+cohort\.db\.moved-\S+: \S+ is not a readable Cohort database/);
  assert.doesNotMatch(moved.stderr, /Pass --move-aside/);
  const aside = fs.readdirSync(dir).filter((f) => f.startsWith('cohort.db.moved-'));
  assert.deepEqual(aside.map((f) => fs.readFileSync(`${dir}/${f}`, 'utf8')), [garbage]);
});

test('an in-process command reports its own exit code, not the one the test runner set after an earlier failing test', async (t) => {
  const dir = tmpDir(t);
  const before = process.exitCode;
  // what node:test sets once any test of this file failed: every later in-process command read as failed
  process.exitCode = 1;
  try {
    const ok = await cohortInProcess(['data', 'stats', '--data-dir', dir]);
    assert.equal(ok.code, 0, ok.stderr);
    // doctor's own failure still exits 1 (a data directory under a file cannot be written)
    fs.writeFileSync(`${dir}/file`, '');
    const failed = await cohortInProcess(['doctor', '--json', '--data-dir', `${dir}/file/sub`]);
    assert.equal(failed.code, 1, failed.stderr);
  } finally {
    process.exitCode = before;
  }
});
