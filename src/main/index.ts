// Electron main process: a thin shell over the node runtime (which also runs headless via the CLI).
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { app, BrowserWindow, ipcMain, session, shell } from 'electron';
import { COMPONENTS } from '../node/headless.js';
import { IPC_CHANNELS, type NodeStatus } from '../shared/api.js';
import { dashboardWindowOptions, isAppUrl } from './window-options.js';

const here = path.dirname(fileURLToPath(import.meta.url));

function createWindow(): BrowserWindow {
  const win = new BrowserWindow(dashboardWindowOptions(path.join(here, '../preload/index.cjs')));
  const devUrl = process.env.ELECTRON_RENDERER_URL;
  const appOrigin = devUrl ? new URL(devUrl).origin : 'file://';
  win.webContents.setWindowOpenHandler(({ url }) => {
    if (url.startsWith('https://')) void shell.openExternal(url);
    return { action: 'deny' };
  });
  win.webContents.on('will-navigate', (event, url) => {
    if (!isAppUrl(url, appOrigin)) event.preventDefault();
  });
  win.once('ready-to-show', () => win.show());
  if (devUrl) void win.loadURL(devUrl);
  else void win.loadFile(path.join(here, '../renderer/index.html'));
  return win;
}

if (!app.requestSingleInstanceLock()) {
  app.quit();
} else {
  app.on('second-instance', () => {
    const [win] = BrowserWindow.getAllWindows();
    if (win) {
      if (win.isMinimized()) win.restore();
      win.focus();
    }
  });
  void app.whenReady().then(() => {
    session.defaultSession.setPermissionRequestHandler((_wc, _permission, callback) => callback(false));
    ipcMain.handle(IPC_CHANNELS.getStatus, (event): NodeStatus => {
      const win = BrowserWindow.fromWebContents(event.sender);
      if (!win || event.senderFrame !== win.webContents.mainFrame) throw new Error('refused: IPC from a frame that is not the app window');
      return { version: app.getVersion(), components: COMPONENTS };
    });
    createWindow();
    app.on('activate', () => {
      if (BrowserWindow.getAllWindows().length === 0) createWindow();
    });
  });
  app.on('window-all-closed', () => {
    if (process.platform !== 'darwin') app.quit();
  });
}
