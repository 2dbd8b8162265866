import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { ARCHIVE_SUFFIXES, archiveEntries, archiveKindOf, isUnreadFormatName, unreadFormat } from './archive.js';
import { bundledCorpus, readBundledDocument } from './bundled-corpus.js';
import type { Document } from './document.js';
import { DataError } from './errors.js';
import { download, sha256File, type DownloadProgress } from './download.js';
import { LINE_PIECE_CHARS, NotTextError, textLines } from './text-check.js';
import { WIKITEXT_PROBE_LINES, isWikiText, parsePlainText, plainTextSplitter, wikiTextSplitter } from './wikitext.js';

export type SourceFormat = 'auto' | 'text' | 'wikitext' | 'jsonl';
export const SOURCE_FORMATS: readonly SourceFormat[] = ['auto', 'text', 'wikitext', 'jsonl'];
/** The source name that selects the bundled offline corpus. */
const BUNDLED_SOURCE = 'bundled';

export interface SourceOptions {
  /** Where URL downloads land (`<dataDir>/downloads`). */
  readonly downloadDir: string;
  readonly format?: SourceFormat;
  /** JSONL: the field holding the text. @default "text" */
  readonly field?: string;
  /** Expected sha256 of a URL's download or of a local file (not a folder). */
  readonly sha256?: string;
  /** Read at most this many documents (a slice for tests and quick runs). */
  readonly maxDocuments?: number;
  /** A URL's download leaves this many bytes of its disk free (DownloadOptions.reserveBytes). */
  readonly reserveBytes?: number;
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
  /** Streamed: a large file is read line by line, never as one string. */
  documents(onSkip?: (s: SkippedInput) => void): AsyncIterable<Document>;
}

const TEXT_EXTENSIONS = new Set(['.txt', '.raw', '.tokens', '.text', '.md', '.jsonl', '.ndjson']);
const isTextName = (name: string) => TEXT_EXTENSIONS.has(path.extname(name).toLowerCase());
const isArchiveName = (name: string) => archiveKindOf(name) !== undefined;

/**
 * Opens `bundled`, an http(s) URL (downloaded, resumable), a file or a folder (its text, JSONL and
 * archive files, sorted). A `.zip`, `.tar`, `.tar.gz`/`.tgz` is read entry by entry (its text files),
 * a `.gz` as the file it compresses.
 */
