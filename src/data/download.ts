import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { rateFloorMs } from '../util/rate-floor.js';
import { DownloadError } from './errors.js';

export interface DownloadProgress {
  readonly url: string;
  /** Bytes on disk so far (including what an earlier attempt left). */
  readonly received: number;
  /** Total size when the server says it; otherwise undefined. */
  readonly total: number | undefined;
  /** 1-based attempt number; more than 1 means the download is resuming. */
  readonly attempt: number;
}

export interface DownloadOptions {
  /** Expected sha256 (hex) of the complete file; a mismatch is an error and the bad file is removed. */
  readonly sha256?: string;
  /** What it throws (a stop the caller asked for) ends the download at once, not retried; the part stays. */
  readonly onProgress?: (p: DownloadProgress) => void;
  /** Attempts before giving up (each one resumes where the last stopped). @default 5 */
  readonly attempts?: number;
  /** A connection with no data for this long is dropped and resumed. @default 30 s */
  readonly idleTimeoutMs?: number;
  /**
   * A response averaging under this many bytes per second (an idle timeout's grace on top) is dropped
   * and resumed: a server sending a byte just within the idle timeout never idles, and would hold the
   * download for ever. 0: no floor. @default 16 KiB/s
   */
  readonly minBytesPerSecond?: number;
  /**
   * Free space a download leaves on the disk it writes to: a file larger than the rest is refused before
   * it is written, and a response with no length (chunked) is cut where it would pass it, so a server
   * cannot fill the disk. @default DEFAULT_RESERVE_BYTES (1 GiB)
   */
  readonly reserveBytes?: number;
}

/** DownloadOptions.minBytesPerSecond's default: a link far slower would take days for a training corpus anyway. */
const MIN_BYTES_PER_SECOND = 16 * 1024;

/** DownloadOptions.reserveBytes's default (`--disk-reserve`'s): room for the run's checkpoints and prepared shards after the download. */
export const DEFAULT_RESERVE_BYTES = 1024 ** 3;

/** The file name a URL lands under in the downloads folder (last path segment, made safe). */
function downloadName(url: string): string {
  const last = decodeURIComponent(new URL(url).pathname.split('/').filter(Boolean).pop() ?? 'download');
  return last.replace(/[^A-Za-z0-9._-]/g, '_') || 'download';
}

/**
 * Where `url` lands in `dir`: `<url key>/<name>`, the key a hash of the whole URL, so two URLs that end
 * in the same name (two mirrors, two versions) never take each other's file or resume each other's part.
 */
export function downloadPath(url: string, dir: string): string {
  return path.join(dir, createHash('sha256').update(url).digest('hex').slice(0, 16), downloadName(url));
}

/**
 * Downloads `url` into `dir` and returns the complete file's path (downloadPath). Bytes go to
 * `<name>.part`, which a later call resumes with an HTTP Range request; only a complete (and, with
 * `sha256`, verified) file is renamed to `<name>`, so a partial download is never taken as complete.
 */
export async function download(url: string, dir: string, options: DownloadOptions = {}): Promise<string> {
  const target = downloadPath(url, dir);
  const part = `${target}.part`;
  const expected = options.sha256?.toLowerCase();
  if (expected !== undefined && !/^[0-9a-f]{64}$/.test(expected)) throw new DownloadError(`sha256 for ${url}: "${options.sha256}" is not 64 hex digits`);
  if (fs.existsSync(target)) {
    if (expected === undefined || (await sha256File(target)) === expected) return target;
    fs.rmSync(target);
  }
  const attempts = options.attempts ?? 5;
  let lastError: unknown;
  for (let attempt = 1; attempt <= attempts; attempt++) {
    try {
      const complete = await fetchInto(url, part, attempt, options);
      if (!complete) continue;
      if (expected !== undefined) {
        const actual = await sha256File(part);
        if (actual !== expected) {
          discardPart(part);
          throw new DownloadError(`checksum mismatch for ${url}: expected sha256 ${expected}, got ${actual}; the file was deleted`);
        }
      }
      fs.renameSync(part, target);
      fs.rmSync(validatorFile(part), { force: true });
      return target;
    } catch (err) {
      if (err instanceof CallbackError) throw err.error;
      if (err instanceof DownloadError) throw err;
      lastError = err;
    }
  }
  const have = fs.existsSync(part) ? fs.statSync(part).size : 0;
  throw new DownloadError(`download of ${url} failed after ${attempts} attempts (${have} bytes kept in ${part} for a later resume): ${lastError === undefined ? 'incomplete response' : reasonOf(lastError)}`);
}

/** What onProgress threw, carried past the retry loop. */
class CallbackError extends Error {
  constructor(readonly error: unknown) {
    super('onProgress threw');
  }
}

/** An error's message with its causes': fetch() says only "fetch failed" and keeps why (ECONNREFUSED, a DNS or TLS failure) in `cause`. */
function reasonOf(err: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = err; e instanceof Error && parts.length < 4; e = e.cause) parts.push(e.message);
  return parts.length > 0 ? parts.join(': ') : String(err);
}

