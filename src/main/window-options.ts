import type { BrowserWindowConstructorOptions } from 'electron';

/**
 * The dashboard window's options, kept free of Electron imports so a plain-Node test can assert the
 * security settings (Electron's checklist: context isolation, sandbox, no Node in the page).
 */
export function dashboardWindowOptions(preloadPath: string): BrowserWindowConstructorOptions {
  return {
    width: 1100,
    height: 760,
    minWidth: 720,
    minHeight: 520,
    show: false,
    title: 'Cohort',
    autoHideMenuBar: true,
    webPreferences: {
      preload: preloadPath,
      contextIsolation: true,
      sandbox: true,
      nodeIntegration: false,
      nodeIntegrationInWorker: false,
      nodeIntegrationInSubFrames: false,
      webSecurity: true,
      allowRunningInsecureContent: false,
      experimentalFeatures: false,
      webviewTag: false,
      spellcheck: false,
    },
  };
}

/** Only the app's own pages may load in the window; everything else is refused. */
export function isAppUrl(url: string, appOrigin: string): boolean {
  try {
    const parsed = new URL(url);
    return parsed.origin === appOrigin || (appOrigin === 'file://' && parsed.protocol === 'file:');
  } catch {
    return false;
  }
}

/** The parts of an IPC event and of the app window that the sender check compares. */
export interface IpcSender {
  readonly sender: unknown;
  readonly senderFrame: unknown;
}
export interface AppWindowLike {
  isDestroyed(): boolean;
  readonly webContents: { readonly mainFrame: unknown };
}

/** IPC is answered only for the app window's own top frame (never a subframe or another window). */
export function isFromAppWindow(event: IpcSender, win: AppWindowLike | undefined): boolean {
  return win !== undefined && !win.isDestroyed() && event.sender === win.webContents && event.senderFrame !== null && event.senderFrame === win.webContents.mainFrame;
}
