// Exposes the typed Cohort API to the page, one named verb per channel; never raw ipcRenderer.
import { contextBridge, ipcRenderer } from 'electron';
import { IPC_CHANNELS, type CohortApi } from '../shared/api.js';

const api: CohortApi = {
  getStatus: () => ipcRenderer.invoke(IPC_CHANNELS.getStatus),
};

contextBridge.exposeInMainWorld('cohort', api);
