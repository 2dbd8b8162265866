import type { Document } from './document.js';

// WikiText-103 raw: ` = Title = ` starts an article, ` = = Section = = ` (and deeper) a subsection.
const ARTICLE_HEADING = /^ ?= ([^=].*?) = ?$/;
const SECTION_HEADING = /^ ?(= ){2,}.*?( =){2,} ?$/;
/** How many leading lines `--format auto` looks at for an article heading. */
export const WIKITEXT_PROBE_LINES = 2000;
/**
 * A document (an article, a plain-text file) is closed after this many characters and continues as
 * "title (part N)", and so is a paragraph (lines with no blank line between them), so a 500 MB file
 * is never held whole, however it is laid out; SOP pairs only lose the few sentence pairs across a cut.
 */
export const MAX_DOCUMENT_CHARS = 1 << 20;

/** True when the lines look like WikiText raw (one of them is an article heading). */
export function isWikiText(lines: readonly string[]): boolean {
  return lines.some((line) => ARTICLE_HEADING.test(line.trimEnd()));
}

/** Receives a file line by line and returns each document as soon as it is complete. */
export interface DocumentSplitter {
  line(raw: string): Document | undefined;
  end(): Document | undefined;
}

/** Paragraphs gathered into documents of about MAX_DOCUMENT_CHARS: one that reaches it is returned, and its title goes on as "title (part N)". */
function documentBuilder(firstTitle: string) {
  let title = firstTitle;
  let part = 1;
  let paragraphs: string[] = [];
  let chars = 0;
  const flush = (): Document | undefined => {
    const doc = paragraphs.length > 0 ? { title: part === 1 ? title : `${title} (part ${part})`, paragraphs } : undefined;
    if (doc) part++;
    paragraphs = [];
    chars = 0;
    return doc;
  };
  return {
    add(paragraph: string): Document | undefined {
      paragraphs.push(paragraph);
      chars += paragraph.length;
      return chars >= MAX_DOCUMENT_CHARS ? flush() : undefined;
    },
    flush,
    /** Closes the current document and starts one titled `next`. */
    retitle(next: string): Document | undefined {
      const done = flush();
      title = next;
      part = 1;
      return done;
    },
  };
}

/**
 * Splits WikiText raw into articles. Section headings are dropped (they are not prose), blank lines
 * delimit paragraphs, and text before the first heading becomes an untitled article.
 */
export function wikiTextSplitter(): DocumentSplitter {
  const docs = documentBuilder('');
  return {
    line(raw) {
      const line = raw.trimEnd();
      if (SECTION_HEADING.test(line)) return undefined;
      const article = ARTICLE_HEADING.exec(line);
      if (article) return docs.retitle(article[1]!.trim());
      const para = line.trim();
      return para.length > 0 ? docs.add(para) : undefined;
    },
    end: docs.flush,
  };
}

/** Plain text: a file is one document (cut every MAX_DOCUMENT_CHARS), blank lines delimit paragraphs (lines inside one are joined). */
export function plainTextSplitter(title: string): DocumentSplitter {
  const docs = documentBuilder(title);
  let lines: string[] = [];
  let lineChars = 0;
  const closeParagraph = (): Document | undefined => {
    const para = lines.join(' ').replace(/\s+/g, ' ').trim();
    lines = [];
    lineChars = 0;
    return para.length > 0 ? docs.add(para) : undefined;
  };
  return {
    line(raw) {
      if (raw.trim().length === 0) return closeParagraph();
      lines.push(raw);
      lineChars += raw.length + 1; // and the space that joins it
      // one sentence per line and no blank line (a common corpus layout) would otherwise be one paragraph
      return lineChars >= MAX_DOCUMENT_CHARS ? closeParagraph() : undefined;
    },
    end() {
      return closeParagraph() ?? docs.flush();
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
