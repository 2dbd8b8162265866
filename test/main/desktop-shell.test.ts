import assert from 'node:assert/strict';
import fs from 'node:fs';
import BetterSqlite3 from 'better-sqlite3';
import { fork } from 'node:child_process';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import { multiaddr } from '@multiformats/multiaddr';
import { DesktopShell, type DesktopPlatform } from '../../src/main/desktop-shell.js';
import { linkFromArgv } from '../../src/main/links.js';
import { POWER_SETTLE_MS } from '../../src/main/policy.js';
import { runtimeClient, serveRuntime, type FromRuntime, type RuntimeClient } from '../../src/main/runtime-rpc.js';
import { RuntimeSupervisor, type RuntimeProcess, type SpawnOptions } from '../../src/main/runtime-supervisor.js';
import { encodeJoinCode } from '../../src/swarm/index.js';
import type { TrainingEvent } from '../../src/training/events.js';
import type { TrainingService } from '../../src/training/service.js';
import { ROOT } from '../helpers/cli.js';
import { waitFor } from '../helpers/swarm.js';
import type { TrayModel } from '../../src/main/tray-model.js';
import { createLogger } from '../../src/log/logger.js';
import { dispatch } from '../../src/node/api-dispatch.js';
import { NodeController } from '../../src/node/controller.js';
import type { Snapshot, SwarmDescription } from '../../src/shared/api.js';
import { DATABASE_FILE, openStore, type Store } from '../../src/store/index.js';
import { MIGRATIONS } from '../../src/store/migrations.js';
import { logDirOf } from '../../src/log/log-file.js';
import { tmpDir } from '../helpers/tmp.js';

function port<In, Out>(p: MessagePort) {
  return { postMessage: (m: Out) => p.postMessage(m), onMessage: (l: (m: In) => void) => p.on('message', l) };
}

/** A real controller on a real store, reached the way Electron main reaches the utility process: over a message port. */
function runtime(t: TestContext, dataDir = tmpDir(t), training?: TrainingService): { client: RuntimeClient; controller: NodeController } {
  const store = openStore(dataDir);
  const controller = new NodeController({ store, log: createLogger({ logLevel: 'silent', logFormat: 'json' }), version: '1', refreshMs: 60_000, logDir: path.join(dataDir, 'logs'), ...(training ? { training } : {}) });
  const { port1, port2 } = new MessageChannel();
  serveRuntime(port(port2), controller, dispatch);
  const client = runtimeClient(port(port1));
  t.after(async () => {
    port1.close();
    port2.close();
    await controller.close();
    store.close();
  });
  return { client, controller };
}

class FakePlatform implements DesktopPlatform {
  trays: TrayModel[] = [];
  notices: string[] = [];
  openAtLogin: boolean[] = [];
  snapshots: Snapshot[] = [];
  shown = 0;
  hidden = 0;
  quits = 0;
  machine = { onBattery: false, idleSeconds: 0, localHour: 12 };
  keepAwake: boolean[] = [];
  asked: SwarmDescription[] = [];
  answer = true;
  folders: string[] = [];
  connection: Array<{ connected: boolean; detail?: string | undefined; canMoveAside?: true }> = [];
  clock = 1_000_000;
  now() {
    return this.clock;
  }
  renderTray(model: TrayModel) {
    this.trays.push(model);
  }
  showWindow() {
    this.shown++;
  }
  hideWindow() {
    this.hidden++;
  }
  notify(title: string, body: string) {
    this.notices.push(`${title}: ${body}`);
  }
  setOpenAtLogin(enabled: boolean) {
    this.openAtLogin.push(enabled);
  }
  machineState() {
    return this.machine;
  }
  quit() {
    this.quits++;
  }
  sendSnapshot(s: Snapshot) {
    this.snapshots.push(s);
  }
  setKeepAwake(enabled: boolean) {
    this.keepAwake.push(enabled);
  }
  async confirmJoin(swarm: SwarmDescription) {
    this.asked.push(swarm);
    return this.answer;
  }
  openFolder(dir: string) {
    this.folders.push(dir);
  }
  sendConnection(connected: boolean, detail?: string, canMoveAside?: boolean) {
    this.connection.push({ connected, detail, ...(canMoveAside ? { canMoveAside } : {}) });
  }
}

