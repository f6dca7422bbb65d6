/**
 * Seeded random JSON requests for the parity test: well-formed ones, small
 * mutations of real vector requests, and plain garbage.
 */

/** splitmix32-style generator: same seed, same requests. */
export class Rng {
  #state: number;
  constructor(seed: number) {
    this.#state = seed >>> 0;
  }
  /** Uniform in [0, 1). */
  next(): number {
    this.#state = (this.#state + 0x9e3779b9) >>> 0;
    let z = this.#state;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return ((z ^ (z >>> 16)) >>> 0) / 2 ** 32;
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)] as T;
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
}

export const OPS = [
  "transportOf", "connectionId", "sessionKey", "approvalHash", "serversEqual", "gatingEqual",
  "matchPattern", "parseMcpJson", "parseSettings", "assemble", "gating", "approvalState",
  "pendingGated", "promptable", "unavailableReason", "toolNotFound", "plan", "settingsDiff",
  "restartRequired", "hotReload", "backoff",
] as const;

/** The fields each op reads (SPEC §10). */
const OP_FIELDS: Record<string, string[]> = {
  transportOf: ["config"],
  connectionId: ["name", "config"],
  sessionKey: ["name", "config"],
  approvalHash: ["config"],
  serversEqual: ["a", "b"],
  gatingEqual: ["ga", "gb"],
  matchPattern: ["pattern", "name"],
  parseMcpJson: ["text", "env", "expand"],
  parseSettings: ["text", "env"],
  assemble: ["layers"],
  gating: ["servers", "settings", "cliAllowed", "approvals", "projectRoot", "yolo"],
  approvalState: ["approvals", "projectRoot", "name", "config"],
  pendingGated: ["servers", "approvals", "projectRoot"],
  promptable: ["servers", "approvals", "projectRoot"],
  unavailableReason: ["name", "merged", "gating", "removed", "approvals", "projectRoot"],
  toolNotFound: ["tool", "merged", "gating", "removed", "approvals", "projectRoot"],
  plan: ["desired", "online", "gating", "trustedFolder", "mode", "now"],
  settingsDiff: ["old", "new"],
  restartRequired: ["paths", "schema"],
  hotReload: ["previous", "layers", "settings", "cliAllowed", "approvals", "projectRoot", "yolo"],
  backoff: ["attempts", "seed"],
};

const NUMBERS = [
  0, -0, 1, -1, 1.5, 0.1, 0.1 + 0.2, 1e21, 1e-7, 123456789012345680000, 2 ** 53, 2 ** 53 + 2,
  -(2 ** 31), 4294967295, 5e-324, 1.7976931348623157e308, 100, 300000, 99.5, 8,
];
const KEYS = [
  "command", "args", "env", "cwd", "url", "httpUrl", "headers", "tcp", "timeout", "trust",
  "includeTools", "excludeTools", "description", "extensionName", "oauth", "type", "scope",
  "discoveryTimeoutMs", "enabled", "clientId", "scopes", "op", "name", "config", "servers",
  "gating", "allowed", "excluded", "cap", "pending", "0", "7", "10", "01", "-1", "4294967294",
  "4294967295", "__proto__", "", "a", "b", "é", "\u{1F600}", "\uE000", "x.y", "constructor",
];
const STRINGS = [
  "", "a", "b", "node", "stdio", "sdk", "http", "project", "workspace", "system", "user",
  "approved", "rejected", "pending", "connected", "failed", "session", "pool", "a*", "?", "*",
  "[ab]", "mcp__a__t", "mcp__a-b__t", "x::y", "$HOME", "${A}", "${", "quote\"back\\slash",
  "line\nbreak\ttab\u0001\u001f", "\u2028\u2029", "\u{1F600}\uE000\uFFFF", "é", "a.b", "mcp.allowed",
  "{\"mcpServers\":{\"a\":{\"command\":\"x\"}}}", "// c\n{}", "\uFEFF{}", "{,}", "https://127.0.0.1/mcp",
];

/** Builds an object with own enumerable data properties, `__proto__` included. */
function object(entries: [string, unknown][]): Record<string, unknown> {
  const o: Record<string, unknown> = {};
  for (const [k, v] of entries) {
    Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
  }
  return o;
}

export function randomValue(rng: Rng, depth = 0): unknown {
  const leaf = depth > 3 || rng.chance(0.45);
  switch (rng.int(leaf ? 4 : 6)) {
    case 0:
      return rng.chance(0.5) ? null : rng.chance(0.5);
    case 1:
      return rng.chance(0.7) ? rng.pick(NUMBERS) : (rng.next() - 0.5) * 10 ** rng.int(30);
    case 2:
    case 3:
      return rng.chance(0.8) ? rng.pick(STRINGS) : randomString(rng);
    case 4:
      return Array.from({ length: rng.int(4) }, () => randomValue(rng, depth + 1));
    default:
      return object(
        Array.from({ length: rng.int(5) }, () => [rng.pick(KEYS), randomValue(rng, depth + 1)]),
      );
  }
}

function randomString(rng: Rng): string {
  let s = "";
  const n = rng.int(8);
  for (let i = 0; i < n; i++) s += String.fromCharCode(rng.int(2) ? 0x20 + rng.int(0x5f) : rng.int(0x10000));
  return s;
}

