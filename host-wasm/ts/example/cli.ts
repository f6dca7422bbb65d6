// A TypeScript CLI that applies settings edits live (shown in README.md).
import { readFileSync, realpathSync, watch } from "node:fs";
import { basename, dirname, join } from "node:path";

import { McpSdkExecutor, Reconciler, kernel } from "../index.js";
import type { Approvals, McpLists, ReloadState, Servers, Settings } from "../index.js";

const home = process.env.HOME ?? ".";
const userFile = join(home, ".qwen", "settings.json");
const projectFile = join(process.cwd(), ".mcp.json");
const approvalsFile = join(home, ".qwen", "mcpApprovals.json");

const executor = new McpSdkExecutor({ onEvent: (e) => console.error(`[mcp] ${e.type} ${e.server}`) });
const reconciler = new Reconciler({ executor });
let previous: ReloadState = { servers: null, gating: {}, removed: [] };
let settings: Settings = {};

function read(file: string): string | undefined {
  try {
    return readFileSync(file, "utf8");
  } catch {
    return undefined; // a missing file is empty
  }
}

async function reload(): Promise<void> {
  const text = read(userFile);
  try {
    settings = text === undefined ? {} : kernel.parseSettings({ text, env: process.env });
  } catch (e) {
    console.error(`${userFile}: ${(e as Error).message} (keeping its last good content)`);
  }
  const mcpJson = read(projectFile);
  const project = mcpJson === undefined ? { servers: {}, errors: [] } : kernel.parseMcpJson({ text: mcpJson, env: process.env });
  for (const error of project.errors) console.error(`${projectFile}: ${error}`);

  const outcome = kernel.hotReload({
    previous,
    layers: [
      { source: "user", servers: (settings.mcpServers ?? {}) as Servers },
      { source: "project", servers: project.servers },
    ],
    settings: (settings.mcp ?? {}) as McpLists,
    approvals: JSON.parse(read(approvalsFile) ?? "{}") as Approvals,
    projectRoot: realpathSync(process.cwd()),
  });
  if (outcome.approvalEvent) console.error(`needs approval: ${outcome.promptable.join(", ")}`);
  if (!outcome.reconcile) return; // a comment or formatting edit: nothing changes
  previous = outcome.next;
  // Only added, removed or changed servers are touched; the rest keep their connection.
  const report = await reconciler.reconcile(outcome.next.servers ?? {}, outcome.next.gating);
  for (const { action, ok, error } of report.outcomes) {
    if (!ok) console.error(`${action.action} failed: ${error}`);
  }
}

// One trailing 300 ms debounce for every watched file (SPEC §8).
let timer: NodeJS.Timeout | undefined;
for (const file of [userFile, projectFile, approvalsFile]) {
  try {
    watch(dirname(file), (_event, name) => {
      if (name !== basename(file)) return;
      clearTimeout(timer);
      timer = setTimeout(() => void reload(), 300);
    });
  } catch {
    console.error(`not watching ${file}: its folder does not exist`);
  }
}
void reload();