/** A training service that only starts, pauses and stops itself when told. */
class FakeTraining implements TrainingService {
  private listener: ((e: TrainingEvent) => void) | undefined;
  configure() {}
  async start() {}
  async pause() {}
  subscribe(listener: (e: TrainingEvent) => void) {
    this.listener = listener;
    return () => (this.listener = undefined);
  }
  halt(cause: 'memory' | 'error', reason: string) {
    this.listener?.({ type: 'halted', cause, reason, at: Date.now() });
  }
}

const PEER = '12D3KooWDhgHNEpmtGWPq3nXBZLSxAMwHF82uXYFP7tG3m3c8iGK';
const CODE = encodeJoinCode({ runId: 'linked-run', bootstrap: [multiaddr(`/ip4/203.0.113.5/tcp/31337/p2p/${PEER}`)] });

/** Resolves once `predicate` holds, polling the event loop (bounded). */
async function until(predicate: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 200 && !(await predicate()); i++) await new Promise((r) => setTimeout(r, 5));
  assert.ok(await predicate(), `timed out waiting for ${what}`);
}

/** A shell over a real runtime controller, contributing. */
async function contributingShell(t: TestContext): Promise<{ controller: NodeController; platform: FakePlatform; shell: DesktopShell }> {
  const { client, controller } = runtime(t);
  const platform = new FakePlatform();
  const shell = new DesktopShell(platform, client);
  t.after(() => shell.dispose());
  await shell.start();
  await client.startContribution();
  return { controller, platform, shell };
}

test('the tray toggles contribution through the runtime and shows the new state', async (t) => {
  const { client } = runtime(t);
  const platform = new FakePlatform();
  const shell = new DesktopShell(platform, client);
  t.after(() => shell.dispose());
  await shell.start();
  assert.match(platform.trays.at(-1)!.tooltip, /Not started/);
  await shell.onTrayAction('toggle');
  await until(() => platform.trays.at(-1)!.icon === 'active', 'the running tray icon');
  assert.equal(platform.snapshots.at(-1)?.contribution.phase, 'running', 'the window gets the snapshot too');
  await shell.onTrayAction('toggle');
  await until(() => /Paused by you/.test(platform.trays.at(-1)!.tooltip), 'the paused tooltip');
  await shell.onTrayAction('open');
  assert.equal(platform.shown, 1);
});

test('closing the window hides it to the tray with a notice the first time only, remembered across restarts', async (t) => {
  const dataDir = tmpDir(t);
  const first = runtime(t, dataDir);
  const platform = new FakePlatform();
  const shell = new DesktopShell(platform, first.client);
  t.after(() => shell.dispose());
  await shell.start();
  assert.equal(shell.onWindowClose(), true, 'close prevented: keeps running in the tray');
  assert.equal(platform.hidden, 1);
  assert.equal(platform.notices.length, 1);
  assert.match(platform.notices[0]!, /still contributing in the tray/);
  assert.equal(shell.onWindowClose(), true);
  assert.equal(platform.notices.length, 1, 'the notice is shown once');
  await until(async () => (await first.client.getSettings()).trayNoticeShown, 'the notice flag to be stored');

  shell.requestQuit();
  assert.equal(platform.quits, 1);
  assert.equal(shell.onWindowClose(), false, 'when quitting the window really closes');

  await first.controller.close();
  const second = runtime(t, dataDir);
  const platform2 = new FakePlatform();
  const shell2 = new DesktopShell(platform2, second.client);
  t.after(() => shell2.dispose());
  await shell2.start();
  shell2.onWindowClose();
  assert.equal(platform2.notices.length, 0, 'not shown again after a restart');
});

test('start at login follows the stored setting, changed through the window', async (t) => {
  const { client } = runtime(t);
  const platform = new FakePlatform();
  const shell = new DesktopShell(platform, client);
  t.after(() => shell.dispose());
  await shell.start();
  assert.deepEqual(platform.openAtLogin, [false]);
  const r = (await shell.call('updateSettings', { startAtLogin: true })) as { ok: boolean };
  assert.equal(r.ok, true);
  assert.deepEqual(platform.openAtLogin, [false, true]);
  await shell.call('updateSettings', { displayName: 'x' });
  assert.deepEqual(platform.openAtLogin, [false, true], 'unchanged setting: not applied again');
  await assert.rejects(shell.call('updateSettings', { startAtLogin: 'yes' }), /startAtLogin/);
  await assert.rejects(shell.call('deleteEverything', {}), /unknown API method/);
});

