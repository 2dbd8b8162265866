import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import tar from 'tar-stream';
import yauzl from 'yauzl';
import { DataError } from './errors.js';

export type ArchiveKind = 'zip' | 'tar' | 'tar.gz' | 'gz';
/** File names that are read as archives (WikiText-103 ships as `wikitext-103-raw-v1.zip`). */
export const ARCHIVE_SUFFIXES: readonly string[] = ['.zip', '.tar', '.tar.gz', '.tgz', '.gz'];

/**
 * Compressions and archive formats that are not read, known by their first bytes (a file of any name,
 * an archive's entry) and in a folder by their suffix: such a file is skipped saying what it is and
 * what to do, not as mere binary data. bzip2's "BZh" and level go on to a block's (π) or the end's
 * (√π) magic, so a text beginning "BZh9" is still text.
 */
const UNREAD_FORMATS = [
  { suffix: '.xz', magic: ['\xfd7zXZ\x00'], what: 'xz-compressed data', unpack: 'xz -dk' },
  { suffix: '.bz2', magic: ['1AY&SY', '\x17rE8P\x90'].flatMap((block) => [...'123456789'].map((level) => `BZh${level}${block}`)), what: 'bzip2-compressed data', unpack: 'bunzip2 -k' },
  { suffix: '.zst', magic: ['\x28\xb5\x2f\xfd'], what: 'zstd-compressed data', unpack: 'unzstd' },
  { suffix: '.7z', magic: ['7z\xbc\xaf\x27\x1c'], what: 'a 7z archive', unpack: '7z x' },
  { suffix: '.rar', magic: ['Rar!\x1a\x07'], what: 'a RAR archive', unpack: 'unrar x' },
] as const;

/** Whether a file's name says a format that is not read (a folder's such files are reported, not passed over). */
export function isUnreadFormatName(file: string): boolean {
  const name = file.toLowerCase();
  return UNREAD_FORMATS.some((f) => name.endsWith(f.suffix));
}

/** Why bytes starting with `head` are not read as text, when they are a compression or an archive format that is not read. */
export function unreadFormat(head: Uint8Array): string | undefined {
  const start = Buffer.from(head.subarray(0, 16)).toString('latin1');
  const f = UNREAD_FORMATS.find((u) => u.magic.some((m) => start.startsWith(m)));
  return f && `${f.what}, which is not read: unpack it first (e.g. \`${f.unpack}\`), or give it as ${ARCHIVE_SUFFIXES.join(' ')}`;
}

/** The archive kind a file name says, or undefined for a plain file. */
export function archiveKindOf(file: string): ArchiveKind | undefined {
  const name = file.toLowerCase();
  if (name.endsWith('.zip')) return 'zip';
  if (name.endsWith('.tar')) return 'tar';
  if (name.endsWith('.tar.gz') || name.endsWith('.tgz')) return 'tar.gz';
  if (name.endsWith('.gz')) return 'gz';
  return undefined;
}

/** One file inside an archive; `open` streams its (decompressed) bytes and may be called once, before the next entry. */
export interface ArchiveEntry {
  /** Path inside the archive (for `.gz`: the file name without `.gz`). */
  readonly name: string;
  open(): Promise<AsyncIterable<Uint8Array>>;
}

/**
 * The regular files of an archive, in archive order, streamed: nothing is held in memory beyond a
 * chunk, so a 500 MB `wiki.train.raw` inside a zip is read like a file. An entry the caller does not
 * open is skipped. Breaking out of the loop closes the archive.
 */
export async function* archiveEntries(file: string, kind: ArchiveKind): AsyncGenerator<ArchiveEntry> {
  try {
    for await (const entry of entriesOf(file, kind)) yield { name: entry.name, open: async () => namingArchive(file, kind, await entry.open()) };
  } catch (err) {
    throw archiveError(file, kind, err);
  }
}

function entriesOf(file: string, kind: ArchiveKind): AsyncGenerator<ArchiveEntry> {
  if (kind === 'zip') return zipEntries(file);
  if (kind === 'gz') return gzEntries(file);
  return tarEntries(file, kind === 'tar.gz');
}

async function* gzEntries(file: string): AsyncGenerator<ArchiveEntry> {
  yield { name: path.basename(file).replace(/\.gz$/i, ''), open: async () => fs.createReadStream(file).pipe(zlib.createGunzip()) };
}

function archiveError(file: string, kind: ArchiveKind, err: unknown): DataError {
  if (err instanceof DataError) return err;
  return new DataError(`archive ${file}: cannot read it as ${kind} (${(err as Error).message})`, { cause: err });
}

/** An entry's bytes: a truncated or damaged archive fails while they are read, and that error names the archive too. */
async function* namingArchive(file: string, kind: ArchiveKind, chunks: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
  try {
    yield* chunks;
  } catch (err) {
    throw archiveError(file, kind, err);
  }
}

async function* zipEntries(file: string): AsyncGenerator<ArchiveEntry> {
  const zip = await yauzl.openPromise(file, { lazyEntries: true, autoClose: false });
  try {
    for await (const entry of zip.eachEntry()) {
      if (entry.fileName.endsWith('/') || isZipSymlink(entry)) continue; // a folder; a link's bytes are a path, not text
      yield { name: entry.fileName, open: () => zip.openReadStreamPromise(entry) };
    }
  } finally {
    zip.close();
  }
}

/** A symbolic link stored by a Unix zip tool (`zip -y`): its mode is in the upper half of the external attributes. */
function isZipSymlink(entry: yauzl.Entry): boolean {
  return entry.versionMadeBy >> 8 === 3 && ((entry.externalFileAttributes >>> 16) & 0o170000) === 0o120000;
}

async function* tarEntries(file: string, gzipped: boolean): AsyncGenerator<ArchiveEntry> {
  const input = fs.createReadStream(file);
  const extract = tar.extract();
  // pipe() does not forward errors: a truncated gzip or a read error must end the iteration
  const fail = (err: Error) => extract.destroy(err);
  input.on('error', fail);
  if (gzipped) {
    const gunzip = zlib.createGunzip();
    gunzip.on('error', fail);
    input.pipe(gunzip).pipe(extract);
  } else input.pipe(extract);
  try {
    for await (const entry of extract) {
      if (entry.header.type === 'file' || entry.header.type === 'contiguous-file') {
        yield { name: entry.header.name, open: async () => chunksOf(entry) };
      }
      // tar is sequential: what the caller did not read is drained before the next header
      entry.resume();
    }
  } finally {
    input.destroy();
    extract.destroy();
  }
}

/**
 * An entry's chunks, read without ever calling the entry iterator's return(): a caller that stops
 * early (a binary file) would otherwise destroy the entry, and a destroyed entry stalls the tar
 * extractor for good; here the rest is drained by resume() instead.
 */
async function* chunksOf(entry: AsyncIterable<unknown>): AsyncGenerator<Uint8Array> {
  const it = entry[Symbol.asyncIterator]();
  for (let r = await it.next(); !r.done; r = await it.next()) yield r.value as Uint8Array;
}
