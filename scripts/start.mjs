// `npm start`: opens the desktop app where the Electron runtime is installed; otherwise runs the
// headless node, which serves the dashboard on http://127.0.0.1:<port> (extra args go to it).
// Either way the app is built first when out/ is missing or older than its sources.
import { spawn } from 'node:child_process';
import { register } from 'tsx/esm/api';

register();
const { electronBinary } = await import('../src/doctor/electron.ts');
const { ensureBuilt } = await import('./build.mjs');

const electron = electronBinary();
try {
  ensureBuilt();
} catch (err) {
  if (electron.found) throw err;
  console.warn(`The dashboard could not be built (${err.message}); the node still serves its API and a page saying so.`);
}
let command;
if (electron.found) {
  command = [electron.path, ['.', ...process.argv.slice(2)]];
} else {
  console.log(`Electron is not available: ${electron.reason}. Starting the headless node instead.`);
  command = [process.execPath, ['bin/cohort.js', 'start', ...process.argv.slice(2)]];
}
const child = spawn(command[0], command[1], { stdio: 'inherit' });
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
