import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { bundledCorpus, readBundledDocument } from './bundled-corpus.js';
import type { Document } from './document.js';
import { DataError } from './errors.js';
import { download, type DownloadProgress } from './download.js';
import { NotTextError, decodeText } from './text-check.js';
import { isWikiText, parsePlainText, parseWikiText } from './wikitext.js';

export type SourceFormat = 'auto' | 'text' | 'wikitext' | 'jsonl';
export const SOURCE_FORMATS: readonly SourceFormat[] = ['auto', 'text', 'wikitext', 'jsonl'];
/** The source name that selects the bundled offline corpus. */
export const BUNDLED_SOURCE = 'bundled';

export interface SourceOptions {
  /** Where URL downloads land (`<dataDir>/downloads`). */
  readonly downloadDir: string;
  readonly format?: SourceFormat;
  /** JSONL: the field holding the text. @default "text" */
  readonly field?: string;
  /** URL: expected sha256 of the download. */
  readonly sha256?: string;
  /** Read at most this many documents (a slice for tests and quick runs). */
  readonly maxDocuments?: number;
  readonly onDownloadProgress?: (p: DownloadProgress) => void;
}

export interface SkippedInput {
  readonly file: string;
  readonly reason: string;
}

/** A corpus ready to be read (more than once: training a tokenizer reads it before tokenizing it). */
export interface CorpusSource {
  readonly description: string;
  /** sha256 of the content (paths relative to the source, bytes, format options): the dataset part of the cache key. */
  readonly hash: string;
  documents(onSkip?: (s: SkippedInput) => void): Iterable<Document>;
}

const TEXT_EXTENSIONS = new Set(['.txt', '.raw', '.tokens', '.text', '.md', '.jsonl', '.ndjson']);

/** Opens `bundled`, an http(s) URL (downloaded, resumable), a file or a folder (its text and JSONL files, sorted). */
export async function openSource(spec: string, options: SourceOptions): Promise<CorpusSource> {
  const format = options.format ?? 'auto';
  const field = options.field ?? 'text';
  const limit = options.maxDocuments ?? Infinity;
  if (spec === BUNDLED_SOURCE) {
    const corpus = bundledCorpus();
    return {
      description: `bundled corpus ${corpus.id} (${corpus.files.length} documents)`,
      hash: sha256(`bundled\0${corpus.id}\0${limit}`),
      documents: () => take(mapIter(corpus.files, readBundledDocument), limit),
    };
  }
  let root = spec;
  if (/^https?:\/\//i.test(spec)) root = await download(spec, options.downloadDir, { sha256: options.sha256, onProgress: options.onDownloadProgress });
  const files = listFiles(root);
  if (files.length === 0) throw new DataError(`source ${spec}: no text files found (looked for ${[...TEXT_EXTENSIONS].join(' ')})`);
  const hash = createHash('sha256').update(`files\0${format}\0${field}\0${limit}\0`);
  for (const f of files) {
    hash.update(path.relative(root, f) + '\0');
    hash.update(fs.readFileSync(f));
  }
  return {
    description: `${spec} (${files.length} file${files.length === 1 ? '' : 's'})`,
    hash: hash.digest('hex'),
    documents: (onSkip) => take(readFiles(files, format, field, onSkip), limit),
  };
}

function listFiles(root: string): string[] {
  let stat: fs.Stats;
  try {
    stat = fs.statSync(root);
  } catch {
    throw new DataError(`source ${root}: no such file or folder`);
  }
  if (stat.isFile()) return [root];
  return fs
    .readdirSync(root, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && TEXT_EXTENSIONS.has(path.extname(e.name).toLowerCase()))
    .map((e) => path.join(e.parentPath, e.name))
    .sort();
}

function* readFiles(files: readonly string[], format: SourceFormat, field: string, onSkip?: (s: SkippedInput) => void): Generator<Document> {
  for (const file of files) {
    let text: string;
    try {
      text = decodeText(file, fs.readFileSync(file));
    } catch (err) {
      if (!(err instanceof NotTextError)) throw err;
      onSkip?.({ file, reason: err.reason });
      continue;
    }
    if (text.trim().length === 0) {
      onSkip?.({ file, reason: 'empty file' });
      continue;
    }
    const fmt = format !== 'auto' ? format : /\.(jsonl|ndjson)$/i.test(file) ? 'jsonl' : isWikiText(text) ? 'wikitext' : 'text';
    if (fmt === 'jsonl') yield* parseJsonl(file, text, field, onSkip);
    else if (fmt === 'wikitext') yield* parseWikiText(text);
    else yield* parsePlainText(path.basename(file), text);
  }
}

function* parseJsonl(file: string, text: string, field: string, onSkip?: (s: SkippedInput) => void): Generator<Document> {
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (line.length === 0) continue;
    let value: unknown;
    try {
      value = (JSON.parse(line) as Record<string, unknown>)[field];
    } catch {
      onSkip?.({ file: `${file}:${i + 1}`, reason: 'not valid JSON' });
      continue;
    }
    if (typeof value !== 'string') {
      onSkip?.({ file: `${file}:${i + 1}`, reason: `no string field "${field}"` });
      continue;
    }
    yield* parsePlainText(`${path.basename(file)}:${i + 1}`, value);
  }
}

function* mapIter<T, U>(items: Iterable<T>, f: (t: T) => U): Generator<U> {
  for (const t of items) yield f(t);
}

function* take<T>(items: Iterable<T>, n: number): Generator<T> {
  if (n <= 0) return;
  let i = 0;
  for (const t of items) {
    yield t;
    if (++i >= n) return;
  }
}

function sha256(s: string): string {
  return createHash('sha256').update(s).digest('hex');
}
