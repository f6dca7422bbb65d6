/**
 * One language server over stdio (SPEC §14.4), spoken to with
 * `vscode-jsonrpc` (JSON-RPC 2.0 with `Content-Length` framing).
 *
 * Life of a connection:
 * 1. {@link LspConnection.start} spawns the server as the leader of its own
 *    process group, cwd = the workspace folder;
 * 2. `initialize` (bounded by `startupTimeout`) with the entry's
 *    `initializationOptions`, `initialized`, then
 *    `workspace/didChangeConfiguration` with the whole `settings` (push 1);
 * 3. while it runs it answers the server's requests — `workspace/configuration`
 *    from the current settings, registrations and progress tokens accepted,
 *    `workspace/workspaceFolders` = the folder, anything else `MethodNotFound` —
 *    and keeps the latest `publishDiagnostics` per document;
 * 4. if the process exits or the connection ends on its own, the group is
 *    stopped and `onClosed` is called once (redacted, with the stderr tail);
 * 5. {@link LspConnection.stop}: `shutdown` (bounded by `shutdownTimeout`),
 *    `exit`, stdin closed, then SIGTERM / SIGKILL to the group
 *    ({@link GroupProcess.stop}). Nothing waits without a bound.
 *
 * Diagnostics are push-only: the client does not declare
 * `textDocument.diagnostic`, because servers that see it stop pushing
 * (vscode-json-language-server switches to pull mode).
 */
import { basename } from "node:path";
import { pathToFileURL } from "node:url";

import {
  ConfigurationRequest,
  DidChangeConfigurationNotification,
  DidChangeTextDocumentNotification,
  DidOpenTextDocumentNotification,
  ErrorCodes,
  ExitNotification,
  InitializeRequest,
  InitializedNotification,
  PublishDiagnosticsNotification,
  RegistrationRequest,
  ResponseError,
  ShutdownRequest,
  UnregistrationRequest,
  WorkDoneProgressCreateRequest,
  WorkspaceFoldersRequest,
} from "vscode-languageserver-protocol/node";
import type { ClientCapabilities, Diagnostic, InitializeParams } from "vscode-languageserver-protocol";
import { StreamMessageReader, StreamMessageWriter, createMessageConnection } from "vscode-jsonrpc/node";
import type { MessageConnection } from "vscode-jsonrpc/node";

import type { LspEntry } from "./kernel.js";
import { Documents } from "./lsp-documents.js";
import { framingGuard } from "./lsp-framing.js";
import type { OpenDocument } from "./lsp-documents.js";
import { LspEntryError, readEntry, readInProject, redact, secretsOf } from "./lsp-entry.js";
import type { LspStart } from "./lsp-entry.js";
import { GRACE_MS, GroupProcess, within } from "./lsp-process.js";

/** After a failed start or an exit: how long to wait for the exit status and the last stderr lines. */
const SETTLE_MS = 500;

export interface LspConnectionOptions {
  /** The server's name, for messages. */
  name: string;
  /** The `.lsp.json` entry, expanded. */
  entry: LspEntry;
  /** The project root (absolute): workspace folder and documents stay inside it. */
  projectRoot: string;
  /** The environment the server is spawned in (the entry's `env` is set over it). Default `process.env`. */
  env?: Record<string, string | undefined>;
  /** How this client introduces itself. */
  clientInfo?: { name: string; version: string };
  /** Called once if the server ends by itself (not after {@link LspConnection.stop}). */
  onClosed?: (error: Error) => void;
}

/** A start that failed; `unsupported` when the entry's transport can never work here. */
export class LspStartError extends Error {
  constructor(
    message: string,
    readonly unsupported = false,
  ) {
    super(message);
  }
}

/** A running, initialized language server. Stop it with {@link LspConnection.stop}. */
export class LspConnection {
  readonly name: string;
  readonly #process: GroupProcess;
  readonly #rpc: MessageConnection;
  readonly #start: LspStart;
  readonly #projectRoot: string;
  readonly #secrets: string[];
  readonly #documents = new Documents();
  #settings: Record<string, unknown>;
  #pushes = 0;
  /** Why the connection ended (redacted), once it did. */
  #ended: string | undefined;
  #stopping = false;
  #stopped: Promise<void> | undefined;

