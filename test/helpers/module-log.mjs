// Loaded with `node --import` (test/cli/startup.test.ts): appends every module the process loads to the
// file $COHORT_MODULE_LOG, one file URL a line. ESM imports are seen by a resolve hook (which runs in
// the loader thread); CommonJS modules, which bypass the hooks on Node 20, are added from require's
// cache when the process exits.
import fs from 'node:fs';
import { createRequire, register } from 'node:module';
import { pathToFileURL } from 'node:url';
import { isMainThread } from 'node:worker_threads';

const file = process.env.COHORT_MODULE_LOG;
if (!file) throw new Error('module-log.mjs: set COHORT_MODULE_LOG to the file to append to');

export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  fs.appendFileSync(file, `${resolved.url}\n`);
  return resolved;
}

if (isMainThread) {
  register(import.meta.url);
  const cache = createRequire(import.meta.url).cache;
  process.on('exit', () => fs.appendFileSync(file, Object.keys(cache).map((p) => `${pathToFileURL(p).href}\n`).join('')));
}
