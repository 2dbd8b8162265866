// Electron main process: the window, the tray, the IPC bridge and `cohort:` links. The node runtime
// runs in a utility process (runtime-process.ts), restarted after a crash (runtime-supervisor.ts);
// the behaviour lives in DesktopShell, tested without Electron.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BrowserWindow, Menu, Notification, Tray, app, dialog, ipcMain, nativeImage, powerMonitor, powerSaveBlocker, session, shell, utilityProcess } from 'electron';
import { envName } from '../config/settings.js';
import { CONNECTION_CHANNEL, SNAPSHOT_CHANNEL, METHOD_NAMES, ipcChannel } from '../shared/channels.js';
import { startAutoUpdate } from './auto-update.js';
import { DesktopShell, POLICY_TICK_MS, type DesktopPlatform } from './desktop-shell.js';
import { LINK_SCHEME, linkFromArgv } from './links.js';
import { RuntimeSupervisor, type RuntimeProcess, type SpawnOptions } from './runtime-supervisor.js';
import type { FromRuntime } from './runtime-rpc.js';
import type { TrayAction, TrayModel } from './tray-model.js';
import { dashboardWindowOptions, isAppUrl, isFromAppWindow } from './window-options.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const assets = app.isPackaged ? path.join(process.resourcesPath, 'assets') : path.join(here, '../../assets');

/** Argument the login item passes, so a start at login stays in the tray. */
const STARTED_AT_LOGIN = '--started-at-login';

let win: BrowserWindow | undefined;
let tray: Tray | undefined;
let desktop: DesktopShell | undefined;
/** Links opened before the shell is ready (macOS sends open-url before `ready`). */
const pendingLinks: string[] = [];

function createWindow(cohortShell: DesktopShell): BrowserWindow {
  const w = new BrowserWindow(dashboardWindowOptions(path.join(here, '../preload/index.cjs')));
  const devUrl = process.env.ELECTRON_RENDERER_URL;
  const appOrigin = devUrl ? new URL(devUrl).origin : 'file://';
  w.webContents.setWindowOpenHandler(({ url }) => {
    if (new URL(url).protocol === 'https:') void shell.openExternal(url);
    return { action: 'deny' };
  });
  w.webContents.on('will-navigate', (event, url) => {
    if (!isAppUrl(url, appOrigin)) event.preventDefault();
  });
  w.on('close', (event) => {
    if (cohortShell.onWindowClose()) event.preventDefault();
  });
  w.once('ready-to-show', () => w.show());
  w.webContents.on('did-finish-load', () => cohortShell.onWindowLoaded());
  if (devUrl) void w.loadURL(devUrl);
  else void w.loadFile(path.join(here, '../renderer/index.html'));
  return w;
}

function renderTray(model: TrayModel, onAction: (action: TrayAction) => void): void {
  const icon = nativeImage.createFromPath(path.join(assets, model.icon === 'active' ? 'tray.png' : 'tray-paused.png'));
  if (!tray) tray = new Tray(icon);
  else tray.setImage(icon);
  tray.setToolTip(model.tooltip);
  tray.setContextMenu(
    Menu.buildFromTemplate(
      model.items.map((item) =>
        item.kind === 'separator' ? { type: 'separator' } : item.kind === 'status' ? { label: item.label, enabled: false } : { label: item.label, click: () => onAction(item.action) },
      ),
    ),
  );
}

/** The node runtime as a utility process, seen through the supervisor's interface. */
function forkRuntime(options: SpawnOptions): RuntimeProcess {
  const child = utilityProcess.fork(path.join(here, 'runtime.js'), [], {
    serviceName: 'Cohort node runtime',
    // same data directory as the headless node (COHORT_DATA_DIR or the platform default), so both show one history
    env: options.moveAside ? { ...process.env, [envName('moveAside')]: 'true' } : process.env,
    stdio: 'inherit',
  });
  return {
    postMessage: (m) => child.postMessage(m),
    onMessage: (l) => child.on('message', (m: FromRuntime) => l(m)),
    onExit: (l) => child.on('exit', l),
    kill: () => child.kill(),
  };
}

function openLink(link: string): void {
  if (desktop) void desktop.openLink(link);
  else pendingLinks.push(link);
}

// registered before `ready`: macOS delivers a link that launched the app as open-url right away
app.on('open-url', (event, url) => {
  event.preventDefault();
  openLink(url);
});

