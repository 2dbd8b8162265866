// Entry point of the `cohort` command (see bin/cohort.js).
import { main } from './program.js';
import { outliveTerminal } from '../util/terminal.js';

/** How long the process may outlive its command (stdout and stderr flushing) before it exits anyway. */
const EXIT_GRACE_MS = 3000;

// A reader that closed stdout (`| head -1`, `| grep -m1 cohort:`) or a terminal that closed must not end
// a node that runs on, or a stopping one before it has stopped: what it prints after that is dropped.
// Exports stop on a closed stdout themselves.
outliveTerminal();

process.exitCode = await main(process.argv.slice(2));
// The command is done (a stopped `cohort run` has saved its state and printed its summary): a handle
// still open (a connection libp2p did not close, a timer, a worker) must not keep the process alive.
// Unref'd: a process with nothing left exits at once, as always.
setTimeout(() => {
  process.stderr.write(`cohort: exiting ${EXIT_GRACE_MS / 1000} s after the command ended; still open: ${process.getActiveResourcesInfo().join(', ')}\n`);
  process.exit();
}, EXIT_GRACE_MS).unref();
