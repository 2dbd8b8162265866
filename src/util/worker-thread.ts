import { Worker, type WorkerOptions } from 'node:worker_threads';

/**
 * The worker entry `name` next to the module at `moduleUrl`: `name.ts` when that module runs from
 * source under tsx, `name.js` in the Electron build (electron.vite.config.ts bundles each worker
 * entry as out/main/<name>.js, next to the code that starts it).
 */
export function siblingEntry(moduleUrl: string, name: string): URL {
  return new URL(`./${name}.${moduleUrl.endsWith('.ts') ? 'ts' : 'js'}`, moduleUrl);
}

/**
 * Starts a worker thread on `entry`. Node 20 applies no `--import tsx` to a worker's entry, so a
 * TypeScript entry (tests, the CLI) is loaded by a small eval entry that registers tsx's loader
 * first, as bin/cohort.js does for the main thread.
 */
export function startWorker(entry: URL, options: Pick<WorkerOptions, 'workerData'> = {}): Worker {
  if (!entry.pathname.endsWith('.ts')) return new Worker(entry, options);
  const bootstrap = `import(${JSON.stringify(import.meta.resolve('tsx/esm/api'))}).then((m) => { m.register(); return import(${JSON.stringify(entry.href)}); })`;
  return new Worker(bootstrap, { ...options, eval: true, execArgv: [] });
}