  private constructor(options: LspConnectionOptions, start: LspStart, process: GroupProcess, rpc: MessageConnection) {
    this.name = options.name;
    this.#start = start;
    this.#process = process;
    this.#rpc = rpc;
    this.#projectRoot = options.projectRoot;
    this.#secrets = secretsOf(options.entry);
    this.#settings = start.settings;
  }

  /**
   * Starts language server `name` and brings it to the configured state
   * (module docs, steps 1-2).
   *
   * @throws {LspStartError} a redacted sentence naming the server: the entry
   * is invalid, the program did not start, `initialize` failed or took longer
   * than `startupTimeout` (the group is stopped first; the exit status and
   * stderr tail are included).
   */
  static async start(options: LspConnectionOptions): Promise<LspConnection> {
    const { name, entry } = options;
    const secrets = secretsOf(entry);
    const fail = (what: string, unsupported = false) =>
      new LspStartError(redact(`language server \`${name}\` ${what}`, secrets), unsupported);
    let start: LspStart;
    try {
      start = readEntry(entry, options.projectRoot);
    } catch (e) {
      if (!(e instanceof LspEntryError)) throw e;
      throw fail(`was not started: ${e.message}`, e.unsupported);
    }
    let child: GroupProcess;
    try {
      child = await GroupProcess.spawn({
        command: start.command,
        args: start.args,
        env: { ...stringsOf(options.env ?? process.env), ...start.env },
        cwd: start.workspaceFolder,
      });
    } catch (e) {
      throw fail(
        `could not start \`${start.command}\`: ${(e as Error).message}; check \`command\`, \`workspaceFolder\` and PATH`,
      );
    }
    // Every byte passes the framing bound first: a message over 64 MiB fails this connection.
    const guarded = child.stdout.pipe(framingGuard(name));
    const rpc = createMessageConnection(new StreamMessageReader(guarded), new StreamMessageWriter(child.stdin));
    const connection = new LspConnection(options, start, child, rpc);
    const ended = connection.#answer();
    rpc.listen();

    const folder = pathToFileURL(start.workspaceFolder).href;
    const initialize = rpc.sendRequest(InitializeRequest.type, initializeParams(start, folder, options.clientInfo));
    const failure = await Promise.race([
      initialize.then(
        () => undefined,
        (e: Error) => `failed \`initialize\`: ${e.message}`,
      ),
      ended.then(() => "ended before answering `initialize`"),
      new Promise<string>((resolve) => {
        const timer = setTimeout(
          () => resolve(`did not answer \`initialize\` within ${start.startupTimeoutMs} ms (\`startupTimeout\`)`),
          start.startupTimeoutMs,
        );
        void initialize.finally(() => clearTimeout(timer)).catch(() => {});
        void ended.finally(() => clearTimeout(timer));
      }),
    ]);
    if (failure === undefined) {
      try {
        await rpc.sendNotification(InitializedNotification.type, {});
        await rpc.sendNotification(DidChangeConfigurationNotification.type, { settings: start.settings });
        connection.#pushes = 1;
      } catch (e) {
        connection.#stopping = true;
        rpc.dispose();
        child.stdin.end();
        await child.stop();
        throw fail(`went away right after \`initialize\` (${(e as Error).message})${withStderr(child)}`);
      }
      void ended.then((why) => connection.#closed(why, options.onClosed));
      return connection;
    }
    // The process usually exited: its status and last words explain the failure.
    connection.#stopping = true;
    const status = await child.waitExit(SETTLE_MS);
    rpc.dispose();
    child.stdin.end();
    await child.stop();
    await child.stderrSettled(SETTLE_MS);
    const exited = status === undefined ? "; stopped it" : `; the process exited (${status})`;
    throw fail(`${failure}${exited}${withStderr(child)}`);
  }

  /** The server's process id (the leader of its process group). */
  get pid(): number {
    return this.#process.pid;
  }

  /** How many `workspace/didChangeConfiguration` pushes this process received (1 after start). */
  get settingsPushes(): number {
    return this.#pushes;
  }

  /**
   * Pushes the full new `settings` (never a diff: servers read a missing key
   * as its default) and answers later `workspace/configuration` pulls from
   * them. The next {@link LspConnection.diagnostics} of each open document
   * sends its text again, so the answer reflects the new settings.
   */
  async reconfigure(settings: Record<string, unknown>): Promise<void> {
    if (this.#ended !== undefined) throw new Error(this.#ended);
    this.#settings = settings;
    await this.#rpc.sendNotification(DidChangeConfigurationNotification.type, { settings });
    this.#pushes += 1;
  }

  /**
   * Opens the file at `path` (relative paths against the workspace folder) as
   * it is on disk now, or sends its new text when it changed since (or
   * settings were pushed since it was last sent).
   */
  async openDocument(path: string, languageId: string): Promise<OpenDocument> {
    if (this.#ended !== undefined) throw new Error(this.#ended);
    const file = await readInProject(this.#projectRoot, this.#start.workspaceFolder, path);
    const uri = pathToFileURL(file.path).href;
    const { send, document } = this.#documents.sync(file.path, uri, languageId, file.text, this.#pushes);
    if (send === "open") {
      await this.#rpc.sendNotification(DidOpenTextDocumentNotification.type, {
        textDocument: { uri, languageId, version: document.version, text: document.text },
      });
    } else if (send === "change") {
      // No range: the whole text (valid whatever sync kind the server chose).
      await this.#rpc.sendNotification(DidChangeTextDocumentNotification.type, {
        textDocument: { uri, version: document.version },
        contentChanges: [{ text: document.text }],
      });
    }
    return document;
  }

