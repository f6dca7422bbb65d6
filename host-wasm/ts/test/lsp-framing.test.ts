/**
 * The framing bound of language-server streams (`ts/lsp-framing.ts`): valid
 * traffic passes unchanged however it is split; each way of breaking the
 * bound fails the stream with a sentence naming the server.
 */
import { test } from "node:test";
import assert from "node:assert/strict";

import { MAX_MESSAGE_BYTES, framingGuard } from "../lsp-framing.js";

/** Feeds `bytes` to a guard in chunks of 1 to 7 bytes; what came out, or the error. */
async function feed(bytes: Buffer): Promise<{ out: Buffer; error?: string }> {
  const guard = framingGuard("probe");
  const parts: Buffer[] = [];
  guard.on("data", (chunk: Buffer) => parts.push(chunk));
  const ended = new Promise<string | undefined>((resolve) => {
    guard.on("error", (e) => resolve(e.message));
    guard.on("end", () => resolve(undefined));
  });
  for (let at = 0, step = 1; at < bytes.length; at += step, step = (step % 7) + 1) {
    if (guard.destroyed) break;
    if (!guard.write(bytes.subarray(at, at + step))) await Promise.race([new Promise((r) => guard.once("drain", r)), ended]);
  }
  guard.end();
  const error = await ended;
  return { out: Buffer.concat(parts), ...(error === undefined ? {} : { error }) };
}

function message(body: string, header = `Content-Length: ${Buffer.byteLength(body)}`): string {
  return `${header}\r\n\r\n${body}`;
}

test("valid traffic passes unchanged, split anywhere", async () => {
  const body = JSON.stringify({ jsonrpc: "2.0", method: "x", params: { text: "a\r\n\r\nb ü" } });
  const stream = Buffer.from(
    message(body) + message(body, `Content-Type: application/vscode-jsonrpc; charset=utf-8\r\ncontent-length:${Buffer.byteLength(body)}`),
  );
  const { out, error } = await feed(stream);
  assert.equal(error, undefined);
  assert.deepEqual(out, stream);
});

test("a message over the limit, a bad length and an endless header fail the stream", async () => {
  const over = await feed(Buffer.from(`Content-Length: ${MAX_MESSAGE_BYTES + 1}\r\n\r\n`));
  assert.match(over.error ?? "", /^language server `probe` announced a message of 67108865 bytes, over the limit of 64 MiB$/);
  const at = await feed(Buffer.from(message("x".repeat(10), `Content-Length: ${MAX_MESSAGE_BYTES}`)));
  assert.equal(at.error, undefined, "exactly the limit is allowed");
  const bad = await feed(Buffer.from(message("{}", "Content-Length: 2e3")));
  assert.match(bad.error ?? "", /without a valid Content-Length/);
  const none = await feed(Buffer.from(message("{}", "Content-Type: text/plain")));
  assert.match(none.error ?? "", /without a valid Content-Length/);
  const endless = await feed(Buffer.from(`X-Filler: ${"y".repeat(9000)}`));
  assert.match(endless.error ?? "", /header section over 8192 bytes/);
});