test('battery policy ticks hold a running node and release it on mains', async (t) => {
  const { controller, platform, shell } = await contributingShell(t);
  platform.machine = { onBattery: true, idleSeconds: 0, localHour: 12 };
  shell.tickPolicy(0);
  shell.tickPolicy(POWER_SETTLE_MS);
  await until(async () => (await controller.getSnapshot()).contribution.phase === 'waiting', 'the hold to reach the runtime');
  await until(() => platform.trays.at(-1)!.tooltip.includes('battery'), 'the tray to say why');
  platform.machine = { onBattery: false, idleSeconds: 0, localHour: 12 };
  shell.tickPolicy(POWER_SETTLE_MS + 1);
  shell.tickPolicy(2 * POWER_SETTLE_MS + 1);
  await until(async () => (await controller.getSnapshot()).contribution.phase === 'running', 'the release');
});

test('battery, idle, schedule and keep-awake apply as they are saved, not at the next policy tick or Start', async (t) => {
  const { controller, platform, shell } = await contributingShell(t);
  await until(() => platform.keepAwake.at(-1) === true, 'keep-awake while contributing');
  // it is noon: a schedule of 01:00–02:00 holds contribution as soon as it is saved (no tick runs here)
  await shell.call('updateSettings', { policies: { scheduleEnabled: true, scheduleFromHour: 1, scheduleToHour: 2 } });
  await until(async () => (await controller.getSnapshot()).contribution.phase === 'waiting', 'the schedule to hold contribution');
  await shell.call('updateSettings', { policies: { scheduleEnabled: false } });
  await until(async () => (await controller.getSnapshot()).contribution.phase === 'running', 'the release');
  await shell.call('updateSettings', { policies: { keepAwake: false } });
  assert.equal(platform.keepAwake.at(-1), false, 'keep-awake off as saved');
});

test('a snooze from the tray holds contribution and lifts by itself; Pause or Start ends it early', async (t) => {
  const { controller, platform, shell } = await contributingShell(t);
  await until(() => platform.trays.at(-1)!.items.some((i) => i.kind === 'action' && typeof i.action === 'object'), 'snooze items while running');
  await shell.onTrayAction({ snooze: 15 });
  await until(async () => (await controller.getSnapshot()).contribution.detail.startsWith('waiting: snoozed until'), 'the snooze hold');
  platform.clock += 14 * 60_000;
  shell.tickPolicy(platform.clock);
  assert.equal((await controller.getSnapshot()).contribution.phase, 'waiting', 'still snoozed after 14 minutes');
  platform.clock += 60_000;
  shell.tickPolicy(platform.clock);
  await until(async () => (await controller.getSnapshot()).contribution.phase === 'running', 'the snooze to lift after 15 minutes');

  await shell.onTrayAction({ snooze: 60 });
  await until(async () => (await controller.getSnapshot()).contribution.phase === 'waiting', 'a second snooze');
  await shell.onTrayAction('toggle'); // Pause while snoozed: paused, and the snooze is gone
  await until(async () => (await controller.getSnapshot()).contribution.phase === 'paused', 'the pause');
  await shell.onTrayAction('toggle');
  await until(async () => (await controller.getSnapshot()).contribution.phase === 'running', 'Start runs at once, not after the snooze');
});

