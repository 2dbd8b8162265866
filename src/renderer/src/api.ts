import type { CohortApi, NodeStatus } from '../../shared/api.js';

declare global {
  interface Window {
    cohort?: CohortApi;
  }
}

/** The same API inside Electron (preload bridge) and in a browser against the headless node (HTTP). */
export const api: CohortApi = window.cohort ?? {
  getStatus: async () => {
    const res = await fetch('/api/status');
    if (!res.ok) throw new Error(`GET /api/status: HTTP ${res.status}`);
    return (await res.json()) as NodeStatus;
  },
};
