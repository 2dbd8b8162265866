import type { Document } from './document.js';

// WikiText-103 raw: ` = Title = ` starts an article, ` = = Section = = ` (and deeper) a subsection.
const ARTICLE_HEADING = /^ ?= ([^=].*?) = ?$/;
const SECTION_HEADING = /^ ?(= ){2,}.*?( =){2,} ?$/;
/** How many leading lines `--format auto` looks at for an article heading. */
export const WIKITEXT_PROBE_LINES = 2000;
/**
 * A plain-text document is closed after this many characters (and continues as "title (part N)"), so
 * a 500 MB text file is never held whole; SOP pairs only lose the few sentence pairs across the cut.
 */
export const MAX_PLAIN_DOCUMENT_CHARS = 1 << 20;

/** True when the lines look like WikiText raw (one of them is an article heading). */
export function isWikiText(lines: readonly string[]): boolean {
  return lines.some((line) => ARTICLE_HEADING.test(line.trimEnd()));
}

/** Receives a file line by line and returns each document as soon as it is complete. */
export interface DocumentSplitter {
  line(raw: string): Document | undefined;
  end(): Document | undefined;
}

/**
 * Splits WikiText raw into articles. Section headings are dropped (they are not prose), blank lines
 * delimit paragraphs, and text before the first heading becomes an untitled article.
 */
export function wikiTextSplitter(): DocumentSplitter {
  let title = '';
  let paragraphs: string[] = [];
  const flush = (): Document | undefined => {
    const doc = paragraphs.length > 0 ? { title, paragraphs } : undefined;
    paragraphs = [];
    return doc;
  };
  return {
    line(raw) {
      const line = raw.trimEnd();
      if (SECTION_HEADING.test(line)) return undefined;
      const article = ARTICLE_HEADING.exec(line);
      if (article) {
        const done = flush();
        title = article[1]!.trim();
        return done;
      }
      const para = line.trim();
      if (para.length > 0) paragraphs.push(para);
      return undefined;
    },
    end: flush,
  };
}

/** Plain text: a file is one document (cut every MAX_PLAIN_DOCUMENT_CHARS), blank lines delimit paragraphs (lines inside one are joined). */
export function plainTextSplitter(title: string): DocumentSplitter {
  let part = 1;
  let paragraphs: string[] = [];
  let chars = 0;
  let lines: string[] = [];
  const closeParagraph = () => {
    const para = lines.join(' ').replace(/\s+/g, ' ').trim();
    lines = [];
    if (para.length === 0) return;
    paragraphs.push(para);
    chars += para.length;
  };
  const flush = (): Document | undefined => {
    const doc = paragraphs.length > 0 ? { title: part === 1 ? title : `${title} (part ${part})`, paragraphs } : undefined;
    if (doc) part++;
    paragraphs = [];
    chars = 0;
    return doc;
  };
  return {
    line(raw) {
      if (raw.trim().length > 0) {
        lines.push(raw);
        return undefined;
      }
      closeParagraph();
      return chars >= MAX_PLAIN_DOCUMENT_CHARS ? flush() : undefined;
    },
    end() {
      closeParagraph();
      return flush();
    },
  };
}

/** A whole string as plain text (a JSONL record's text field). */
export function parsePlainText(title: string, text: string): Document[] {
  const splitter = plainTextSplitter(title);
  const docs: Document[] = [];
  for (const line of text.split('\n')) {
    const doc = splitter.line(line);
    if (doc) docs.push(doc);
  }
  const last = splitter.end();
  if (last) docs.push(last);
  return docs;
}
