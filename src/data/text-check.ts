import { unreadFormat } from './archive.js';

/** Why a file was not read as text; the caller skips it with a counted warning. */
export class NotTextError extends Error {
  override readonly name = 'NotTextError';
  constructor(
    readonly file: string,
    readonly reason: string,
  ) {
    super(`${file}: ${reason}`);
  }
}

/** Longer lines mean the input is not line-oriented text; holding one would defeat reading as a stream. */
const MAX_LINE_CHARS = 16 * 1024 * 1024;
/** How prose is read (TextLinesOptions.maxPieceChars): well below MAX_DOCUMENT_CHARS, so that a paragraph made of pieces stays near that size. */
export const LINE_PIECE_CHARS = 64 * 1024;

export interface TextLinesOptions {
  /**
   * A line longer than this is yielded in pieces of at most this many characters, each cut after a
   * whitespace character where the second half of the piece has one (joined, the pieces are the line):
   * a file of one 100 MB line (text8) is read holding a chunk and a piece, and any line length is accepted.
   * Without it a line is yielded whole (a JSONL record must be parsed whole), up to MAX_LINE_CHARS.
   */
  readonly maxPieceChars?: number;
}

/**
 * Decodes a byte stream as UTF-8 text and yields its lines (without `\n` / `\r\n`), holding no more
 * than one chunk and one line (or piece of a line): a 500 MB file never becomes one string (Node caps
 * a string at ~512 M characters). Binary data (NUL bytes; a compression or archive that is not read
 * is named), invalid UTF-8 and over-long lines throw NotTextError, which ends the file where it is
 * found. A UTF-8 byte-order mark is dropped.
 */
export async function* textLines(file: string, chunks: AsyncIterable<Uint8Array>, options: TextLinesOptions = {}): AsyncGenerator<string> {
  const { maxPieceChars } = options;
  const decoder = new TextDecoder('utf-8', { fatal: true });
  let offset = 0;
  // the line read so far, as decoded (joined only when it ends or grows past a piece)
  let parts: string[] = [];
  let partChars = 0;
  const decode = (bytes?: Uint8Array) => {
    try {
      return bytes ? decoder.decode(bytes, { stream: true }) : decoder.decode();
    } catch {
      const at = offset + (bytes ? firstInvalidByte(bytes) : 0);
      throw new NotTextError(file, `not valid UTF-8 text (an invalid byte near offset ${at}); a Latin-1 or Windows-1252 file can be converted first, e.g. \`iconv -f latin1 -t utf-8\``);
    }
  };
  const takeLine = (last: string): string => {
    parts.push(last);
    const line = parts.join('');
    parts = [];
    partChars = 0;
    return line.endsWith('\r') ? line.slice(0, -1) : line;
  };
  for await (const chunk of chunks) {
    const unread = offset === 0 ? unreadFormat(chunk) : undefined;
    if (unread) throw new NotTextError(file, unread);
    if (chunk.includes(0)) throw new NotTextError(file, `binary data (NUL bytes near byte ${offset}); not a text file`);
    const text = decode(chunk);
    offset += chunk.length;
    let from = 0;
    for (let nl = text.indexOf('\n'); nl >= 0; nl = text.indexOf('\n', from)) {
      const line = takeLine(text.slice(from, nl));
      from = nl + 1;
      if (maxPieceChars === undefined || line.length <= maxPieceChars) yield line;
      else yield* pieces(line, maxPieceChars);
    }
    const tail = text.slice(from);
    if (tail.length === 0) continue;
    parts.push(tail);
    partChars += tail.length;
    if (maxPieceChars === undefined) {
      if (partChars > MAX_LINE_CHARS) throw new NotTextError(file, `a line longer than ${MAX_LINE_CHARS} characters (near byte ${offset}); not line-oriented text`);
    } else if (partChars > maxPieceChars) {
      // the line goes on: all but its last (unfinished) piece leave now
      const done = [...pieces(parts.join(''), maxPieceChars)];
      parts = [done.pop()!];
      partChars = parts[0]!.length;
      yield* done;
    }
  }
  const last = takeLine(decode());
  yield* pieces(last, maxPieceChars ?? Infinity);
}

/** `line` in pieces of at most `maxChars` (the last one holds what is left); joined, they are `line`. */
function* pieces(line: string, maxChars: number): Generator<string> {
  let rest = line;
  while (rest.length > maxChars) {
    const end = pieceEnd(rest, maxChars);
    yield rest.slice(0, end);
    rest = rest.slice(end);
  }
  if (rest.length > 0) yield rest;
}

/** Where the first piece of a too-long line ends: after its last whitespace in the second half of `maxChars`, else at `maxChars` (not inside a surrogate pair). */
function pieceEnd(line: string, maxChars: number): number {
  for (let i = maxChars - 1; i >= maxChars >> 1; i--) if (WHITESPACE.test(line[i]!)) return i + 1;
  const code = line.charCodeAt(maxChars - 1);
  return code >= 0xd800 && code <= 0xdbff ? maxChars - 1 : maxChars;
}
const WHITESPACE = /\s/;

/** Where in `bytes` the first invalid UTF-8 sequence starts (near: a character cut at the chunk's start counts from 0). */
function firstInvalidByte(bytes: Uint8Array): number {
  const text = new TextDecoder('utf-8').decode(bytes);
  const at = text.indexOf('\uFFFD');
  return at < 0 ? 0 : Buffer.byteLength(text.slice(0, at));
}
