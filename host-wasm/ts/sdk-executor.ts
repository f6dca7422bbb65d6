/**
 * The default {@link Executor}: real MCP connections through the official
 * TypeScript SDK (stdio and streamable HTTP clients), and a registry of their
 * tools under qualified names `mcp__<server>__<tool>`.
 *
 * A disconnect removes the server's tools from the registry *before* it
 * closes the connection, and the {@link Reconciler} finishes every teardown
 * before it starts anything, so a plan never shows a stale tool next to a new
 * one.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";

import { kernel } from "./kernel.js";
import type { ServerConfig } from "./kernel.js";
import type { Executor } from "./reconciler.js";

/** A tool of a connected server, as the model sees it. */
export interface RegisteredTool {
  /** `mcp__<server>__<tool>`. */
  qualifiedName: string;
  server: string;
  tool: Tool;
}

/** What the executor did, in order (for logs and tests). */
export type ExecutorEvent =
  | { type: "connected"; server: string; pid: number | null }
  | { type: "registered"; server: string; tools: string[] }
  | { type: "purged"; server: string; tools: string[] }
  | { type: "closed"; server: string; requested: boolean; error?: string };

/** One live connection. */
export interface Connection {
  client: Client;
  transport: Transport;
  config: ServerConfig;
  /** The stdio server's process id; null for remote servers. */
  pid: number | null;
}

export interface McpSdkExecutorOptions {
  /** How this client introduces itself. */
  clientInfo?: { name: string; version: string };
  /** Called for every {@link ExecutorEvent}. */
  onEvent?: (event: ExecutorEvent) => void;
}

/** Handshake caps (SPEC §1 `discoveryTimeoutMs`). */
const DEFAULT_STDIO_TIMEOUT_MS = 30_000;
const DEFAULT_REMOTE_TIMEOUT_MS = 5_000;
/** How much of a stdio server's stderr a failure message quotes. */
const STDERR_TAIL = 2_000;

interface Held extends Connection {
  closing: boolean;
  stderr: { tail: string };
}

export class McpSdkExecutor implements Executor {
  readonly #clientInfo: { name: string; version: string };
  readonly #onEvent: (event: ExecutorEvent) => void;
  readonly #connections = new Map<string, Held>();
  readonly #tools = new Map<string, RegisteredTool>();

  constructor(options: McpSdkExecutorOptions = {}) {
    this.#clientInfo = options.clientInfo ?? { name: "mcp-reconcile", version: "0.1.0" };
    this.#onEvent = options.onEvent ?? (() => {});
  }

  /** Every registered tool by qualified name. */
  get tools(): ReadonlyMap<string, RegisteredTool> {
    return this.#tools;
  }

  /** The live connection of `name`, if any. */
  connection(name: string): Connection | undefined {
    const held = this.#connections.get(name);
    return held && { client: held.client, transport: held.transport, config: held.config, pid: held.pid };
  }

