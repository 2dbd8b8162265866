import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import { DesktopShell, type DesktopPlatform } from '../../src/main/desktop-shell.js';
import { POWER_SETTLE_MS } from '../../src/main/policy.js';
import { runtimeClient, serveRuntime, type RuntimeClient } from '../../src/main/runtime-rpc.js';
import type { TrayModel } from '../../src/main/tray-model.js';
import { createLogger } from '../../src/log/logger.js';
import { dispatch } from '../../src/node/api-dispatch.js';
import { NodeController } from '../../src/node/controller.js';
import type { Snapshot } from '../../src/shared/api.js';
import { openStore } from '../../src/store/index.js';
import { tmpDir } from '../helpers/tmp.js';

function port<In, Out>(p: MessagePort) {
  return { postMessage: (m: Out) => p.postMessage(m), onMessage: (l: (m: In) => void) => p.on('message', l) };
}

/** A real controller on a real store, reached the way Electron main reaches the utility process: over a message port. */
function runtime(t: TestContext, dataDir = tmpDir(t)): { client: RuntimeClient; controller: NodeController } {
  const store = openStore(dataDir);
  const controller = new NodeController({ store, log: createLogger({ logLevel: 'silent', logFormat: 'json' }), version: '1', refreshMs: 60_000 });
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
  machine = { onBattery: false, idleSeconds: 0 };
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
}

/** Resolves once `predicate` holds, polling the event loop (bounded). */
async function until(predicate: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 200 && !(await predicate()); i++) await new Promise((r) => setTimeout(r, 5));
  assert.ok(await predicate(), `timed out waiting for ${what}`);
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
  const { client, controller } = runtime(t);
  const platform = new FakePlatform();
  const shell = new DesktopShell(platform, client);
  t.after(() => shell.dispose());
  await shell.start();
  await client.startContribution();
  platform.machine = { onBattery: true, idleSeconds: 0 };
  shell.tickPolicy(0);
  shell.tickPolicy(POWER_SETTLE_MS);
  await until(async () => (await controller.getSnapshot()).contribution.phase === 'waiting', 'the hold to reach the runtime');
  await until(() => platform.trays.at(-1)!.tooltip.includes('battery'), 'the tray to say why');
  platform.machine = { onBattery: false, idleSeconds: 0 };
  shell.tickPolicy(POWER_SETTLE_MS + 1);
  shell.tickPolicy(2 * POWER_SETTLE_MS + 1);
  await until(async () => (await controller.getSnapshot()).contribution.phase === 'running', 'the release');
});

test('a snooze from the tray holds contribution and lifts by itself; Pause or Start ends it early', async (t) => {
  const { client, controller } = runtime(t);
  const platform = new FakePlatform();
  const shell = new DesktopShell(platform, client);
  t.after(() => shell.dispose());
  await shell.start();
  await client.startContribution();
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
