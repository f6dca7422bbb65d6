// The CommonJS side of the package, typed through its `.d.cts` declarations.
import pkg = require("mcp-reconcile");

export const connectionId: string = pkg.kernel.connectionId({
  name: "files",
  config: { command: "node", args: ["files-server.js"], env: { ROOT: "/srv/data" } },
});
