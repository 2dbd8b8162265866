/** The URL scheme the app registers: a join code is itself a link (`cohort:` + base64url). */
export const LINK_SCHEME = 'cohort';

/**
 * The join code a `cohort:` link holds, normalised: operating systems and browsers may hand it over as
 * `cohort://CODE` or with a trailing slash, and base64url has no slashes, so both are dropped.
 * Undefined when `text` is not a `cohort:` link.
 */
function joinCodeOfLink(text: string): string | undefined {
  const m = /^cohort:(?:\/\/)?([^/]*)\/?$/i.exec(text.trim());
  return m && m[1] ? `${LINK_SCHEME}:${m[1]}` : undefined;
}

/** The first `cohort:` link in a process's arguments (how Windows and Linux pass an opened link). */
export function linkFromArgv(argv: readonly string[]): string | undefined {
  for (const arg of argv) {
    const code = joinCodeOfLink(arg);
    if (code) return code;
  }
  return undefined;
}