if (!app.requestSingleInstanceLock()) {
  app.quit();
} else {
  // a source checkout registers electron + its entry script; an installed app registers itself
  if (process.defaultApp && process.argv[1]) app.setAsDefaultProtocolClient(LINK_SCHEME, process.execPath, [path.resolve(process.argv[1])]);
  else app.setAsDefaultProtocolClient(LINK_SCHEME);
  void app.whenReady().then(async () => {
    session.defaultSession.setPermissionRequestHandler((_wc, _permission, callback) => callback(false));
    let blocker: number | undefined;
    const platform: DesktopPlatform = {
      renderTray: (model) => renderTray(model, (action) => void cohortShell.onTrayAction(action)),
      showWindow: () => {
        if (!win || win.isDestroyed()) win = createWindow(cohortShell);
        else {
          if (win.isMinimized()) win.restore();
          win.show();
          win.focus();
        }
      },
      hideWindow: () => win?.hide(),
      notify: (title, body) => new Notification({ title, body }).show(),
      setOpenAtLogin: (enabled) => app.setLoginItemSettings({ openAtLogin: enabled, args: [STARTED_AT_LOGIN] }),
      setKeepAwake: (enabled) => {
        if (enabled && blocker === undefined) blocker = powerSaveBlocker.start('prevent-app-suspension');
        else if (!enabled && blocker !== undefined) {
          powerSaveBlocker.stop(blocker);
          blocker = undefined;
        }
      },
      machineState: () => ({ onBattery: powerMonitor.isOnBatteryPower(), idleSeconds: powerMonitor.getSystemIdleTime(), localHour: new Date().getHours() }),
      confirmJoin: async (swarm) => {
        const options = {
          type: 'question' as const,
          buttons: ['Join this swarm', 'Cancel'],
          defaultId: 0,
          cancelId: 1,
          title: 'Join a Cohort swarm?',
          message: `Join the swarm "${swarm.runId}"?`,
          detail: `${swarm.closed ? 'A closed swarm (only holders of this link can connect). ' : ''}Bootstrap peers:\n${swarm.peers.join('\n')}\n\nCohort will contribute to this swarm from now on instead of the one in Settings.`,
        };
        const { response } = win && !win.isDestroyed() ? await dialog.showMessageBox(win, options) : await dialog.showMessageBox(options);
        return response === 0;
      },
      openFolder: (dir) => void shell.openPath(dir),
      now: () => Date.now(),
      quit: () => app.quit(),
      sendSnapshot: (snapshot) => {
        if (win && !win.isDestroyed()) win.webContents.send(SNAPSHOT_CHANNEL, snapshot);
      },
      sendConnection: (connected, detail, canMoveAside) => {
        if (win && !win.isDestroyed()) win.webContents.send(CONNECTION_CHANNEL, { connected, detail, canMoveAside });
      },
    };
    const supervisor = new RuntimeSupervisor(forkRuntime, {
      onExit: (code, delay, why) => cohortShell.onRuntimeExit(code, delay, why),
      onRestart: () => void cohortShell.start().catch((err: unknown) => platform.notify('Cohort', `the restarted node runtime did not answer: ${(err as Error).message}`)),
      onRefusedDatabase: (database) => cohortShell.onRefusedDatabase(database),
    });
    const cohortShell = new DesktopShell(platform, supervisor.client, () => supervisor.moveDatabaseAside());
    desktop = cohortShell;
    supervisor.start();
    for (const method of METHOD_NAMES) {
      ipcMain.handle(ipcChannel(method), (event, input: unknown) => {
        if (!isFromAppWindow(event, win)) throw new Error('refused: IPC from a frame that is not the app window');
        return cohortShell.call(method, input);
      });
    }
    app.on('second-instance', (_event, argv) => void cohortShell.onSecondInstance(argv));
    app.on('activate', () => platform.showWindow());
    app.on('before-quit', () => cohortShell.markQuitting());
    app.on('will-quit', () => supervisor.stop());
    setInterval(() => cohortShell.tickPolicy(platform.now()), POLICY_TICK_MS).unref();
    // a runtime that crashed or cannot open its database is reported through the supervisor's hooks; the window opens regardless, to say so
    await cohortShell.start().catch(() => undefined);
    const link = linkFromArgv(process.argv);
    if (link) pendingLinks.push(link);
    for (const l of pendingLinks.splice(0)) void cohortShell.openLink(l);
    if (app.isPackaged) startAutoUpdate(process.resourcesPath, (message) => process.stderr.write(`Cohort: ${message}\n`));
    // started at login: stay in the tray; otherwise open the dashboard
    if (!link && !process.argv.includes(STARTED_AT_LOGIN) && !app.getLoginItemSettings().wasOpenedAtLogin) platform.showWindow();
  });
  // the app lives in the tray: closing every window does not quit
  app.on('window-all-closed', () => undefined);
}
