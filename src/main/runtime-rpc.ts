/**
 * The message protocol between Electron main and the node runtime in its utility process. Both ends
 * work over any MessagePort-like object, so the protocol is tested under plain Node with a
 * worker_threads MessageChannel; in the app the ports are the utility process's parentPort and
 * `UtilityProcess` itself.
 */
import type { CohortApi, CohortCalls, Snapshot } from '../shared/api.js';
import { METHOD_NAMES } from '../shared/channels.js';
import type { Logger } from '../log/logger.js';
import { NewerSchemaError, RefusedDatabaseError } from '../store/errors.js';

export type ToRuntime =
  | { readonly type: 'call'; readonly id: number; readonly method: string; readonly input: unknown }
  | { readonly type: 'policy-hold'; readonly reason: string | undefined };

export type FromRuntime =
  | { readonly type: 'result'; readonly id: number; readonly ok: true; readonly value: unknown }
  | { readonly type: 'result'; readonly id: number; readonly ok: false; readonly error: string }
  | { readonly type: 'snapshot'; readonly snapshot: Snapshot }
  /** The store did not open and restarting cannot help: its file is damaged, not Cohort's, or a newer Cohort's. */
  | ({ readonly type: 'refused-database' } & RefusedDatabase)
  /** The store did not open for another reason (its folder cannot be written, another node holds it): main restarts the runtime later. */
  | { readonly type: 'start-failed'; readonly error: string };

/** A database the runtime refuses to open: the file, what is wrong with it, and what helps. */
export interface RefusedDatabase {
  readonly file: string;
  readonly problem: string;
  /** `move-aside`: the file is damaged or not Cohort's, and a fresh one beside it helps; `upgrade`: a newer Cohort wrote it and reads it. */
  readonly remedy: 'move-aside' | 'upgrade';
}

/** The part of a port both ends use: post a message, get told about incoming ones. */
export interface Port<In, Out> {
  postMessage(message: Out): void;
  onMessage(listener: (message: In) => void): void;
}

/** Longest a call may wait for the runtime before it fails (the runtime may have crashed). */
const CALL_TIMEOUT_MS = 30_000;

/** Main's side: the full API plus the policy hold, as calls over the port. */
export interface RuntimeClient extends CohortApi {
  setPolicyHold(reason: string | undefined): void;
  /** Calls a verb by name with an unchecked argument (the runtime validates it), as IPC delivers it. */
  call(method: string, input: unknown): Promise<unknown>;
  /** Fails every pending call, e.g. when the runtime process exits. */
  failPending(reason: string): void;
}

export function runtimeClient(port: Port<FromRuntime, ToRuntime>): RuntimeClient {
  let nextId = 1;
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }>();
  const listeners = new Set<(s: Snapshot) => void>();
  port.onMessage((msg) => {
    if (msg.type === 'snapshot') {
      for (const l of listeners) l(msg.snapshot);
      return;
    }
    if (msg.type !== 'result') return;
    const p = pending.get(msg.id);
    if (!p) return;
    pending.delete(msg.id);
    clearTimeout(p.timer);
    if (msg.ok) p.resolve(msg.value);
    else p.reject(new Error(msg.error));
  });
  const call = (method: string, input: unknown) =>
    new Promise<unknown>((resolve, reject) => {
      const id = nextId++;
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(new Error(`the node runtime did not answer ${method} within ${CALL_TIMEOUT_MS / 1000} s`));
      }, CALL_TIMEOUT_MS);
      pending.set(id, { resolve, reject, timer });
      try {
        port.postMessage({ type: 'call', id, method, input });
      } catch (err) {
        // no runtime to post to (it is restarting): fail now rather than at the timeout
        clearTimeout(timer);
        pending.delete(id);
        reject(err instanceof Error ? err : new Error(String(err)));
      }
    });
  const verbs = Object.fromEntries(METHOD_NAMES.map((m) => [m, (input?: unknown) => call(m, input)])) as unknown as CohortCalls;
  return {
    ...verbs,
    call,
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    setPolicyHold(reason) {
      port.postMessage({ type: 'policy-hold', reason });
    },
    failPending(reason) {
      for (const [id, p] of pending) {
        clearTimeout(p.timer);
        p.reject(new Error(reason));
        pending.delete(id);
      }
    },
  };
}

/** The runtime's side: answers calls with `dispatch` and forwards every snapshot. */
export function serveRuntime(
  port: Port<ToRuntime, FromRuntime>,
  runtime: CohortApi & { setPolicyHold(reason: string | undefined): void },
  dispatch: (calls: CohortCalls, method: string, input: unknown) => Promise<unknown>,
): () => void {
  port.onMessage((msg) => {
    if (msg.type === 'policy-hold') {
      runtime.setPolicyHold(msg.reason);
      return;
    }
    dispatch(runtime, msg.method, msg.input).then(
      (value) => port.postMessage({ type: 'result', id: msg.id, ok: true, value }),
      (err: unknown) => port.postMessage({ type: 'result', id: msg.id, ok: false, error: err instanceof Error ? err.message : String(err) }),
    );
  });
  return runtime.subscribe((snapshot) => port.postMessage({ type: 'snapshot', snapshot }));
}

/** How long a runtime that reported why its store did not open waits for main to stop it before it exits by itself. */
const REPORT_GRACE_MS = 30_000;

/**
 * The runtime's side of opening its store. Every failure goes to `log` first (the log file a volunteer
 * attaches to a report; stderr alone is lost in the app), then to main, and the process waits for main
 * to end it, so the report cannot be lost to an exit racing it. A database file that is damaged, not
 * Cohort's or a newer Cohort's is a refusal: main stops restarting (so it is logged once) and says
 * what helps. Any other failure is a failed start: main says why and restarts the runtime later (a
 * data directory on a drive not mounted yet, or one another node holds, may be free next time).
 */
export async function openOrReport<T>(open: () => T, post: (message: FromRuntime) => void, log: Logger): Promise<T> {
  try {
    return open();
  } catch (err) {
    if (err instanceof RefusedDatabaseError) {
      const refused: RefusedDatabase = { file: err.file, problem: err.problem, remedy: err instanceof NewerSchemaError ? 'upgrade' : 'move-aside' };
      log.error(refused, `the node runtime stays stopped: ${err.problem}`);
      post({ type: 'refused-database', ...refused });
    } else {
      log.error({ err }, `the node runtime could not open its store: ${(err as Error).message}`);
      post({ type: 'start-failed', error: (err as Error).message });
    }
    await new Promise((resolve) => setTimeout(resolve, REPORT_GRACE_MS));
    throw err;
  }
}