test('a cohort: link from the launch argv or a second instance reaches the confirm dialog; yes joins and starts, no changes nothing', async (t) => {
  const { client, controller } = runtime(t);
  const platform = new FakePlatform();
  const shell = new DesktopShell(platform, client);
  t.after(() => shell.dispose());
  await shell.start();

  // how Windows and Linux hand over a link: somewhere in argv, maybe as cohort://CODE/
  const argv = ['/opt/Cohort/cohort', '--no-sandbox', CODE.replace('cohort:', 'cohort://') + '/'];
  assert.equal(linkFromArgv(argv), CODE);
  assert.equal(linkFromArgv(['/opt/Cohort/cohort', '--started-at-login']), undefined);

  platform.answer = false;
  await shell.openLink(linkFromArgv(argv)!);
  assert.deepEqual(platform.asked, [{ runId: 'linked-run', peers: [`/ip4/203.0.113.5/tcp/31337/p2p/${PEER}`], closed: false }]);
  assert.equal((await controller.getSettings()).joinCode, '', 'declined: the join code is unchanged');
  assert.equal((await controller.getSnapshot()).contribution.phase, 'stopped', 'declined: nothing started');

  platform.answer = true;
  await shell.onSecondInstance(argv);
  assert.equal(platform.asked.length, 2, 'the second instance asked too');
  assert.equal((await controller.getSettings()).joinCode, CODE);
  assert.equal((await controller.getSnapshot()).contribution.phase, 'running');
  assert.ok(platform.shown >= 2, 'the window is shown with the question');

  // a damaged link never reaches the dialog: the notification says what is wrong
  await shell.onSecondInstance(['/opt/Cohort/cohort', CODE.slice(0, -3)]);
  assert.equal(platform.asked.length, 2);
  assert.match(platform.notices.at(-1) ?? '', /^Cohort cannot open this link: join code checksum does not match/);
  // a second instance without a link just shows the window
  const shown = platform.shown;
  await shell.onSecondInstance(['/opt/Cohort/cohort']);
  assert.equal(platform.shown, shown + 1);
});

test('training that stops by itself is told apart: halted at the memory limit, error, each with its tray line and one notification; keep-awake follows running', async (t) => {
  const training = new FakeTraining();
  const { client } = runtime(t, tmpDir(t), training);
  const platform = new FakePlatform();
  const shell = new DesktopShell(platform, client);
  t.after(() => shell.dispose());
  await shell.start();
  await client.startContribution();
  await until(() => platform.trays.at(-1)!.icon === 'active', 'running');
  assert.deepEqual(platform.keepAwake, [true], 'kept awake while contributing');

  training.halt('memory', 'memory use 8.0 GiB stayed over the 4.0 GiB limit');
  await until(() => /Halted: memory limit/.test(platform.trays.at(-1)!.tooltip), 'the halted tray line');
  assert.deepEqual(platform.notices, ['Cohort stopped: memory limit: memory use 8.0 GiB stayed over the 4.0 GiB limit. Raise the memory limit in Settings, then press Start.']);
  assert.deepEqual(platform.keepAwake, [true, false], 'the machine may sleep again');
  assert.equal(platform.snapshots.at(-1)?.contribution.phase, 'halted', 'the window gets the halted phase');

  await client.startContribution();
  await until(() => platform.trays.at(-1)!.icon === 'active', 'running again');
  training.halt('error', 'local training stopped: ENOSPC: no space left on device');
  await until(() => /^Cohort — Error: local training stopped: ENOSPC/.test(platform.trays.at(-1)!.tooltip), 'the error tray line');
  assert.equal(platform.notices.length, 2);
  assert.match(platform.notices[1]!, /^Cohort stopped on an error: local training stopped: ENOSPC: no space left on device\. The log has the details/);

  // a pause by the volunteer never notifies; keep-awake switched off stays off while running
  await client.startContribution();
  await until(() => platform.trays.at(-1)!.icon === 'active', 'running a third time');
  await shell.call('updateSettings', { policies: { keepAwake: false } });
  assert.equal(platform.keepAwake.at(-1), false);
  await client.pauseContribution();
  await until(() => /Paused by you/.test(platform.trays.at(-1)!.tooltip), 'paused');
  assert.equal(platform.notices.length, 2);

  await shell.onTrayAction('logs');
  assert.equal(platform.folders.length, 1);
  assert.match(platform.folders[0]!, /logs$/, 'Open log folder opens the runtime’s log folder');
  assert.deepEqual(await shell.call('openLogFolder', undefined), { ok: true, value: null }, 'the window’s button too');
});

/** Starts runtimes in child processes on `dataDir` (test/fixtures/runtime-child.ts), collected in `children`. */
function childRuntimes(dataDir: string, children: ReturnType<typeof fork>[]): (options: SpawnOptions) => RuntimeProcess {
  const fixture = path.join(ROOT, 'test', 'fixtures', 'runtime-child.ts');
  return (options) => {
    const child = fork(fixture, [dataDir, ...(options.moveAside ? ['--move-aside'] : [])], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
    children.push(child);
    return {
      postMessage: (m) => child.connected && child.send(m),
      onMessage: (l) => child.on('message', (m) => l(m as FromRuntime)),
      onExit: (l) => child.on('exit', (code, signal) => l(code ?? (signal ? 128 : 1))),
      kill: () => child.kill(),
    };
  };
}

/** The JSON lines of the runtime's log files in `dataDir` (what the app's "Open log folder" shows). */
function logLines(dataDir: string): Array<Record<string, unknown>> {
  const dir = logDirOf(dataDir);
  return fs.readdirSync(dir).sort().flatMap((f) => fs.readFileSync(path.join(dir, f), 'utf8').split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as Record<string, unknown>));
}