function randomConfig(rng: Rng): Record<string, unknown> {
  const entries: [string, unknown][] = [];
  const transport = rng.pick(["command", "httpUrl", "url", "tcp", "type", "none"]);
  if (transport === "type") entries.push(["type", "sdk"]);
  else if (transport !== "none") entries.push([transport, rng.pick(STRINGS)]);
  for (const key of ["args", "env", "trust", "includeTools", "timeout", "oauth", "scope", "headers"]) {
    if (!rng.chance(0.3)) continue;
    const value =
      key === "args" || key === "includeTools"
        ? Array.from({ length: rng.int(3) }, () => rng.pick(STRINGS))
        : key === "env" || key === "headers"
          ? object(Array.from({ length: rng.int(3) }, () => [rng.pick(KEYS), rng.pick(STRINGS)]))
          : key === "trust"
            ? rng.chance(0.5)
            : key === "scope"
              ? rng.pick(["project", "workspace", "system", "user"])
              : key === "oauth"
                ? object([["enabled", rng.chance(0.7)], ["scopes", [rng.pick(STRINGS), rng.pick(STRINGS)]]])
                : rng.pick(NUMBERS);
    entries.push([key, rng.chance(0.1) ? randomValue(rng) : value]);
  }
  return object(entries);
}

function randomServers(rng: Rng): Record<string, unknown> {
  const names = ["a", "b", "c", "10", "2", "p", "w", "x::y", "mcp"];
  return object(Array.from({ length: rng.int(4) }, () => [rng.pick(names), randomConfig(rng)]));
}

/** A plausible request for `op`, with its fields drawn at random. */
function plausible(rng: Rng, op: string): Record<string, unknown> {
  const servers = () => randomServers(rng);
  const gating = () =>
    object(
      (["excluded", "allowed", "cap", "pending"] as const)
        .filter(() => rng.chance(0.4))
        .map((k) => [k, rng.chance(0.15) ? null : [rng.pick(["a", "b*", "?", "p", "*"])]]),
    );
  const approvals = () =>
    rng.chance(0.5) ? {} : object([["/r", object([["p", object([["hash", "0".repeat(64)], ["status", "approved"]])]])]]);
  const fields: Record<string, () => unknown> = {
    name: () => rng.pick(["a", "b", "p", "x::y", ""]),
    config: () => randomConfig(rng),
    a: servers,
    b: servers,
    pattern: () => rng.pick(STRINGS),
    text: () => rng.pick(STRINGS),
    layers: () =>
      Array.from({ length: rng.int(3) }, () =>
        object([
          ["source", rng.pick(["user", "project", "workspace", "extension", "runtime", "bogus"])],
          ["servers", servers()],
        ]),
      ),
    servers,
    merged: servers,
    desired: servers,
    online: () =>
      object(
        Array.from({ length: rng.int(3) }, () => [
          rng.pick(["a", "b", "c"]),
          object([
            ["config", randomConfig(rng)],
            ["status", rng.pick(["connected", "connecting", "failed", "disconnected", "weird"])],
            ["attempts", rng.int(10)],
            ["retryAt", rng.int(3000)],
          ]),
        ]),
      ),
    gating,
    settings: () => object([["allowed", rng.chance(0.5) ? ["a*"] : null]]),
    approvals,
    projectRoot: () => "/r",
    removed: () => [rng.pick(["a", "b"])],
    tool: () => rng.pick(["mcp__a__t", "mcp__b__x", "nope", "mcp__x_y__t"]),
    trustedFolder: () => rng.chance(0.85),
    mode: () => rng.pick(["session", "pool"]),
    now: () => rng.int(5000),
    old: () => randomValue(rng),
    new: () => randomValue(rng),
    paths: () => [rng.pick(["mcp", "mcpServers.a.args", "mcp.allowed", "ui.theme", ""])],
    attempts: () => rng.pick([0, 1, 2, 8, 9, 40, -1, 1.5]),
    seed: () => rng.pick([0, 1, 42, 2 ** 53, 2 ** 53 + 2, -1]),
    env: () => object([["HOME", "/h"], ["A", rng.pick(STRINGS)]]),
    expand: () => rng.chance(0.7),
    yolo: () => rng.chance(0.3),
    cliAllowed: () => [rng.pick(["a", "a,b", " b ,", ""])],
    schema: () => object([["mcp", rng.chance(0.5)], ["ui", true]]),
    previous: () => object([["servers", servers()], ["gating", gating()], ["removed", ["a"]]]),
  };
  // gatingEqual's `a` and `b` are gating objects, not server maps.
  fields.ga = gating;
  fields.gb = gating;
  const entries: [string, unknown][] = [["op", op]];
  const wanted = OP_FIELDS[op] ?? [];
  const keys = [
    ...wanted.filter(() => rng.chance(0.93)),
    ...Object.keys(fields).filter(() => rng.chance(0.03)),
  ];
  for (const key of keys) {
    const name = key === "ga" ? "a" : key === "gb" ? "b" : key;
    entries.push([name, (fields[key] as () => unknown)()]);
  }
  return object(entries);
}

/** A copy of `request` with one field replaced, removed or added. */
function mutate(rng: Rng, request: unknown): unknown {
  if (typeof request !== "object" || request === null || Array.isArray(request)) return request;
  const entries = Object.entries(request);
  const i = rng.int(entries.length + 1);
  switch (rng.int(3)) {
    case 0:
      if (i < entries.length) entries[i] = [entries[i]![0], randomValue(rng)];
      break;
    case 1:
      entries.splice(i, 1);
      break;
    default:
      entries.push([rng.pick(KEYS), randomValue(rng)]);
  }
  return object(entries);
}

/** `count` requests: plausible ones, mutated vector requests, and garbage. */
export function randomRequests(rng: Rng, count: number, seeds: unknown[]): unknown[] {
  const out: unknown[] = [];
  for (let i = 0; i < count; i++) {
    const roll = rng.next();
    if (roll < 0.45) out.push(plausible(rng, rng.chance(0.97) ? rng.pick(OPS) : rng.pick(STRINGS)));
    else if (roll < 0.85 && seeds.length > 0) out.push(mutate(rng, rng.pick(seeds)));
    else out.push(randomValue(rng));
  }
  return out;
}
