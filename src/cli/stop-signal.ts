/** The signals an operator stops a command with, and the exit code of a second one (a shell's codes for them). */
const INSISTENT = { SIGINT: 130, SIGTERM: 143 } as const;

/** How often a command started by `npx`/`npm exec` looks whether npm's shell, its parent, is still there. */
const PARENT_CHECK_MS = 1000;

/**
 * What a long-running command waits for: the first SIGINT/SIGTERM/SIGHUP aborts `signal` (the command
 * stops cleanly: state saved, summary printed); a second SIGINT/SIGTERM while it stops exits at once,
 * without saving (130/143). SIGHUP (its terminal closed, an SSH session dropped) stops it as SIGTERM
 * does; it reloads nothing. A repeated SIGHUP is not an operator insisting (the shell and the kernel
 * may each send one when a terminal closes), so it never cuts the stop short. Started by `npx` (npm
 * runs it under `sh -c`), a SIGTERM to npx ends npm and its shell but never reaches this process: its
 * parent gone, it stops as on SIGTERM instead of running on orphaned. `release()` once the command has
 * stopped.
 */
export function stopOnSignal(): { readonly signal: AbortSignal; release(): void } {
  const stop = new AbortController();
  const onSignal = (signal: NodeJS.Signals): void => {
    if (!stop.signal.aborted) return stop.abort();
    if (!(signal in INSISTENT)) return;
    process.stderr.write(`cohort: second signal (${signal}) while stopping: exiting now, without saving\n`);
    process.exit(INSISTENT[signal as keyof typeof INSISTENT]);
  };
  const signals: NodeJS.Signals[] = [...(Object.keys(INSISTENT) as NodeJS.Signals[]), 'SIGHUP'];
  for (const s of signals) process.on(s, onSignal);
  const parent = process.ppid;
  const orphaned = process.env.npm_command === 'exec' ? setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(orphaned);
    process.stderr.write(`cohort: npx (npm exec), which started this process, has ended: stopping as on SIGTERM\n`);
    onSignal('SIGTERM');
  }, PARENT_CHECK_MS).unref() : undefined;
  const release = (): void => {
    signals.forEach((s) => process.off(s, onSignal));
    clearInterval(orphaned);
  };
  return { signal: stop.signal, release };
}
