/**
 * What a client keeps per language server about documents: the ones it has
 * open (as last sent) and the latest `publishDiagnostics` of each, with what
 * a publish must match to answer for the text that was sent last.
 */
import { fileURLToPath } from "node:url";

import type { Diagnostic, PublishDiagnosticsParams } from "vscode-languageserver-protocol";

/** A document the server has open, as last sent. */
export interface OpenDocument {
  uri: string;
  /** Its real path. */
  path: string;
  languageId: string;
  version: number;
  text: string;
  /** The connection's settings pushes when it was last sent. */
  pushes: number;
  /** The publish sequence number from which on a version-less publish counts for it. */
  after: number;
}

/** What to tell the server so it has the current text. */
export type Sync = { send: "open" | "change" | "nothing"; document: OpenDocument };

interface Publish {
  seq: number;
  version: number | undefined;
  diagnostics: Diagnostic[];
}

export class Documents {
  readonly #open = new Map<string, OpenDocument>();
  readonly #latest = new Map<string, Publish>();
  readonly #listeners = new Set<() => void>();
  #nextSeq = 0;

  /**
   * Records `text` as the server's copy of the file at `path`: new (open it),
   * changed on disk or sent before the latest settings push (send it again,
   * so the answer reflects the new settings even where a server re-validates
   * only on change), or as sent.
   */
  sync(path: string, uri: string, languageId: string, text: string, pushes: number): Sync {
    const after = this.#nextSeq;
    const known = this.#open.get(path);
    if (!known) {
      const document = { uri, path, languageId, version: 1, text, pushes, after };
      this.#open.set(path, document);
      return { send: "open", document };
    }
    if (known.text === text && known.pushes === pushes) return { send: "nothing", document: known };
    Object.assign(known, { version: known.version + 1, text, pushes, after });
    return { send: "change", document: known };
  }

  /** Every open document, to open again on a process that replaces this one. */
  list(): OpenDocument[] {
    return [...this.#open.values()];
  }

  /** Keeps `params` as the latest publish of its document and wakes the waiters. */
  store(params: PublishDiagnosticsParams): void {
    this.#latest.set(documentKey(params.uri), {
      seq: this.#nextSeq++,
      version: typeof params.version === "number" ? params.version : undefined,
      diagnostics: params.diagnostics,
    });
    this.changed();
  }

  /**
   * The diagnostics published for `document`'s text as last sent: a publish
   * that names that version (or a later one), or, from servers that name
   * none, the first one after the text was sent.
   */
  current(document: OpenDocument): Diagnostic[] | undefined {
    const publish = this.#latest.get(document.path);
    if (!publish) return undefined;
    const current =
      publish.version !== undefined ? publish.version >= document.version : publish.seq >= document.after;
    return current ? publish.diagnostics : undefined;
  }

  /** Resolves at the next publish (or {@link Documents.changed}). */
  next(): { promise: Promise<void>; cancel: () => void } {
    let listener = () => {};
    const promise = new Promise<void>((resolve) => {
      listener = () => {
        this.#listeners.delete(listener);
        resolve();
      };
      this.#listeners.add(listener);
    });
    return { promise, cancel: () => this.#listeners.delete(listener) };
  }

  /** Wakes every waiter (a publish arrived, or the connection ended). */
  changed(): void {
    for (const listener of [...this.#listeners]) listener();
  }
}

/**
 * Which document a URI names: its file path where it has one, so a server
 * that re-encodes the URI it was sent (`%20` vs ` `, `%40` vs `@`) still
 * matches.
 */
export function documentKey(uri: string): string {
  if (!uri.startsWith("file:")) return uri;
  try {
    return fileURLToPath(uri);
  } catch {
    return uri;
  }
}
