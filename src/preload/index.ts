// Exposes the typed Cohort API to the page: one named verb per channel, derived from the shared
// method list, and a snapshot subscription; never raw ipcRenderer.
import { contextBridge, ipcRenderer, type IpcRendererEvent } from 'electron';
import type { CohortApi, CohortCalls, Snapshot } from '../shared/api.js';
import { METHOD_NAMES, SNAPSHOT_CHANNEL, ipcChannel } from '../shared/channels.js';

const calls = Object.fromEntries(METHOD_NAMES.map((method) => [method, (arg?: unknown) => ipcRenderer.invoke(ipcChannel(method), arg)])) as unknown as CohortCalls;

const api: CohortApi = {
  ...calls,
  subscribe(listener) {
    const handler = (_event: IpcRendererEvent, snapshot: Snapshot) => listener(snapshot);
    ipcRenderer.on(SNAPSHOT_CHANNEL, handler);
    return () => ipcRenderer.off(SNAPSHOT_CHANNEL, handler);
  },
};

contextBridge.exposeInMainWorld('cohort', api);
