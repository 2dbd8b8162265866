/**
 * Keeps the node runtime process alive: when it exits unexpectedly it is started again after a
 * back-off that doubles with each crash in a row (and resets once a run lasted), while one
 * RuntimeClient stays valid across restarts, so the shell and the window keep their handle.
 */
import { runtimeClient, type FromRuntime, type RuntimeClient, type ToRuntime } from './runtime-rpc.js';

/** One started runtime process (Electron's UtilityProcess in the app, a child process in tests). */
export interface RuntimeProcess {
  postMessage(message: ToRuntime): void;
  onMessage(listener: (message: FromRuntime) => void): void;
  onExit(listener: (code: number) => void): void;
  kill(): void;
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
  /** The process exited unexpectedly; it restarts in `restartInMs`. */
  onExit(code: number, restartInMs: number): void;
  /** A new process was started after a crash. */
  onRestart(): void;
}

export class RuntimeSupervisor {
  readonly client: RuntimeClient;
  private current: RuntimeProcess | undefined;
  private readonly listeners = new Set<(m: FromRuntime) => void>();
  private crashesInRow = 0;
  private startedAt = 0;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly o: Required<BackoffOptions>;

  constructor(
    private readonly spawn: () => RuntimeProcess,
    private readonly hooks: SupervisorHooks,
    backoff: BackoffOptions = {},
  ) {
    this.o = { initialMs: backoff.initialMs ?? 1000, maxMs: backoff.maxMs ?? 60_000, healthyMs: backoff.healthyMs ?? 60_000 };
    this.client = runtimeClient({
      postMessage: (m) => {
        if (!this.current) throw new Error('the node runtime is not running (it is being restarted)');
        this.current.postMessage(m);
      },
      onMessage: (l) => this.listeners.add(l),
    });
  }

  /** Starts the first process. */
  start(): void {
    this.launch();
  }

  /** The app quits: stop the process and never restart it. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.current?.kill();
  }

  private launch(): void {
    const child = this.spawn();
    this.current = child;
    this.startedAt = Date.now();
    child.onMessage((m) => {
      if (this.current === child) for (const l of this.listeners) l(m);
    });
    child.onExit((code) => this.onExit(child, code));
  }

  private onExit(child: RuntimeProcess, code: number): void {
    if (this.current !== child) return;
    this.current = undefined;
    this.client.failPending(`the node runtime exited (code ${code})`);
    if (this.stopped) return;
    this.crashesInRow = Date.now() - this.startedAt >= this.o.healthyMs ? 1 : this.crashesInRow + 1;
    const delay = Math.min(this.o.maxMs, this.o.initialMs * 2 ** (this.crashesInRow - 1));
    this.hooks.onExit(code, delay);
    this.timer = setTimeout(() => {
      if (this.stopped) return;
      this.launch();
      this.hooks.onRestart();
    }, delay);
  }
}
