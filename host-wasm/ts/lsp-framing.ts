/**
 * The bound on what a language server may send, as the native host has it:
 * `vscode-jsonrpc` buffers a message whole, whatever its `Content-Length`
 * says, so a server that announces (and streams) gigabytes would grow the
 * host without limit. {@link framingGuard} passes the byte stream through
 * unchanged while it checks the framing, and fails the stream — and with it
 * that one connection — on a header section over 8 KiB or a `Content-Length`
 * that is not digits or exceeds {@link MAX_MESSAGE_BYTES}.
 */
import { Transform } from "node:stream";
import type { TransformCallback } from "node:stream";

/** The largest message body a language server may send (64 MiB, as natively). */
export const MAX_MESSAGE_BYTES = 64 * 1024 * 1024;

/** The largest header section (`Name: value` lines up to the blank line). */
const MAX_HEADER_BYTES = 8 * 1024;

const END = Buffer.from("\r\n\r\n");

/** A pass-through that fails the stream when `server`'s framing breaks the bounds. */
export function framingGuard(server: string): Transform {
  /** Header bytes of the message being read, until its blank line. */
  let header = Buffer.alloc(0);
  /** Body bytes still to pass before the next header. */
  let body = 0;

  const check = (chunk: Buffer): string | undefined => {
    let at = 0;
    while (at < chunk.length) {
      if (body > 0) {
        const n = Math.min(body, chunk.length - at);
        body -= n;
        at += n;
        continue;
      }
      // Searching the last three header bytes too finds a blank line split across chunks.
      const keep = Math.min(header.length, END.length - 1);
      const window = Buffer.concat([header.subarray(header.length - keep), chunk.subarray(at)]);
      const end = window.indexOf(END);
      if (end === -1) {
        header = Buffer.concat([header, chunk.subarray(at)]);
        if (header.length > MAX_HEADER_BYTES) return `sent a header section over ${MAX_HEADER_BYTES} bytes`;
        return undefined;
      }
      const used = end + END.length - keep;
      header = Buffer.concat([header, chunk.subarray(at, at + used)]);
      at += used;
      const text = header.toString("latin1");
      header = Buffer.alloc(0);
      const length = /^content-length:[ \t]*(\S*)[ \t]*$/im.exec(text)?.[1];
      if (length === undefined || !/^\d{1,20}$/.test(length)) {
        return `sent a message without a valid Content-Length (${JSON.stringify(text.slice(0, 200))})`;
      }
      if (Number(length) > MAX_MESSAGE_BYTES) {
        return `announced a message of ${length} bytes, over the limit of ${MAX_MESSAGE_BYTES / 1024 / 1024} MiB`;
      }
      body = Number(length);
    }
    return undefined;
  };

  return new Transform({
    transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback) {
      const broken = check(chunk);
      if (broken === undefined) done(null, chunk);
      else done(new Error(`language server \`${server}\` ${broken}`));
    },
  });
}
