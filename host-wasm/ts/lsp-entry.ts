/**
 * Reading a `.lsp.json` entry (SPEC §14.1) into what a start needs: defaults
 * filled in, types checked, the workspace folder resolved inside the project
 * root; and reading a document from disk, confined to that root.
 */
import { open, realpath } from "node:fs/promises";
import { constants } from "node:fs";
import { isAbsolute, resolve, sep } from "node:path";

import type { LspEntry } from "./kernel.js";

/** `startupTimeout` when the entry has none (SPEC §14.1), in ms. */
export const DEFAULT_STARTUP_TIMEOUT_MS = 10_000;
/** `shutdownTimeout` when the entry has none (SPEC §14.1), in ms. */
export const DEFAULT_SHUTDOWN_TIMEOUT_MS = 5_000;
/** The largest document sent to a language server. */
const MAX_DOCUMENT_BYTES = 16 * 1024 * 1024;

/** A `.lsp.json` entry made concrete. */
export interface LspStart {
  command: string;
  args: string[];
  /** Set over the host's environment. */
  env: Record<string, string>;
  /** Absolute, inside the project root: the server's cwd, `rootUri` and only workspace folder. */
  workspaceFolder: string;
  initializationOptions: unknown;
  /** Pushed whole with `workspace/didChangeConfiguration`; answers `workspace/configuration`. */
  settings: Record<string, unknown>;
  startupTimeoutMs: number;
  shutdownTimeoutMs: number;
}

/** An entry that cannot start; `unsupported` when its transport can never work here. */
export class LspEntryError extends Error {
  constructor(
    message: string,
    readonly unsupported = false,
  ) {
    super(message);
  }
}

/**
 * Reads `entry` (already `$VAR`-expanded, as `parseLspJson` returns it) for a
 * project at `projectRoot` (absolute).
 *
 * @throws {LspEntryError} naming the field: a `tcp` / `socket` transport
 * (`unsupported`), no `command`, a value of the wrong type, or a
 * `workspaceFolder` outside the project root.
 */
export function readEntry(entry: LspEntry, projectRoot: string): LspStart {
  const field = (key: string): unknown => (entry[key] === null ? undefined : entry[key]);
  const transport = field("transport");
  if (transport !== undefined && transport !== "stdio") {
    throw new LspEntryError(
      `field \`transport\` is ${JSON.stringify(transport)}: only stdio language servers are supported ` +
        "(unsupported_transport); start the server with `command` instead",
      true,
    );
  }
  const command = field("command");
  if (command === undefined) throw new LspEntryError("field `command` is missing: name the program to run");
  if (typeof command !== "string" || command === "") throw wrong("command", "a non-empty string", command);
  const args = field("args") ?? [];
  if (!Array.isArray(args) || !args.every((a) => typeof a === "string")) {
    throw wrong("args", "an array of strings", args);
  }
  const env = field("env") ?? {};
  if (!isObject(env) || !Object.values(env).every((v) => typeof v === "string")) {
    throw new LspEntryError("field `env` must be an object of string values (values are not shown)");
  }
  const folder = field("workspaceFolder");
  if (folder !== undefined && typeof folder !== "string") throw wrong("workspaceFolder", "a path string", folder);
  const settings = field("settings") ?? {};
  if (!isObject(settings)) throw wrong("settings", "an object", settings);
  return {
    command,
    args,
    env: env as Record<string, string>,
    workspaceFolder: resolveFolder(folder, projectRoot),
    initializationOptions: field("initializationOptions"),
    settings,
    startupTimeoutMs: millis(field("startupTimeout"), "startupTimeout", DEFAULT_STARTUP_TIMEOUT_MS),
    shutdownTimeoutMs: millis(field("shutdownTimeout"), "shutdownTimeout", DEFAULT_SHUTDOWN_TIMEOUT_MS),
  };
}

/** The values an error message must never show: the entry's env values. */
export function secretsOf(entry: LspEntry): string[] {
  const env = entry.env;
  if (!isObject(env)) return [];
  return Object.values(env)
    .filter((v): v is string => typeof v === "string" && v.length > 0)
    .sort((a, b) => b.length - a.length);
}

/** `text` with every secret replaced by `***`. */
export function redact(text: string, secrets: string[]): string {
  for (const secret of secrets) text = text.split(secret).join("***");
  return text;
}

/**
 * The text of the file at `path` (resolved against `folder`) and its real
 * path, read only when that real path lies inside `projectRoot`: a symbolic
 * link out of the project is refused, as are anything but a regular file
 * (a FIFO would block), a file over 16 MiB and text that is not UTF-8.
 */
export async function readInProject(
  projectRoot: string,
  folder: string,
  path: string,
): Promise<{ path: string; text: string }> {
  const wanted = resolve(folder, path);
  let real: string;
  let root: string;
  try {
    [real, root] = await Promise.all([realpath(wanted), realpath(projectRoot)]);
  } catch (e) {
    throw new Error(`cannot read ${wanted}: ${(e as Error).message}`);
  }
  if (!inside(real, root)) {
    throw new Error(`${wanted} is outside the project root ${root}: only files of the project are opened`);
  }
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
  const file = await open(real, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    const stat = await file.stat();
    if (!stat.isFile()) throw new Error(`${real} is not a regular file`);
    if (stat.size > MAX_DOCUMENT_BYTES) {
      throw new Error(`${real} is larger than ${MAX_DOCUMENT_BYTES} bytes: not sent to a language server`);
    }
    const bytes = await file.readFile();
    try {
      return { path: real, text: new TextDecoder("utf-8", { fatal: true }).decode(bytes) };
    } catch {
      throw new Error(`${real} is not UTF-8 text`);
    }
  } finally {
    await file.close();
  }
}

function inside(path: string, root: string): boolean {
  return path === root || path.startsWith(root.endsWith(sep) ? root : root + sep);
}

/** The workspace folder: `folder` resolved against `root` and required to stay inside it. */
function resolveFolder(folder: string | undefined, root: string): string {
  if (!isAbsolute(root)) throw new LspEntryError(`the project root ${root} is not an absolute path`);
  const base = resolve(root);
  if (folder === undefined) return base;
  const resolved = resolve(base, folder);
  if (!inside(resolved, base)) {
    throw new LspEntryError(
      `field \`workspaceFolder\` ${JSON.stringify(folder)} is outside the project root ${base}: ` +
        "use a folder inside the project (relative paths are resolved against it)",
    );
  }
  return resolved;
}

function millis(value: unknown, field: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value === "number" && Number.isFinite(value) && value >= 0) return Math.min(value, 2 ** 31 - 1);
  throw wrong(field, "a non-negative number of milliseconds", value);
}

function wrong(field: string, expected: string, found: unknown): LspEntryError {
  const shown = JSON.stringify(found) ?? String(found);
  return new LspEntryError(`field \`${field}\` must be ${expected}, found ${shown.slice(0, 40)}`);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