test('a crashed runtime process is restarted with back-off that doubles per crash in a row; the tray and the window say so; state survives', { timeout: 120_000 }, async (t) => {
  const dataDir = tmpDir(t);
  const children: ReturnType<typeof fork>[] = [];
  const spawnChild = childRuntimes(dataDir, children);
  const delays: number[] = [];
  const platform = new FakePlatform();
  const restarted: Array<() => void> = [];
  const supervisor = new RuntimeSupervisor(
    spawnChild,
    {
      onExit: (code, delay) => {
        delays.push(delay);
        shell.onRuntimeExit(code, delay);
      },
      onRestart: () => void shell.start().then(() => restarted.shift()?.()),
      onRefusedDatabase: (database) => assert.fail(`the database is fine: ${database.problem}`),
    },
    { initialMs: 200, maxMs: 5_000, healthyMs: 60_000 },
  );
  const shell = new DesktopShell(platform, supervisor.client); // the hooks above run only after this
  t.after(() => {
    supervisor.stop();
    shell.dispose();
  });
  supervisor.start();
  await shell.start();
  await supervisor.client.startContribution();
  await until(() => platform.snapshots.at(-1)?.contribution.phase === 'running', 'running before the crash');

  const back = () => new Promise<void>((resolve) => restarted.push(resolve));
  let up = back();
  children.at(-1)!.kill('SIGKILL');
  await until(() => delays.length === 1, 'the exit to be seen');
  assert.match(platform.trays.at(-1)!.tooltip, /Node runtime stopped \(exit code 128\); restarting in 1 s/);
  assert.deepEqual(platform.connection.at(-1), { connected: false, detail: 'Node runtime stopped (exit code 128); restarting in 1 s' });
  assert.match(platform.notices.at(-1) ?? '', /^Cohort’s node runtime stopped/);
  await assert.rejects(supervisor.client.getSnapshot(), /the node runtime is not running \(it is being restarted\)/, 'calls fail at once while it is down');
  await up;
  assert.equal(children.length, 2, 'a new process');
  assert.deepEqual(platform.connection.at(-1), { connected: true, detail: undefined });
  assert.equal((await supervisor.client.getSnapshot()).contribution.phase, 'running', 'the restarted runtime resumes what the volunteer chose');
  // the runtime child runs with --training off: a running node's tray says what it does, not "Contributing"
  assert.match(platform.trays.at(-1)!.tooltip, /^Cohort — Nothing is computed: training is off/);

  up = back();
  children.at(-1)!.kill('SIGKILL');
  await up;
  up = back();
  children.at(-1)!.kill('SIGKILL');
  await up;
  assert.deepEqual(delays, [200, 400, 800], 'each crash in a row waits twice as long');
  assert.equal(platform.notices.filter((n) => n.startsWith('Cohort’s node runtime stopped')).length, 3);
});

/**
 * A supervised runtime in a child process on `dataDir`, whose database it refuses: started, and the
 * window told. `back` resolves once a runtime started later (to move the file aside) answers.
 */
async function refusedRuntime(t: TestContext, dataDir: string) {
  const children: ReturnType<typeof fork>[] = [];
  const platform = new FakePlatform();
  const exits: number[] = [];
  let restarted = () => {};
  const back = new Promise<void>((resolve) => (restarted = resolve));
  const supervisor = new RuntimeSupervisor(
    childRuntimes(dataDir, children),
    {
      onExit: (code, delay) => {
        exits.push(code);
        shell.onRuntimeExit(code, delay);
      },
      onRestart: () => void shell.start().then(restarted, () => undefined),
      onRefusedDatabase: (database) => shell.onRefusedDatabase(database),
    },
    { initialMs: 50, maxMs: 50, healthyMs: 60_000 },
  );
  const shell = new DesktopShell(platform, supervisor.client, () => supervisor.moveDatabaseAside());
  t.after(() => {
    supervisor.stop();
    shell.dispose();
  });
  supervisor.start();
  await assert.rejects(shell.start(), /the node runtime exited/);
  await until(() => platform.connection.length > 0, 'the window to be told');
  return { children, platform, exits, back, supervisor, shell, down: platform.connection.at(-1)! };
}

