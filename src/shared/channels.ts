/**
 * How each verb of the API travels, derived from one list of names. Kept free of runtime imports so
 * the sandboxed preload can bundle it without pulling in zod.
 */
import type { MethodName } from './api.js';

/** Every verb of `CohortCalls`; the type check below fails if the list and the interface drift apart. */
export const METHOD_NAMES = ['getSnapshot', 'getSeries', 'getLogs', 'getSettings', 'updateSettings', 'startContribution', 'pauseContribution', 'setCoordinator', 'describeJoinCode', 'openLogFolder', 'moveDatabaseAside'] as const;
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : never) : never;
const _methodListMatchesApi: Same<(typeof METHOD_NAMES)[number], MethodName> = true;

/** Reads without an argument are HTTP GETs; everything else is a POST with the argument as the JSON body. */
const GET_METHODS: ReadonlySet<MethodName> = new Set<MethodName>(['getSnapshot', 'getSettings']);

export function isMethodName(name: string): name is MethodName {
  return (METHOD_NAMES as readonly string[]).includes(name);
}

/** HTTP transport: `GET|POST /api/<verb>`. */
export function httpRoute(method: MethodName): { readonly verb: 'GET' | 'POST'; readonly path: string } {
  return { verb: GET_METHODS.has(method) ? 'GET' : 'POST', path: `/api/${method}` };
}
/** Live snapshots over Server-Sent Events. */
export const EVENTS_PATH = '/api/events';

/** IPC transport: one channel per verb (main handles, preload invokes) and one for pushed snapshots. */
export function ipcChannel(method: MethodName): string {
  return `cohort:${method}`;
}
export const SNAPSHOT_CHANNEL = 'cohort:snapshot';
/** Whether the node runtime answers (`{ connected, detail?, canMoveAside? }`), pushed when it crashes or cannot open its database, and when it is back. */
export const CONNECTION_CHANNEL = 'cohort:connection';