  async connect(name: string, config: ServerConfig, onClosed: (error: Error) => void): Promise<void> {
    // A leftover of an earlier start must not keep its tools.
    await this.disconnect(name);
    let opened: ReturnType<typeof openTransport>;
    try {
      opened = openTransport(config);
    } catch (e) {
      throw new Error(failure(name, config, e instanceof Error ? e.message : String(e), ""));
    }
    const { transport, stderr } = opened;
    const client = new Client(this.#clientInfo, { capabilities: {} });
    const held: Held = { client, transport, config, pid: null, closing: false, stderr };
    const timeoutMs = handshakeTimeout(config);
    try {
      await withTimeout(client.connect(transport, { timeout: timeoutMs }), timeoutMs, () =>
        `the MCP handshake with "${name}" took longer than ${timeoutMs} ms`,
      );
      held.pid = transport instanceof StdioClientTransport ? transport.pid : null;
      this.#connections.set(name, held);
      this.#onEvent({ type: "connected", server: name, pid: held.pid });
      client.onclose = () => {
        if (held.closing || this.#connections.get(name) !== held) return;
        this.#connections.delete(name);
        const error = new Error(failure(name, config, "the connection closed", stderr.tail));
        this.#purge(name);
        this.#onEvent({ type: "closed", server: name, requested: false, error: error.message });
        onClosed(error);
      };
      if (client.getServerCapabilities()?.tools?.listChanged) {
        client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
          if (this.#connections.get(name) !== held) return;
          const tools = await listTools(client).catch(() => undefined);
          if (tools && this.#connections.get(name) === held) {
            this.#purge(name);
            this.#register(name, config, tools);
          }
        });
      }
      this.#register(name, config, await listTools(client));
    } catch (e) {
      held.closing = true;
      this.#connections.delete(name);
      this.#purge(name);
      await client.close().catch(() => {});
      await transport.close().catch(() => {});
      const why = e instanceof Error ? e.message : String(e);
      throw new Error(failure(name, config, why, stderr.tail));
    }
  }

  async disconnect(name: string): Promise<void> {
    const held = this.#connections.get(name);
    if (!held) return;
    held.closing = true;
    this.#connections.delete(name);
    this.#purge(name);
    // Closes stdin, then SIGTERM, then SIGKILL for stdio; ends the session for HTTP.
    await held.client.close();
    this.#onEvent({ type: "closed", server: name, requested: true });
  }

  /** Calls a registered tool by qualified name. */
  async callTool(qualifiedName: string, args: Record<string, unknown> = {}): Promise<CallToolResult> {
    const registered = this.#tools.get(qualifiedName);
    const held = registered && this.#connections.get(registered.server);
    if (!registered || !held) throw new Error(`no tool named ${JSON.stringify(qualifiedName)}`);
    return (await held.client.callTool({ name: registered.tool.name, arguments: args })) as CallToolResult;
  }

  /** Disconnects every server. */
  async close(): Promise<void> {
    await Promise.allSettled([...this.#connections.keys()].map((name) => this.disconnect(name)));
  }

  #register(server: string, config: ServerConfig, tools: Tool[]): void {
    const names: string[] = [];
    for (const tool of tools.filter((t) => toolEnabled(t.name, config))) {
      const qualifiedName = qualify(server, tool.name);
      this.#tools.set(qualifiedName, { qualifiedName, server, tool });
      names.push(qualifiedName);
    }
    this.#onEvent({ type: "registered", server, tools: names });
  }

  #purge(server: string): void {
    const names: string[] = [];
    for (const [qualifiedName, tool] of this.#tools) {
      if (tool.server === server) {
        this.#tools.delete(qualifiedName);
        names.push(qualifiedName);
      }
    }
    this.#onEvent({ type: "purged", server, tools: names });
  }
}

/** `mcp__<server>__<tool>`, the server name made safe as SPEC §4 describes. */
export function qualify(server: string, tool: string): string {
  return `mcp__${server.replace(/[^A-Za-z0-9_-]/g, "_")}__${tool}`;
}

/** `excludeTools` beats `includeTools`; an entry `name(...)` names the tool `name`. */
function toolEnabled(tool: string, config: ServerConfig): boolean {
  if (strings(config.excludeTools, "excludeTools")?.includes(tool)) return false;
  const include = strings(config.includeTools, "includeTools");
  return !include || include.some((entry) => entry === tool || entry.startsWith(`${tool}(`));
}

/** A config field that must be an array of strings, if present. */
function strings(value: unknown, field: string): string[] | undefined {
  if (value == null) return undefined;
  if (Array.isArray(value) && value.every((v) => typeof v === "string")) return value;
  throw new Error(`\`${field}\` must be an array of strings, found ${JSON.stringify(value)}`);
}

/** A config field that must map names to strings, if present. */
function stringMap(value: unknown, field: string): Record<string, string> | undefined {
  if (value == null) return undefined;
  if (typeof value === "object" && !Array.isArray(value)) {
    const entries = Object.entries(value);
    if (entries.every(([, v]) => typeof v === "string")) return Object.fromEntries(entries);
  }
  throw new Error(`\`${field}\` must map names to strings (values are not shown)`);
}

function openTransport(config: ServerConfig): { transport: Transport; stderr: { tail: string } } {
  const stderr = { tail: "" };
  const kind = kernel.transportOf({ config });
  if (kind === "stdio" && typeof config.command === "string") {
    const transport = new StdioClientTransport({
      command: config.command,
      args: strings(config.args, "args") ?? [],
      env: { ...inheritedEnv(), ...stringMap(config.env, "env") },
      ...(typeof config.cwd === "string" ? { cwd: config.cwd } : {}),
      stderr: "pipe",
    });
    transport.stderr?.on("data", (chunk: Buffer) => {
      stderr.tail = (stderr.tail + chunk.toString("utf8")).slice(-STDERR_TAIL);
    });
    return { transport, stderr };
  }
  if (kind === "http" && typeof config.httpUrl === "string") {
    const headers = stringMap(config.headers, "headers") ?? {};
    const transport = new StreamableHTTPClientTransport(new URL(config.httpUrl), {
      requestInit: { headers },
    });
    return { transport, stderr };
  }
  throw new Error(`unsupported transport "${kind}": this executor speaks stdio and streamable HTTP`);
}

/** The host's environment (as the TypeScript CLI passes it), strings only. */
function inheritedEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (typeof value === "string") env[key] = value;
  }
  return env;
}

function handshakeTimeout(config: ServerConfig): number {
  const remote = kernel.transportOf({ config }) !== "stdio";
  const fallback = remote ? DEFAULT_REMOTE_TIMEOUT_MS : DEFAULT_STDIO_TIMEOUT_MS;
  const given = config.discoveryTimeoutMs;
  if (typeof given !== "number" || !Number.isFinite(given)) return fallback;
  return Math.min(300_000, Math.max(100, given));
}

async function listTools(client: Client): Promise<Tool[]> {
  const tools: Tool[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.listTools(cursor === undefined ? {} : { cursor });
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return tools;
}

/** A failure sentence with the stderr tail, every env and header value redacted. */
function failure(name: string, config: ServerConfig, why: string, stderrTail: string): string {
  let text = `MCP server "${name}" failed: ${why}`;
  if (stderrTail.trim()) text += `\nstderr (last lines):\n${stderrTail.trimEnd()}`;
  const values = (v: unknown) => (typeof v === "object" && v !== null ? Object.values(v) : []);
  const secrets = [...values(config.env), ...values(config.headers)]
    .filter((v): v is string => typeof v === "string" && v.length > 0)
    .sort((a, b) => b.length - a.length);
  for (const secret of secrets) text = text.split(secret).join("***");
  return text;
}

async function withTimeout<T>(work: Promise<T>, ms: number, message: () => string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(message())), ms);
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
