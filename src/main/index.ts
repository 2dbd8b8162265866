// Electron main process: the window, the tray and the IPC bridge. The node runtime runs in a utility
// process (runtime-process.ts); the behaviour lives in DesktopShell, tested without Electron.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BrowserWindow, Menu, Notification, Tray, app, ipcMain, nativeImage, powerMonitor, session, shell, utilityProcess } from 'electron';
import { SNAPSHOT_CHANNEL, METHOD_NAMES, ipcChannel } from '../shared/channels.js';
import { DesktopShell, POLICY_TICK_MS, type DesktopPlatform } from './desktop-shell.js';
import { runtimeClient, type FromRuntime } from './runtime-rpc.js';
import type { TrayAction, TrayModel } from './tray-model.js';
import { dashboardWindowOptions, isAppUrl, isFromAppWindow } from './window-options.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const assets = app.isPackaged ? path.join(process.resourcesPath, 'assets') : path.join(here, '../../assets');

/** Argument the login item passes, so a start at login stays in the tray. */
const STARTED_AT_LOGIN = '--started-at-login';

let win: BrowserWindow | undefined;
let tray: Tray | undefined;

function createWindow(desktop: DesktopShell): BrowserWindow {
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
    if (desktop.onWindowClose()) event.preventDefault();
  });
  w.once('ready-to-show', () => w.show());
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

function startRuntime() {
  const child = utilityProcess.fork(path.join(here, 'runtime.js'), [], {
    serviceName: 'Cohort node runtime',
    // same data directory as the headless node (COHORT_DATA_DIR or the platform default), so both show one history
    env: { ...process.env, COHORT_APP_VERSION: app.getVersion() },
    stdio: 'inherit',
  });
  const client = runtimeClient({ postMessage: (m) => child.postMessage(m), onMessage: (l) => child.on('message', (m: FromRuntime) => l(m)) });
  child.on('exit', (code) => {
    client.failPending(`the node runtime exited (code ${code})`);
    if (!quitting) new Notification({ title: 'Cohort stopped', body: `The node runtime exited unexpectedly (code ${code}).` }).show();
  });
  return { child, client };
}

let quitting = false;

if (!app.requestSingleInstanceLock()) {
  app.quit();
} else {
  void app.whenReady().then(async () => {
    session.defaultSession.setPermissionRequestHandler((_wc, _permission, callback) => callback(false));
    const { child, client } = startRuntime();
    const platform: DesktopPlatform = {
      renderTray: (model) => renderTray(model, (action) => void desktop.onTrayAction(action)),
      showWindow: () => {
        if (!win || win.isDestroyed()) win = createWindow(desktop);
        else {
          if (win.isMinimized()) win.restore();
          win.show();
          win.focus();
        }
      },
      hideWindow: () => win?.hide(),
      notify: (title, body) => new Notification({ title, body }).show(),
      setOpenAtLogin: (enabled) => app.setLoginItemSettings({ openAtLogin: enabled, args: [STARTED_AT_LOGIN] }),
      machineState: () => ({ onBattery: powerMonitor.isOnBatteryPower(), idleSeconds: powerMonitor.getSystemIdleTime() }),
      now: () => Date.now(),
      quit: () => app.quit(),
      sendSnapshot: (snapshot) => {
        if (win && !win.isDestroyed()) win.webContents.send(SNAPSHOT_CHANNEL, snapshot);
      },
    };
    const desktop = new DesktopShell(platform, client);
    for (const method of METHOD_NAMES) {
      ipcMain.handle(ipcChannel(method), (event, input: unknown) => {
        if (!isFromAppWindow(event, win)) throw new Error('refused: IPC from a frame that is not the app window');
        return desktop.call(method, input);
      });
    }
    app.on('second-instance', () => platform.showWindow());
    app.on('activate', () => platform.showWindow());
    app.on('before-quit', () => {
      quitting = true;
      desktop.markQuitting();
    });
    app.on('will-quit', () => child.kill());
    setInterval(() => desktop.tickPolicy(platform.now()), POLICY_TICK_MS).unref();
    await desktop.start();
    // started at login: stay in the tray; otherwise open the dashboard
    if (!process.argv.includes(STARTED_AT_LOGIN) && !app.getLoginItemSettings().wasOpenedAtLogin) platform.showWindow();
  });
  // the app lives in the tray: closing every window does not quit
  app.on('window-all-closed', () => undefined);
}
