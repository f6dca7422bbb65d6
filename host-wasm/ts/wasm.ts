/**
 * The kernel's wasm module, instantiated once when this module is first
 * imported: synchronously, from bytes the package carries inside its
 * JavaScript (`pkg/mcp_reconcile_wasm_bytes.js`), so importing the package is
 * all a consumer does, in Node (ESM or CJS), a bundle, a browser page or a
 * worker. Nothing here touches the file system or the network.
 *
 * The module is about 550 KB; browsers compile modules up to 8 MB
 * synchronously on the main thread.
 */
import { initSync } from "../pkg/mcp_reconcile_wasm.js";
import { wasmBase64 } from "../pkg/mcp_reconcile_wasm_bytes.js";

export * from "../pkg/mcp_reconcile_wasm.js";

/** base64 to bytes with `atob`, which Node (16+), browsers and workers all have. */
function decode(base64: string): Uint8Array {
  const text = atob(base64);
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
  return bytes;
}

initSync({ module: decode(wasmBase64) });