  /** The documents this server has open (real path, language id), to open again on its successor. */
  openDocuments(): Array<{ path: string; languageId: string }> {
    return this.#documents.list().map(({ path, languageId }) => ({ path, languageId }));
  }

  /**
   * The diagnostics of the file at `path` as the server publishes them for
   * its current text on disk: opens or re-sends it, then waits at most
   * `timeoutMs` for a matching `publishDiagnostics`.
   *
   * @throws the file cannot be read, nothing was published in time, or the
   * connection ended.
   */
  async diagnostics(path: string, languageId: string, timeoutMs: number): Promise<Diagnostic[]> {
    const document = await this.openDocument(path, languageId);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.#documents.current(document);
      if (found) return found;
      if (this.#ended !== undefined) throw new Error(this.#ended);
      const next = this.#documents.next();
      const woke = await within(
        next.promise.then(() => true),
        Math.max(0, deadline - Date.now()),
      );
      if (!woke) {
        next.cancel();
        throw new Error(
          `language server \`${this.name}\` published no diagnostics for ${document.uri} within ${timeoutMs} ms`,
        );
      }
    }
  }

  /**
   * Stops the server (module docs, step 5). Never hangs; `onClosed` is not
   * called. Calling it again waits for the same stop.
   */
  stop(): Promise<void> {
    this.#stopped ??= this.#stop();
    return this.#stopped;
  }