test('a runtime that cannot open its damaged database is not restarted: the tray, a notification, the window and the log file (once) say why, and the window offers to move it aside, which starts afresh', { timeout: 120_000 }, async (t) => {
  const dataDir = tmpDir(t);
  fs.writeFileSync(path.join(dataDir, DATABASE_FILE), 'not a database '.repeat(1000));
  const { children, platform, exits, back, supervisor, shell, down } = await refusedRuntime(t, dataDir);
  assert.equal(down.canMoveAside, true, 'the window offers to move the file aside');
  assert.match(down.detail ?? '', /^Cohort cannot start: .*cohort\.db is not a readable Cohort database .*It was left untouched: restore it from a backup, or move it aside/);
  assert.match(platform.trays.at(-1)!.tooltip, /cannot open its database/);
  assert.match(platform.notices.join('\n'), /^Cohort cannot open its database: .*cohort\.db is not a readable Cohort database/m);
  assert.deepEqual(exits, [], 'no crash reported, no restart scheduled');
  assert.equal(children.length, 1);
  await shell.onTrayAction('toggle');
  assert.match(platform.notices.at(-1) ?? '', /^Cohort: the node runtime is stopped: .*cohort\.db is not a readable Cohort database/, 'Start from the tray says why it cannot');

  // a window opened later learns it too
  shell.onWindowLoaded();
  assert.deepEqual(platform.connection.at(-1), down);
  assert.equal(fs.readdirSync(dataDir).filter((f) => f.includes('.moved-')).length, 0, 'nothing moved before the volunteer asks');

  assert.deepEqual(await shell.call('moveDatabaseAside', undefined), { ok: true, value: null });
  await back;
  assert.equal(children.length, 2);
  assert.deepEqual(platform.connection.at(-1), { connected: true, detail: undefined });
  assert.equal((await supervisor.client.getSnapshot()).contribution.phase, 'stopped', 'a fresh node');
  assert.equal(fs.readdirSync(dataDir).filter((f) => f.startsWith(`${DATABASE_FILE}.moved-`)).length, 1, 'the damaged file is kept beside the new one');
  assert.deepEqual(await shell.call('moveDatabaseAside', undefined), { ok: false, error: 'this node opened its database: there is nothing to move aside' });
  assert.deepEqual(exits, []);
  // the log file a volunteer attaches to a report: the refusal, with the file and what is wrong, once; then the move
  const refusals = logLines(dataDir).filter((l) => l.level === 50);
  assert.equal(refusals.length, 1, JSON.stringify(refusals));
  assert.equal(refusals[0]!.file, path.join(dataDir, DATABASE_FILE));
  assert.match(String(refusals[0]!.problem), /cohort\.db is not a readable Cohort database \(the file does not start with the SQLite header\)/);
  assert.equal(refusals[0]!.remedy, 'move-aside');
  assert.match(String(refusals[0]!.msg), /^the node runtime stays stopped: .*cohort\.db is not a readable Cohort database/);
  assert.ok(logLines(dataDir).some((l) => /^moved the unreadable database aside to /.test(String(l.msg))), 'the move is logged too');
});

