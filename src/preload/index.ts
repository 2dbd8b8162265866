// Exposes the typed Cohort API to the page: one named verb per channel, derived from the shared
// method list, and a snapshot subscription; never raw ipcRenderer.
import { contextBridge, ipcRenderer, type IpcRendererEvent } from 'electron';
import type { CohortApi, CohortCalls, Snapshot } from '../shared/api.js';
import { CONNECTION_CHANNEL, METHOD_NAMES, SNAPSHOT_CHANNEL, ipcChannel } from '../shared/channels.js';

const calls = Object.fromEntries(METHOD_NAMES.map((method) => [method, (arg?: unknown) => ipcRenderer.invoke(ipcChannel(method), arg)])) as unknown as CohortCalls;

const api: CohortApi = {
  ...calls,
  subscribe(listener, onConnection) {
    const handler = (_event: IpcRendererEvent, snapshot: Snapshot) => listener(snapshot);
    const connection = (_event: IpcRendererEvent, state: { connected: boolean; detail?: string; canMoveAside?: boolean }) => onConnection?.(state.connected, state.detail, state.canMoveAside);
    ipcRenderer.on(SNAPSHOT_CHANNEL, handler);
    ipcRenderer.on(CONNECTION_CHANNEL, connection);
    return () => {
      ipcRenderer.off(SNAPSHOT_CHANNEL, handler);
      ipcRenderer.off(CONNECTION_CHANNEL, connection);
    };
  },
};

contextBridge.exposeInMainWorld('cohort', api);