export async function openSource(spec: string, options: SourceOptions): Promise<CorpusSource> {
  const format = options.format ?? 'auto';
  const field = options.field ?? 'text';
  const limit = options.maxDocuments ?? Infinity;
  if (spec === BUNDLED_SOURCE) {
    const corpus = bundledCorpus();
    return {
      description: `bundled corpus ${corpus.id} (${corpus.files.length} documents)`,
      hash: createHash('sha256').update(`bundled\0${corpus.id}\0${limit}`).digest('hex'),
      documents: () => take(mapIter(corpus.files, readBundledDocument), limit),
    };
  }
  let root = spec;
  if (/^https?:\/\//i.test(spec)) root = await download(spec, options.downloadDir, { sha256: options.sha256, reserveBytes: options.reserveBytes, onProgress: options.onDownloadProgress });
  else if (options.sha256 !== undefined) await checkLocalSha256(spec, options.sha256);
  const files = listFiles(root);
  if (files.length === 0) throw new DataError(`source ${spec}: no text files found (looked for ${[...TEXT_EXTENSIONS, ...ARCHIVE_SUFFIXES].join(' ')})`);
  const hash = createHash('sha256').update(`files\0${format}\0${field}\0${limit}\0`);
  for (const f of files) {
    hash.update(path.relative(root, f) + '\0');
    let first = true;
    for await (const chunk of fs.createReadStream(f)) {
      hash.update(chunk as Buffer);
      // a .xz or .bz2 dump adds nothing to the data (it is skipped at its first bytes): not read through only to hash it
      if (first && unreadFormat(chunk as Buffer)) break;
      first = false;
    }
  }
  return {
    description: `${spec} (${files.length} file${files.length === 1 ? '' : 's'})`,
    hash: hash.digest('hex'),
    documents: (onSkip) => take(readFiles(files, format, field, onSkip), limit),
  };
}

/** `--sha256` on a local file checks it as it would a download (a WikiText zip fetched by hand); a folder has no one hash. */
async function checkLocalSha256(file: string, expected: string): Promise<void> {
  const stat = fs.statSync(file, { throwIfNoEntry: false });
  if (stat === undefined) return; // listFiles says so
  if (stat.isDirectory()) throw new DataError(`--sha256 checks one file (a download or a local file), but ${file} is a folder`);
  const actual = await sha256File(file);
  if (actual !== expected.toLowerCase()) throw new DataError(`checksum mismatch for ${file}: expected sha256 ${expected.toLowerCase()}, got ${actual}`);
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
    // formats that are not read are listed too, so that they are reported as skipped, saying what to do
    .filter((e) => (isTextName(e.name) || isArchiveName(e.name) || isUnreadFormatName(e.name)) && (e.isFile() || (e.isSymbolicLink() && linksToFile(path.join(e.parentPath, e.name)))))
    .map((e) => path.join(e.parentPath, e.name))
    .sort();
}

/** A link to a file is read as the file (a folder of links to a big disk's files); a link to a folder is not followed (no cycles), nor a broken one. */
function linksToFile(file: string): boolean {
  try {
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

async function* readFiles(files: readonly string[], format: SourceFormat, field: string, onSkip?: (s: SkippedInput) => void): AsyncGenerator<Document> {
  for (const file of files) {
    const kind = archiveKindOf(file);
    if (kind === undefined) {
      yield* readText(file, path.basename(file), fs.createReadStream(file), format, field, onSkip);
      continue;
    }
    for await (const entry of archiveEntries(file, kind)) {
      const name = `${file}:${entry.name}`;
      // a .gz holds one file, named by the user; an archive may hold anything (WikiText's zip has only .raw files)
      if (kind !== 'gz' && !isTextName(entry.name)) onSkip?.({ file: name, reason: `not a text file (read: ${[...TEXT_EXTENSIONS].join(' ')})` });
      else yield* readText(name, path.posix.basename(entry.name), await entry.open(), format, field, onSkip);
    }
  }
}

/** One text file, line by line; `--format auto` decides on its first lines. A file that turns out not to be text is skipped from there on. */
async function* readText(file: string, title: string, chunks: AsyncIterable<Uint8Array>, format: SourceFormat, field: string, onSkip?: (s: SkippedInput) => void): AsyncGenerator<Document> {
  let fmt = format !== 'auto' ? format : /\.(jsonl|ndjson)$/i.test(file) ? 'jsonl' : undefined;
  // a JSONL record is parsed whole; prose is cut into paragraphs of MAX_DOCUMENT_CHARS anyway, so a long line comes in pieces
  const lines = textLines(file, chunks, fmt === 'jsonl' ? {} : { maxPieceChars: LINE_PIECE_CHARS })[Symbol.asyncIterator]();
  let lineNo = 0;
  let text = false;
  try {
    const head: string[] = [];
    if (fmt === undefined) {
      while (head.length < WIKITEXT_PROBE_LINES) {
        const r = await lines.next();
        if (r.done) break;
        head.push(r.value);
      }
      fmt = isWikiText(head) ? 'wikitext' : 'text';
    }
    const splitter = fmt === 'wikitext' ? wikiTextSplitter() : plainTextSplitter(title);
    const all = async function* () {
      yield* head;
      for (let r = await lines.next(); !r.done; r = await lines.next()) yield r.value;
    };
    for await (const line of all()) {
      lineNo++;
      if (!text && line.trim().length > 0) text = true;
      if (fmt === 'jsonl') yield* parseJsonLine(file, title, lineNo, line, field, onSkip);
      else {
        const doc = splitter.line(line);
        if (doc) yield doc;
      }
    }
    const last = fmt === 'jsonl' ? undefined : splitter.end();
    if (last) yield last;
  } catch (err) {
    if (!(err instanceof NotTextError)) throw err;
    onSkip?.({ file, reason: lineNo > 0 ? `${err.reason}; the rest of the file is skipped` : err.reason });
    return;
  } finally {
    await lines.return?.(undefined);
  }
  if (!text) onSkip?.({ file, reason: 'empty file' });
}

function parseJsonLine(file: string, title: string, lineNo: number, raw: string, field: string, onSkip?: (s: SkippedInput) => void): Document[] {
  const where = `${file}:${lineNo}`;
  const line = raw.trim();
  if (line.length === 0) return [];
  let value: unknown;
  try {
    value = (JSON.parse(line) as Record<string, unknown>)[field];
  } catch {
    onSkip?.({ file: where, reason: 'not valid JSON' });
    return [];
  }
  if (typeof value !== 'string') {
    onSkip?.({ file: where, reason: `no string field "${field}"` });
    return [];
  }
  return parsePlainText(`${title}:${lineNo}`, value);
}

async function* mapIter<T, U>(items: Iterable<T>, f: (t: T) => U): AsyncGenerator<U> {
  for (const t of items) yield f(t);
}

async function* take<T>(items: AsyncIterable<T>, n: number): AsyncGenerator<T> {
  if (n <= 0) return;
  let i = 0;
  for await (const t of items) {
    yield t;
    if (++i >= n) return;
  }
}
