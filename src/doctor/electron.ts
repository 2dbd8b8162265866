import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const localRequire = createRequire(import.meta.url);

/** `packageMissing`: the electron package itself is absent, as in the npm package (a dev dependency), not only its download. */
export type ElectronBinary = { readonly found: true; readonly path: string } | { readonly found: false; readonly reason: string; readonly packageMissing?: true };

/**
 * Where the Electron runtime is, read from the electron package's own files. Unlike
 * importing `electron`, this never starts a download, so it is safe offline and in checks.
 */
export function electronBinary(): ElectronBinary {
  let dir: string;
  try {
    dir = path.dirname(localRequire.resolve('electron/package.json'));
  } catch {
    return { found: false, reason: 'the electron package is not installed', packageMissing: true };
  }
  const override = process.env.ELECTRON_OVERRIDE_DIST_PATH;
  let relative: string;
  try {
    relative = fs.readFileSync(path.join(dir, 'path.txt'), 'utf8');
  } catch {
    return { found: false, reason: 'the Electron runtime was never downloaded (postinstall could not reach its download site)' };
  }
  const binary = path.join(override ?? path.join(dir, 'dist'), relative);
  return fs.existsSync(binary) ? { found: true, path: binary } : { found: false, reason: `the runtime is missing at ${binary}` };
}