  async #stop(): Promise<void> {
    this.#stopping = true;
    if (this.#ended === undefined) {
      const shutdown = this.#rpc.sendRequest(ShutdownRequest.type).catch(() => undefined);
      await within(shutdown, this.#start.shutdownTimeoutMs);
      // Sent either way: a server that ignored `shutdown` may still honour `exit`.
      await within(this.#rpc.sendNotification(ExitNotification.type).catch(() => undefined), GRACE_MS);
    }
    this.#end(`language server \`${this.name}\` was stopped`);
    this.#rpc.dispose();
    this.#process.stdin.end();
    await this.#process.stop();
  }

  /**
   * Registers the answers to the server's requests and notifications (module
   * docs, step 3); resolves with why the connection ended once the process
   * exits or the connection closes or fails.
   */
  #answer(): Promise<Ending> {
    const rpc = this.#rpc;
    rpc.onRequest(ConfigurationRequest.type, (params) => params.items.map((item) => this.#section(item.section)));
    rpc.onRequest(RegistrationRequest.type, () => {});
    rpc.onRequest(UnregistrationRequest.type, () => {});
    rpc.onRequest(WorkDoneProgressCreateRequest.type, () => {});
    rpc.onRequest(WorkspaceFoldersRequest.type, () => [
      { uri: pathToFileURL(this.#start.workspaceFolder).href, name: folderName(this.#start.workspaceFolder) },
    ]);
    rpc.onRequest(
      (method) => new ResponseError(ErrorCodes.MethodNotFound, `mcp-reconcile does not handle \`${method}\``),
    );
    rpc.onNotification(PublishDiagnosticsNotification.type, (params) => this.#documents.store(params));
    // Progress, telemetry, log messages, server-specific notifications: nothing to do.
    rpc.onNotification(() => {});
    return new Promise((resolve) => {
      void this.#process.exited().then((status) => resolve({ status }));
      rpc.onClose(() => resolve({ connection: "ended" }));
      rpc.onError(([error]) => resolve({ connection: `failed: ${error.message}` }));
    });
  }

  /** After an end nobody asked for: stop the group, then tell `onClosed` why. */
  async #closed(why: Ending, onClosed: ((error: Error) => void) | undefined): Promise<void> {
    if (this.#stopping) return;
    // Pipes usually close a moment before the exit is reaped: wait for the status.
    const status = why.status ?? (await this.#process.waitExit(SETTLE_MS));
    await this.#process.stderrSettled(SETTLE_MS);
    if (this.#stopping) return;
    this.#stopping = true;
    const message = `language server \`${this.name}\` ${describe({ ...why, status })}`;
    this.#end(`${message}${withStderr(this.#process)}`);
    this.#rpc.dispose();
    this.#process.stdin.end();
    await this.#process.stop();
    onClosed?.(new Error(this.#ended));
  }

  #end(message: string): void {
    this.#ended ??= redact(message, this.#secrets);
    this.#documents.changed();
  }

  /**
   * One `workspace/configuration` answer: the value at the dotted `section`
   * of the settings (the whole object for none or an empty one), `null` when
   * it is missing.
   */
  #section(section: string | undefined): unknown {
    if (!section) return this.#settings;
    let at: unknown = this.#settings;
    for (const key of section.split(".")) {
      if (typeof at !== "object" || at === null || Array.isArray(at) || !Object.hasOwn(at, key)) return null;
      at = (at as Record<string, unknown>)[key];
    }
    return at ?? null;
  }
}

/**
 * `initialize` as SPEC §14.4 asks: process id, root URI, one workspace
 * folder, the entry's `initializationOptions`, and the capabilities the host
 * uses.
 */
function initializeParams(
  start: LspStart,
  folder: string,
  clientInfo = { name: "mcp-reconcile", version: "0.1.0" },
): InitializeParams {
  const capabilities: ClientCapabilities = {
    workspace: {
      configuration: true,
      didChangeConfiguration: { dynamicRegistration: true },
      workspaceFolders: true,
    },
    textDocument: {
      synchronization: { dynamicRegistration: true },
      publishDiagnostics: { relatedInformation: true, versionSupport: true },
      hover: { dynamicRegistration: true, contentFormat: ["markdown", "plaintext"] },
      definition: { dynamicRegistration: true, linkSupport: false },
      references: { dynamicRegistration: true },
      documentSymbol: { dynamicRegistration: true, hierarchicalDocumentSymbolSupport: true },
    },
    window: { workDoneProgress: true },
  };
  return {
    processId: process.pid,
    rootUri: folder,
    workspaceFolders: [{ uri: folder, name: folderName(start.workspaceFolder) }],
    capabilities,
    clientInfo,
    ...(start.initializationOptions === undefined ? {} : { initializationOptions: start.initializationOptions }),
  };
}

/** How a connection ended: the leader's exit status, or the connection's own end, or both. */
interface Ending {
  status?: string | undefined;
  connection?: string;
}

function describe({ status, connection }: Ending): string {
  if (status === undefined) return `was stopped: its connection ${connection ?? "ended"}`;
  return connection === undefined ? `exited (${status})` : `exited (${status}); its connection ${connection}`;
}

function folderName(folder: string): string {
  return basename(folder) || folder;
}

/** `; stderr:` and the tail when there is one, else nothing. */
function withStderr(child: GroupProcess): string {
  const tail = child.stderrTail();
  return tail.trim() === "" ? "" : `; stderr:\n${tail.trimEnd()}`;
}

function stringsOf(env: Record<string, string | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) if (typeof value === "string") out[key] = value;
  return out;
}
