const SIGNALS = ['SIGINT', 'SIGTERM'] as const;

/**
 * What a long-running command waits for: the first SIGINT/SIGTERM aborts `signal` (the command stops
 * cleanly: state saved, summary printed); a second one while it stops exits at once, without saving
 * (130/143, a shell's codes for those signals). `release()` once the command has stopped.
 */
export function stopOnSignal(): { readonly signal: AbortSignal; release(): void } {
  const stop = new AbortController();
  const onSignal = (signal: NodeJS.Signals): void => {
    if (!stop.signal.aborted) return stop.abort();
    process.stderr.write(`cohort: second signal (${signal}) while stopping: exiting now, without saving\n`);
    process.exit(signal === 'SIGINT' ? 130 : 143);
  };
  for (const s of SIGNALS) process.on(s, onSignal);
  return { signal: stop.signal, release: () => SIGNALS.forEach((s) => process.off(s, onSignal)) };
}
