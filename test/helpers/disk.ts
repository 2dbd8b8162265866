import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { TestContext } from 'node:test';

/** A tmpfs of `mib` MiB, unmounted when the test ends; undefined where it cannot be mounted (not root, not Linux). */
export function smallDisk(t: TestContext, mib: number): string | undefined {
  if (process.platform !== 'linux' || process.getuid?.() !== 0) return undefined;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cohort-disk-full-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${mib}m`, 'tmpfs', dir], { stdio: 'pipe' });
  } catch {
    fs.rmdirSync(dir);
    return undefined;
  }
  t.after(() => {
    execFileSync('umount', ['-l', dir]);
    fs.rmdirSync(dir);
  });
  return dir;
}

/** Writes zeros to `file` until the disk refuses them, then gives back `spare` bytes of them (a disk with that much left). */
export function fill(file: string, spare = 0): void {
  const fd = fs.openSync(file, 'w');
  const block = Buffer.alloc(1 << 20);
  try {
    for (;;) fs.writeSync(fd, block);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
  } finally {
    fs.closeSync(fd);
  }
  if (spare > 0) fs.truncateSync(file, Math.max(0, fs.statSync(file).size - spare));
}
