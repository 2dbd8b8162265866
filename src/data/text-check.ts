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

const decoder = new TextDecoder('utf-8', { fatal: true });

/**
 * Decodes a file's bytes as UTF-8 text, refusing binary data (NUL bytes) and invalid UTF-8 rather
 * than feeding mojibake into the tokenizer. A UTF-8 byte-order mark is dropped.
 */
export function decodeText(file: string, bytes: Uint8Array): string {
  const probe = bytes.subarray(0, Math.min(bytes.length, 1 << 16));
  if (probe.includes(0)) throw new NotTextError(file, 'binary data (NUL bytes); not a text file');
  let text: string;
  try {
    text = decoder.decode(bytes);
  } catch {
    throw new NotTextError(file, 'not valid UTF-8 text');
  }
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}
