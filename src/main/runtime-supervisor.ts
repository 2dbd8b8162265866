/**
 * Keeps the node runtime process alive: when it exits unexpectedly it is started again after a
 * back-off that doubles with each crash in a row (and resets once a run lasted), while one
 * RuntimeClient stays valid across restarts, so the shell and the window keep their handle. A runtime
 * that reports a database it refuses (damaged, not Cohort's, a newer Cohort's) is stopped and not
 * restarted (the file stays as it is), until the volunteer asks to move a damaged or foreign file aside.
 */
import { runtimeClient, type FromRuntime, type RefusedDatabase, type RuntimeClient, type ToRuntime } from './runtime-rpc.js';

/** One started runtime process (Electron's UtilityProcess in the app, a child process in tests). */
export interface RuntimeProcess {
  postMessage(message: ToRuntime): void;
  onMessage(listener: (message: FromRuntime) => void): void;
  onExit(listener: (code: number) => void): void;
  kill(): void;
}

/** What a runtime process is started with. */
export interface SpawnOptions {
  /** Rename a damaged or foreign database aside and start a new one (`--move-aside`). */
  readonly moveAside: boolean;
}

export interface BackoffOptions {
  /** First delay after a crash. @default 1000 */
  readonly initialMs?: number;
  /** Longest delay. @default 60000 */
  readonly maxMs?: number;
  /** A run this long counts as healthy: the next crash starts the back-off over. @default 60000 */
  readonly healthyMs?: number;
}

export interface SupervisorHooks {
  /** The process exited unexpectedly (`why`: what it reported when its store did not open); it restarts in `restartInMs`. */
  onExit(code: number, restartInMs: number, why?: string): void;
  /** A new process was started after a crash, or to move a damaged database aside. */
  onRestart(): void;
  /** The runtime refuses its database; it stays stopped (until `moveDatabaseAside` where that is the remedy). */
  onRefusedDatabase(database: RefusedDatabase): void;
}

export class RuntimeSupervisor {
  readonly client: RuntimeClient;
  private current: RuntimeProcess | undefined;
  private readonly listeners = new Set<(m: FromRuntime) => void>();
  private crashesInRow = 0;
  private startedAt = 0;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  /** Set while the runtime is stopped because it refuses its database. */
  private refused: RefusedDatabase | undefined;
  /** Why the current runtime did not start, as it reported before it was stopped. */
  private startFailure: string | undefined;
  private readonly o: Required<BackoffOptions>;

  constructor(
    private readonly spawn: (options: SpawnOptions) => RuntimeProcess,
    private readonly hooks: SupervisorHooks,
    backoff: BackoffOptions = {},
  ) {
    this.o = { initialMs: backoff.initialMs ?? 1000, maxMs: backoff.maxMs ?? 60_000, healthyMs: backoff.healthyMs ?? 60_000 };
    this.client = runtimeClient({
      postMessage: (m) => {
        if (!this.current) throw new Error(this.refused ? `the node runtime is stopped: ${this.refused.problem}` : 'the node runtime is not running (it is being restarted)');
        this.current.postMessage(m);
      },
      onMessage: (l) => this.listeners.add(l),
    });
  }

  /** Starts the first process. */
  start(): void {
    this.launch({ moveAside: false });
  }

  /** The volunteer chose to move the damaged or foreign database aside: a runtime starts that does so (once). */
  moveDatabaseAside(): void {
    if (this.refused === undefined || this.current || this.stopped) throw new Error('there is no unusable database to move aside: the node runtime opened its database');
    if (this.refused.remedy !== 'move-aside') throw new Error(`${this.refused.problem}: a newer Cohort reads it, so it is not moved aside`);
    this.refused = undefined;
    this.launch({ moveAside: true });
    this.hooks.onRestart();
  }

  /** The app quits: stop the process and never restart it. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.current?.kill();
  }

  private launch(options: SpawnOptions): void {
    const child = this.spawn(options);
    this.current = child;
    this.startedAt = Date.now();
    child.onMessage((m) => {
      if (this.current !== child) return;
      if (m.type === 'refused-database') {
        // the runtime waits to be stopped, so this report always comes before its exit
        this.refused = { file: m.file, problem: m.problem, remedy: m.remedy };
        child.kill();
        return;
      }
      if (m.type === 'start-failed') {
        this.startFailure = m.error;
        child.kill();
        return;
      }
      for (const l of this.listeners) l(m);
    });
    child.onExit((code) => this.onExit(child, code));
  }

  private onExit(child: RuntimeProcess, code: number): void {
    if (this.current !== child) return;
    this.current = undefined;
    const why = this.startFailure;
    this.startFailure = undefined;
    this.client.failPending(why === undefined ? `the node runtime exited (code ${code})` : `the node runtime could not start: ${why}`);
    if (this.stopped) return;
    if (this.refused) {
      this.crashesInRow = 0;
      this.hooks.onRefusedDatabase(this.refused);
      return;
    }
    this.crashesInRow = Date.now() - this.startedAt >= this.o.healthyMs ? 1 : this.crashesInRow + 1;
    const delay = Math.min(this.o.maxMs, this.o.initialMs * 2 ** (this.crashesInRow - 1));
    this.hooks.onExit(code, delay, why);
    this.timer = setTimeout(() => {
      if (this.stopped) return;
      this.launch({ moveAside: false });
      this.hooks.onRestart();
    }, delay);
  }
}
