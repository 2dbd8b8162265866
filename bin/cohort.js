#!/usr/bin/env node
// Runs the compiled CLI (out/main/cli.js: `npm run build`, shipped in the package). In a checkout with
// dev dependencies it runs the TypeScript sources through tsx instead, so what you edit is what runs.
import fs from 'node:fs';

const source = new URL('../src/cli/main.ts', import.meta.url);
const built = new URL('../out/main/cli.js', import.meta.url);

async function tsxLoader() {
  try {
    return await import('tsx/esm/api');
  } catch (error) {
    if (error?.code === 'ERR_MODULE_NOT_FOUND') return undefined; // installed without dev dependencies
    throw error;
  }
}

const tsx = fs.existsSync(source) ? await tsxLoader() : undefined;
if (tsx) {
  tsx.register();
  await import(source.href);
} else if (fs.existsSync(built)) {
  await import(built.href);
} else {
  console.error(`cohort: the compiled CLI ${built.pathname} is missing; run \`npm run build\` first`);
  process.exitCode = 1;
}
