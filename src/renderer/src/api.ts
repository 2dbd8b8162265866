import type { CohortApi, CohortCalls, MethodName, Snapshot } from '../../shared/api.js';
import { EVENTS_PATH, METHOD_NAMES, httpRoute } from '../../shared/channels.js';

declare global {
  interface Window {
    cohort?: CohortApi;
  }
}

function httpVerb(method: MethodName): (arg?: unknown) => Promise<unknown> {
  const route = httpRoute(method);
  return async (arg) => {
    const init: RequestInit =
      route.verb === 'GET' ? {} : { method: 'POST', headers: { 'content-type': 'application/json' }, body: arg === undefined ? '' : JSON.stringify(arg) };
    const res = await fetch(route.path, init);
    const body = (await res.json().catch(() => ({ error: res.statusText }))) as unknown;
    if (!res.ok) throw new Error(`${route.verb} ${route.path}: ${(body as { error?: string }).error ?? `HTTP ${res.status}`}`);
    return body;
  };
}

/** The API over HTTP + Server-Sent Events, against the headless node that served this page. */
function httpApi(): CohortApi {
  const calls = Object.fromEntries(METHOD_NAMES.map((m) => [m, httpVerb(m)])) as unknown as CohortCalls;
  return {
    ...calls,
    subscribe(listener, onConnection) {
      // EventSource reconnects by itself; the node sends a fresh snapshot on every (re)connect
      const source = new EventSource(EVENTS_PATH);
      source.addEventListener('snapshot', (e: MessageEvent<string>) => {
        onConnection?.(true);
        listener(JSON.parse(e.data) as Snapshot);
      });
      source.addEventListener('error', () => onConnection?.(false));
      return () => source.close();
    },
  };
}

/** The same API inside Electron (preload bridge) and in a browser against the headless node. */
export const api: CohortApi = window.cohort ?? httpApi();