/** One request: appends to `part` from where it ends. Returns true when the file is known complete. */
async function fetchInto(url: string, part: string, attempt: number, options: DownloadOptions): Promise<boolean> {
  const have = fs.existsSync(part) ? fs.statSync(part).size : 0;
  const controller = new AbortController();
  const idleMs = options.idleTimeoutMs ?? 30_000;
  let idle = setTimeout(() => controller.abort(new Error(`no data for ${idleMs} ms`)), idleMs);
  try {
    // If-Range: a server whose file changed since the part began sends all of the new one (200), not its tail
    const validator = have > 0 && fs.existsSync(validatorFile(part)) ? fs.readFileSync(validatorFile(part), 'utf8') : undefined;
    const headers: Record<string, string> = have > 0 ? { Range: `bytes=${have}-`, ...(validator ? { 'If-Range': validator } : {}) } : {};
    const res = await fetch(url, { headers, signal: controller.signal, redirect: 'follow' });
    if (res.status === 416 && have > 0) {
      await res.body?.cancel();
      // Range beyond the end: the part holds everything the server has when its size is the server's
      // (`Content-Range: bytes */N`); otherwise it is of another version of the file, and starts again.
      if (/^bytes \*\/(\d+)$/.exec(res.headers.get('content-range') ?? '')?.[1] === String(have)) return true;
      fs.rmSync(part);
      return false;
    }
    if (res.status !== 200 && res.status !== 206) {
      await res.body?.cancel();
      throw new DownloadError(`GET ${url}: HTTP ${res.status} ${res.statusText}`);
    }
    const resumed = res.status === 206;
    if (resumed && /^bytes (\d+)-/.exec(res.headers.get('content-range') ?? '')?.[1] !== String(have)) {
      // bytes from elsewhere than the part's end would be appended at the wrong place: start again
      await res.body?.cancel();
      fs.rmSync(part);
      return false;
    }
    let offset = resumed ? have : 0;
    const total = totalSize(res, offset);
    fs.mkdirSync(path.dirname(part), { recursive: true });
    // what this response may add: a restarted part's bytes are freed when it is rewritten
    const reserve = options.reserveBytes ?? DEFAULT_RESERVE_BYTES;
    const disk = fs.statfsSync(path.dirname(part));
    const room = disk.bavail * disk.bsize + (resumed ? 0 : have) - reserve;
    const bound = `${room} bytes (the disk holding ${path.dirname(part)} has ${disk.bavail * disk.bsize} bytes free, ${reserve} of them kept free)`;
    if (total !== undefined && total - offset > room) {
      await res.body?.cancel();
      throw new DownloadError(`GET ${url}: the file is ${total} bytes, ${total - offset} of them still to download, more than ${bound}`);
    }
    if (!resumed) keepValidator(part, res);
    const floor = options.minBytesPerSecond ?? MIN_BYTES_PER_SECOND;
    const started = performance.now();
    const from = offset;
    let overrun = false;
    let full = false;
    const out = fs.openSync(part, resumed ? 'a' : 'w');
    try {
      if (!res.body) throw new DownloadError(`GET ${url}: empty response body`);
      for await (const chunk of res.body) {
        clearTimeout(idle);
        idle = setTimeout(() => controller.abort(new Error(`no data for ${idleMs} ms`)), idleMs);
        if (total !== undefined && offset + (chunk as Uint8Array).length > total) {
          overrun = true;
          break;
        }
        if (offset - from + (chunk as Uint8Array).length > room) {
          full = true;
          break;
        }
        fs.writeSync(out, chunk as Uint8Array);
        offset += (chunk as Uint8Array).length;
        try {
          options.onProgress?.({ url, received: offset, total, attempt });
        } catch (error) {
          throw new CallbackError(error);
        }
        const elapsedMs = performance.now() - started;
        if (floor > 0 && elapsedMs > rateFloorMs(offset - from, idleMs, floor)) {
          throw new Error(`the server sent ${offset - from} bytes in ${(elapsedMs / 1000).toFixed(1)} s (${((1000 * (offset - from)) / elapsedMs).toFixed(1)} B/s), under the floor of ${floor} B/s`);
        }
      }
      if (!overrun && !full) fs.fsyncSync(out);
    } finally {
      fs.closeSync(out);
    }
    if (full) {
      // only a server sending no length gets here (a length is checked above); its file cannot be completed on this disk
      discardPart(part);
      throw new DownloadError(`GET ${url}: the server sent more than ${bound}, with no length announced; the partial file was deleted`);
    }
    if (overrun) {
      // the bytes past the announced size are not the file, and the server that sent them cannot say which are
      discardPart(part);
      throw new DownloadError(`GET ${url}: the server sent more than the ${total} bytes it announced (${res.headers.has('content-range') ? 'Content-Range' : 'Content-Length'}); the partial file was deleted`);
    }
    // Without a length the server gave no way to tell a cut connection from the end; a clean end counts.
    return total === undefined || offset >= total;
  } finally {
    clearTimeout(idle);
  }
}

/** Beside `<name>.part`: the version (ETag or Last-Modified) of the file the part holds the start of. */
const validatorFile = (part: string) => `${part}.version`;

/** Deletes a part whose bytes are not the file (a checksum mismatch, bytes past the announced size, a body the disk cannot hold) and its validator, so the next try starts afresh. */
function discardPart(part: string): void {
  fs.rmSync(part);
  fs.rmSync(validatorFile(part), { force: true });
}

/** Keeps what identifies the version a fresh part starts from; a weak ETag cannot go in If-Range, so Last-Modified is kept then. */
function keepValidator(part: string, res: Response): void {
  const etag = res.headers.get('etag');
  const validator = etag !== null && !etag.startsWith('W/') ? etag : res.headers.get('last-modified');
  if (validator !== null) fs.writeFileSync(validatorFile(part), validator);
  else fs.rmSync(validatorFile(part), { force: true });
}

function totalSize(res: Response, offset: number): number | undefined {
  const range = res.headers.get('content-range');
  const m = range ? /\/(\d+)$/.exec(range) : null;
  if (m) return Number(m[1]);
  const len = res.headers.get('content-length');
  return len === null ? undefined : offset + Number(len);
}

export async function sha256File(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of fs.createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}
