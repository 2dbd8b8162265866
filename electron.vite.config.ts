import path from 'node:path';
import { svelte } from '@sveltejs/vite-plugin-svelte';
import { defineConfig } from 'electron-vite';

// One build tool for the three Electron targets; native modules stay external (loaded from node_modules / asar.unpacked).
const external = ['better-sqlite3', 'onnxruntime-node'];

export default defineConfig({
  main: {
    // index: the Electron main process; runtime: the node runtime in its utility process; cli: the `cohort`
    // command (bin/cohort.js runs it outside a checkout); ort-worker, full-state-worker, stream-worker and
    // prepare-worker: their worker threads, loaded from next to the module that starts them
    // (src/util/worker-thread.ts). A bundled module must not declare a top-level `require` (src/ names
    // createRequire's result `localRequire`): electron-vite adds its own to an ES chunk that mentions require( or __dirname.
    build: { outDir: 'out/main', lib: { entry: { index: 'src/main/index.ts', runtime: 'src/main/runtime-process.ts', cli: 'src/cli/main.ts', 'ort-worker': 'src/engine/ort-worker.ts', 'stream-worker': 'src/data/stream-worker.ts', 'prepare-worker': 'src/data/prepare-worker.ts', 'full-state-worker': 'src/collab/full-state-worker.ts', 'shard-io-worker': 'src/shards/shard-io-worker.ts' }, formats: ['es'] }, rollupOptions: { external } },
  },
  preload: {
    // sandboxed preloads must be CommonJS
    build: { outDir: 'out/preload', lib: { entry: 'src/preload/index.ts', formats: ['cjs'] } },
  },
  renderer: {
    root: 'src/renderer',
    build: { outDir: path.resolve('out/renderer'), rollupOptions: { input: path.resolve('src/renderer/index.html') } },
    plugins: [svelte({ configFile: path.resolve('svelte.config.js') })],
  },
});
