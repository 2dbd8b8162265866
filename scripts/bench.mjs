// `npm run bench -- <name> [args…]` runs bench/<name>.ts (or bench/<name>/index.ts) under tsx.
// Convention for every benchmark: human-readable lines first, then exactly one JSON object with its
// figures as the very last line of stdout (issues name the keys).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const [name, ...rest] = process.argv.slice(2);
const available = fs
  .readdirSync('bench', { withFileTypes: true })
  .filter((e) => (e.isFile() && e.name.endsWith('.ts') && !e.name.startsWith('_')) || (e.isDirectory() && fs.existsSync(path.join('bench', e.name, 'index.ts'))))
  .map((e) => e.name.replace(/\.ts$/, ''))
  .sort();
if (!name || !available.includes(name)) {
  console.error(`usage: npm run bench -- <name> [args…]\navailable: ${available.join(', ') || '(none)'}`);
  process.exit(2);
}
const file = fs.existsSync(path.join('bench', `${name}.ts`)) ? path.join('bench', `${name}.ts`) : path.join('bench', name, 'index.ts');
const result = spawnSync(process.execPath, ['--import', 'tsx', file, ...rest], { stdio: 'inherit' });
process.exit(result.status ?? 1);
