/** The signals an operator stops a command with, and the exit code of a second one (a shell's codes for them). */
const INSISTENT = { SIGINT: 130, SIGTERM: 143 } as const;

/**
 * What a long-running command waits for: the first SIGINT/SIGTERM/SIGHUP aborts `signal` (the command
 * stops cleanly: state saved, summary printed); a second SIGINT/SIGTERM while it stops exits at once,
 * without saving (130/143). SIGHUP (its terminal closed, an SSH session dropped) stops it as SIGTERM
 * does; it reloads nothing. A repeated SIGHUP is not an operator insisting (the shell and the kernel
 * may each send one when a terminal closes), so it never cuts the stop short. `release()` once the
 * command has stopped.
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
  return { signal: stop.signal, release: () => signals.forEach((s) => process.off(s, onSignal)) };
}
