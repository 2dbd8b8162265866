import fs from 'node:fs';
import path from 'node:path';

/** Content types of the files the renderer build emits. */
const CONTENT_TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
};

export type StaticLookup = { readonly found: true; readonly file: string; readonly contentType: string } | { readonly found: false; readonly status: 400 | 404 };

/**
 * Maps a URL path to a file inside `root`, refusing anything that would leave it (`..`, encoded
 * separators, NUL bytes, symlinks pointing out) and anything that is not a regular file.
 */
export function resolveStatic(root: string, urlPath: string): StaticLookup {
  let decoded: string;
  try {
    decoded = decodeURIComponent(urlPath);
  } catch {
    return { found: false, status: 400 };
  }
  if (decoded.includes('\0') || decoded.includes('\\')) return { found: false, status: 400 };
  const relative = decoded === '/' || decoded === '' ? 'index.html' : decoded.replace(/^\/+/, '');
  const realRoot = fs.realpathSync(root);
  const candidate = path.resolve(realRoot, relative);
  if (candidate !== realRoot && !candidate.startsWith(realRoot + path.sep)) return { found: false, status: 400 };
  let real: string;
  try {
    real = fs.realpathSync(candidate);
  } catch {
    return { found: false, status: 404 };
  }
  if (!real.startsWith(realRoot + path.sep) || !fs.statSync(real).isFile()) return { found: false, status: 404 };
  return { found: true, file: real, contentType: CONTENT_TYPES[path.extname(real).toLowerCase()] ?? 'application/octet-stream' };
}
