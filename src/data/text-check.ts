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

/**
 * Decodes a byte stream as UTF-8 text and yields its lines (without `\n` / `\r\n`), holding no more
 * than one chunk and one line: a 500 MB file never becomes one string (Node caps a string at ~512 M
 * characters). Binary data (NUL bytes; a compression or archive that is not read is named), invalid
 * UTF-8 and over-long lines throw NotTextError, which ends the file where it is found. A UTF-8 byte-order mark is dropped.
 */
export async function* textLines(file: string, chunks: AsyncIterable<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder('utf-8', { fatal: true });
  let offset = 0;
  let rest = '';
  const decode = (bytes?: Uint8Array) => {
    try {
      return bytes ? decoder.decode(bytes, { stream: true }) : decoder.decode();
    } catch {
      const at = offset + (bytes ? firstInvalidByte(bytes) : 0);
      throw new NotTextError(file, `not valid UTF-8 text (an invalid byte near offset ${at}); a Latin-1 or Windows-1252 file can be converted first, e.g. \`iconv -f latin1 -t utf-8\``);
    }
  };
  for await (const chunk of chunks) {
    const unread = offset === 0 ? unreadFormat(chunk) : undefined;
    if (unread) throw new NotTextError(file, unread);
    if (chunk.includes(0)) throw new NotTextError(file, `binary data (NUL bytes near byte ${offset}); not a text file`);
    const lines = (rest + decode(chunk)).split('\n');
    offset += chunk.length;
    rest = lines.pop()!;
    if (rest.length > MAX_LINE_CHARS) throw new NotTextError(file, `a line longer than ${MAX_LINE_CHARS} characters (near byte ${offset}); not line-oriented text`);
    for (const line of lines) yield line.endsWith('\r') ? line.slice(0, -1) : line;
  }
  rest += decode();
  if (rest.length > 0) yield rest.endsWith('\r') ? rest.slice(0, -1) : rest;
}

/** Where in `bytes` the first invalid UTF-8 sequence starts (near: a character cut at the chunk's start counts from 0). */
function firstInvalidByte(bytes: Uint8Array): number {
  const text = new TextDecoder('utf-8').decode(bytes);
  const at = text.indexOf('\uFFFD');
  return at < 0 ? 0 : Buffer.byteLength(text.slice(0, at));
}
