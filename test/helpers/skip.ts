/**
 * A test's `skip` option for tests that need something this machine may lack (a browser, the
 * Electron runtime): `missing` says what is absent, and is said on stderr too, so a run that skipped
 * them shows it. Undefined (run them) when nothing is missing.
 */
export function skipWhenMissing(missing: string | undefined, tests: string): string | undefined {
  if (missing) process.stderr.write(`SKIPPING ${tests}: ${missing}\n`);
  return missing;
}