test('a runtime whose database a newer Cohort wrote is not restarted: the tray, a notification, the window and the log file say to upgrade Cohort or use another data directory, and nothing offers to move it aside', { timeout: 120_000 }, async (t) => {
  const dataDir = tmpDir(t);
  const newer = MIGRATIONS.at(-1)!.version + 1;
  const made = openStore(dataDir);
  made.db.pragma(`user_version = ${newer}`);
  made.close();
  const { children, platform, exits, supervisor, shell, down } = await refusedRuntime(t, dataDir);
  assert.match(down.detail ?? '', new RegExp(`^Cohort cannot start: \\S+cohort\\.db has schema version ${newer}, newer than this Cohort understands \\(${newer - 1}\\)\\. A newer version of Cohort wrote it; it was left untouched\\. Upgrade Cohort to go on with it, or start Cohort with COHORT_DATA_DIR set to another folder`));
  assert.equal(down.canMoveAside, undefined, 'no move-aside button: the file is fine, this Cohort is too old');
  assert.deepEqual(exits, [], 'no crash reported, no restart scheduled');
  assert.equal(children.length, 1);
  assert.match(platform.trays.at(-1)!.tooltip, /needs a newer Cohort/);
  assert.match(platform.notices.join('\n'), new RegExp(`^Cohort needs upgrading: \\S+cohort\\.db has schema version ${newer}, .*Upgrade Cohort to open it\\.$`, 'm'));
  shell.onWindowLoaded();
  assert.deepEqual(platform.connection.at(-1), down, 'a window opened later learns it too');

  const refused = await shell.call('moveDatabaseAside', undefined);
  assert.ok(!(refused as { ok: boolean }).ok && /a newer Cohort reads it, so it is not moved aside; upgrade Cohort$/.test((refused as { error: string }).error), JSON.stringify(refused));
  assert.throws(() => supervisor.moveDatabaseAside(), /a newer Cohort reads it, so it is not moved aside/);
  assert.equal(children.length, 1, 'no runtime started to move it');
  assert.deepEqual(fs.readdirSync(dataDir).filter((f) => f.includes('.moved-')), []);
  const check = new BetterSqlite3(path.join(dataDir, DATABASE_FILE), { readonly: true });
  assert.equal(check.pragma('user_version', { simple: true }), newer, 'the file is untouched');
  check.close();

  const refusals = logLines(dataDir).filter((l) => l.level === 50);
  assert.equal(refusals.length, 1, JSON.stringify(refusals));
  assert.deepEqual({ file: refusals[0]!.file, remedy: refusals[0]!.remedy }, { file: path.join(dataDir, DATABASE_FILE), remedy: 'upgrade' });
  assert.match(String(refusals[0]!.problem), new RegExp(`schema version ${newer}, newer than this Cohort understands`));
});

test('a runtime whose data directory another node holds says so and tries again with back-off; it starts once the other node stops', { timeout: 120_000 }, async (t) => {
  const dataDir = tmpDir(t);
  // another node on the same directory: what `cohort run` in a terminal is to the app (same default folder)
  let other: Store | undefined = openStore(dataDir, { exclusive: true });
  t.after(() => other?.close());
  const children: ReturnType<typeof fork>[] = [];
  const platform = new FakePlatform();
  const exits: Array<{ delay: number; why: string | undefined }> = [];
  let restarted = () => {};
  const back = new Promise<void>((resolve) => (restarted = resolve));
  const supervisor = new RuntimeSupervisor(
    childRuntimes(dataDir, children),
    {
      onExit: (code, delay, why) => {
        exits.push({ delay, why });
        shell.onRuntimeExit(code, delay, why);
      },
      onRestart: () => void shell.start().then(restarted, () => undefined),
      onRefusedDatabase: (database) => assert.fail(`a held directory is no refused database: ${database.problem}`),
    },
    { initialMs: 300, maxMs: 1_000, healthyMs: 60_000 },
  );
  const shell = new DesktopShell(platform, supervisor.client);
  t.after(() => {
    supervisor.stop();
    shell.dispose();
  });
  supervisor.start();
  await assert.rejects(shell.start(), /the node runtime could not start: the data directory .* is in use by another Cohort node/);
  await waitFor('two tries', () => exits.length >= 2, 60_000);
  assert.ok(exits.every((e) => /is in use by another Cohort node/.test(e.why ?? '')), JSON.stringify(exits));
  assert.ok(exits[1]!.delay > exits[0]!.delay, 'tries back off');
  assert.match(platform.connection.at(-1)!.detail ?? '', /^Node runtime could not start: the data directory \S+ is in use by another Cohort node .*; trying again in 1 s$/);
  assert.match(platform.trays.at(-1)!.tooltip, /could not start: the data directory/);
  assert.ok(logLines(dataDir).some((l) => l.level === 50 && /could not open its store: the data directory .* is in use/.test(String(l.msg))), 'the log file says why');
  other.close();
  other = undefined;
  await back;
  assert.deepEqual(platform.connection.at(-1), { connected: true, detail: undefined });
  assert.equal((await supervisor.client.getSnapshot()).contribution.phase, 'stopped');
});
