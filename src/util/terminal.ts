import fs from 'node:fs';
import tty from 'node:tty';

/**
 * Lets the process outlive its terminal (a SIGHUP stops it cleanly, which takes a while): once the
 * terminal has closed, writes to it fail with EIO, which would end the process before it saved, and
 * Node.js aborts at exit when it cannot restore the terminal's mode (a core dump instead of the exit
 * code), so output to it is dropped and it is let go before exit. A reader that closed stdout or
 * stderr (`| head -1`, EPIPE) is the same: a node runs on without it.
 */
export function outliveTerminal(): void {
  const ignore = (err: NodeJS.ErrnoException): void => {
    if (err.code !== 'EPIPE' && err.code !== 'EIO') throw err;
  };
  process.stdout.on('error', ignore);
  process.stderr.on('error', ignore);
  const terminals = [0, 1, 2].filter((fd) => tty.isatty(fd));
  // a closed terminal is no longer a tty; closed here, Node.js leaves its mode alone
  process.on('exit', () => terminals.filter((fd) => !tty.isatty(fd)).forEach((fd) => fs.closeSync(fd)));
}
