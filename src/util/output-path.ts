/**
 * Paths a user names for a command's output (`--out DIR`, `--out FILE`, `--grads FILE`): checked
 * before any work, so a run does not find out at its end, and written all or none.
 */
import fs from 'node:fs';
import path from 'node:path';

/** stat, or undefined where nothing is (ENOENT, or ENOTDIR: a file on the path). */
function statOf(p: string): fs.Stats | undefined {
  try {
    return fs.statSync(p);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
    throw err;
  }
}

/**
 * Why `target` cannot take a command's output, a `folder` (its files go in, missing folders on its
 * path are made) or a `file` (written beside it and renamed over it, in a folder that exists), or
 * undefined when it can: a file where a folder is wanted or the reverse, a file on its path, a file's
 * missing folder, or a nearest existing folder without write permission or on a read-only filesystem.
 */
export function outputPathProblem(target: string, kind: 'folder' | 'file'): string | undefined {
  const abs = path.resolve(target);
  const stat = statOf(abs);
  if (stat && kind === 'folder' && !stat.isDirectory()) return `${target} is a file, not a folder`;
  if (stat?.isDirectory() && kind === 'file') return `${target} is a folder, not a file`;
  // what is written goes into the nearest folder that exists on its path
  let existing = stat && kind === 'folder' ? abs : path.dirname(abs);
  let found: fs.Stats | undefined;
  while (!(found = statOf(existing))) existing = path.dirname(existing);
  if (!found.isDirectory()) return `${existing} is a file, so ${target} cannot be created`;
  if (kind === 'file' && existing !== path.dirname(abs)) return `the folder ${path.dirname(abs)} does not exist`;
  try {
    fs.accessSync(existing, fs.constants.W_OK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return `${existing} is not writable (${code === 'EROFS' ? 'a read-only filesystem' : code === 'EACCES' || code === 'EPERM' ? 'no write permission' : (err as Error).message})`;
  }
  return undefined;
}

/** A whole write that failed (a full disk, a folder in the way): its message names the target and the reason, and the target is as it was. */
export class OutputWriteError extends Error {
  override readonly name = 'OutputWriteError';
}

/** Where a whole write to `target` is staged: beside it, on its filesystem, so a rename puts it in place. */
function stagingOf(target: string): string {
  return `${path.resolve(target)}.partial-${process.pid}`;
}

/**
 * Fills folder `dir` all or none: `write` fills a sibling staging folder (same filesystem) whose files
 * are then renamed in (the staging folder itself when `dir` does not exist yet), so a failure midway (a
 * full disk) leaves `dir` as it was: no new config.json beside old weights. Other files in `dir` stay.
 * Throws an OutputWriteError naming `dir` and the reason.
 */
export function writeFolderWhole(dir: string, write: (staging: string) => void): void {
  const target = path.resolve(dir);
  const staging = stagingOf(dir);
  try {
    fs.mkdirSync(path.dirname(target), { recursive: true });
    write(staging);
    if (statOf(target) === undefined) fs.renameSync(staging, target);
    else {
      const files = fs.readdirSync(staging);
      // checked before the first rename: a folder under a file's name would stop them halfway
      const taken = files.find((f) => statOf(path.join(target, f))?.isDirectory());
      if (taken !== undefined) throw new Error(`${path.join(dir, taken)} is a folder`);
      for (const f of files) fs.renameSync(path.join(staging, f), path.join(target, f));
    }
  } catch (err) {
    throw new OutputWriteError(`could not write ${dir}: ${(err as Error).message}`, { cause: err });
  } finally {
    removeLeftover(staging);
  }
}

/**
 * Writes file `file` all or none: `write` writes a sibling staging file, renamed over `file` once
 * complete, so a failure midway (a full disk, a stream error) leaves the old `file` as it was and no
 * staging file behind. Throws an OutputWriteError naming `file` and the reason.
 */
export async function writeFileWhole(file: string, write: (staging: string) => Promise<void> | void): Promise<void> {
  const staging = stagingOf(file);
  try {
    await write(staging);
    fs.renameSync(staging, path.resolve(file));
  } catch (err) {
    throw new OutputWriteError(`could not write ${file}: ${(err as Error).message}`, { cause: err });
  } finally {
    removeLeftover(staging);
  }
}

/** Removes what a failed write left at `p`, if anything: with a file on its path (ENOTDIR) nothing was written. */
function removeLeftover(p: string): void {
  try {
    fs.rmSync(p, { recursive: true, force: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOTDIR') throw err;
  }
}
