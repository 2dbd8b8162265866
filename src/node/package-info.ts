import { createRequire } from 'node:module';

/** This package's version and licence, read from package.json (two folders up from src/node/ and from out/main/ alike). */
export const PACKAGE_INFO = createRequire(import.meta.url)('../../package.json') as { readonly version: string; readonly license: string };
