// Two real TypeScript clients of one `mcp-reconcile serve --http`, at the same time
// (host-native/tests/ts_clients.rs runs this script):
//
// * modern: TypeScript SDK 2.x (`@modelcontextprotocol/client`), opted into MCP 2026-07-28
//   with `versionNegotiation: {mode: 'auto'}` (its default is 'legacy': a plain `initialize`);
// * legacy: TypeScript SDK 1.x (`@modelcontextprotocol/sdk`), `initialize` at 2025-11-25.
//
// Usage: node era_clients.mjs URL TOKEN_FILE
//
// It prints one JSON object a line on stdout: `{"step": …}` as it goes, `{"step": "ready"}`
// once both clients have listed and called, and then it waits for a line `edited` on stdin
// (the test has added a server to the settings); then both clients must hear the change
// (`notifications/tools/list_changed`: on the legacy client's GET stream, on the modern
// client's `subscriptions/listen` stream), list the new tool and call it. Last comes
// `{"step": "report", …}` (what each client negotiated and saw on the wire) and `{"step":
// "done"}`. Any failure: `{"step": "failed", "error": …}` and exit status 1. Every wait is
// bounded.

import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

import {
  Client as ModernClient,
  StreamableHTTPClientTransport as ModernTransport,
} from '@modelcontextprotocol/client';
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  ElicitRequestSchema,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

const [url, tokenFile] = process.argv.slice(2);
const token = readFileSync(tokenFile, 'utf8').trim();
/** How long any one wait may take. */
const PATIENCE_MS = 30_000;

const say = (step, fields = {}) => console.log(JSON.stringify({ step, ...fields }));

/** Resolves with `until()`'s value once it is truthy; polls every 50 ms, fails after PATIENCE_MS. */
async function waitFor(what, until) {
  const start = Date.now();
  for (;;) {
    const value = await until();
    if (value) return value;
    if (Date.now() - start > PATIENCE_MS) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * A fetch that records what a client sends and gets: each POST's JSON-RPC method, its
 * `MCP-Protocol-Version` and `Mcp-Method` headers, its `_meta` protocol version, and the
 * `resultType` of each `tools/call` answer (listen streams stay open, so only calls are read).
 */
function recordingFetch(wire) {
  return async (input, init = {}) => {
    const response = await fetch(input, init);
    if ((init.method ?? 'GET') !== 'POST' || typeof init.body !== 'string') return response;
    const headers = new Headers(init.headers);
    let messages = JSON.parse(init.body);
    messages = Array.isArray(messages) ? messages : [messages];
    for (const message of messages) {
      const entry = {
        method: message.method ?? null,
        status: response.status,
        protocolHeader: headers.get('mcp-protocol-version'),
        methodHeader: headers.get('mcp-method'),
        session: headers.has('mcp-session-id'),
        metaVersion: message.params?._meta?.['io.modelcontextprotocol/protocolVersion'] ?? null,
      };
      if (message.method === 'initialize') entry.offered = message.params.protocolVersion;
      wire.push(entry);
      if (message.method === 'tools/call' || message.method === 'initialize') {
        const body = response.clone().text();
        wire.pending.push(
          body.then((text) => {
            entry.answers = answers(text);
          }),
        );
      }
    }
    return response;
  };
}

/** The JSON-RPC results in a response body (plain JSON or SSE `data:` lines). */
function answers(text) {
  const found = [];
  const chunks = text.trimStart().startsWith('{')
    ? [text]
    : text.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5));
  for (const chunk of chunks) {
    try {
      const message = JSON.parse(chunk);
      if (message.result) {
        found.push({
          resultType: message.result.resultType ?? null,
          protocolVersion: message.result.protocolVersion ?? null,
        });
      }
    } catch {
      // An SSE priming event (empty data) carries no message.
    }
  }
  return found;
}

function newWire() {
  const wire = [];
  wire.pending = [];
  return wire;
}

/** The text of a tool result's content. */
const textOf = (result) =>
  (result.content ?? [])
    .filter((c) => c.type === 'text')
    .map((c) => c.text)
    .join('\n');

/** Calls `name`; fails on an error result. */
async function call(client, who, name, args = {}) {
  const result = await client.callTool({ name, arguments: args });
  const text = textOf(result);
  if (result.isError) throw new Error(`${who}: ${name} failed: ${text}`);
  say('called', { client: who, tool: name, text });
  return text;
}

async function toolNames(client, options) {
  const { tools } = await client.listTools(undefined, options);
  return tools.map((t) => t.name);
}

/** Lists until every one of `wanted` is offered. */
async function waitForTools(client, who, wanted, options) {
  const names = await waitFor(`${who} to list ${wanted.join(', ')}`, async () => {
    const names = await toolNames(client, options);
    return wanted.every((w) => names.includes(w)) && names;
  });
  say('listed', { client: who, tools: names });
  return names;
}

const BASE = ['mcp__modern__test_simple_text', 'mcp__legacy__echo'];
const ADDED = 'mcp__added__add';
const ELICITING = 'mcp__modern__test_input_required_result_elicitation';

async function main() {
  const auth = { headers: { Authorization: `Bearer ${token}` } };

  // The modern client: 2026-07-28 by `server/discover` (falling back to `initialize` only if
  // the gateway gave no modern answer, which the report shows).
  const modernWire = newWire();
  const modern = new ModernClient(
    { name: 'era-modern', version: '0' },
    {
      capabilities: { elicitation: { form: {} } },
      versionNegotiation: { mode: 'auto' },
    },
  );
  const modernAsked = [];
  modern.setRequestHandler('elicitation/create', async (request) => {
    modernAsked.push(request.params.message);
    return { action: 'accept', content: { name: 'Ann' } };
  });
  const modernHeard = [];
  modern.setNotificationHandler('notifications/tools/list_changed', () => {
    modernHeard.push(Date.now());
  });
  await modern.connect(
    new ModernTransport(new URL(url), { requestInit: auth, fetch: recordingFetch(modernWire) }),
  );
  say('connected', {
    client: 'modern',
    version: modern.getNegotiatedProtocolVersion(),
    era: modern.getProtocolEra(),
  });

  // The legacy client: `initialize`, a session, and the GET stream for notifications.
  const legacyWire = newWire();
  const legacy = new LegacyClient(
    { name: 'era-legacy', version: '0' },
    { capabilities: { elicitation: {} } },
  );
  const legacyAsked = [];
  legacy.setRequestHandler(ElicitRequestSchema, async (request) => {
    legacyAsked.push(request.params.message);
    return { action: 'accept', content: { name: 'Bob' } };
  });
  const legacyHeard = [];
  legacy.setNotificationHandler(ToolListChangedNotificationSchema, () => {
    legacyHeard.push(Date.now());
  });
  const legacyTransport = new LegacyTransport(new URL(url), {
    requestInit: auth,
    fetch: recordingFetch(legacyWire),
  });
  await legacy.connect(legacyTransport);
  say('connected', { client: 'legacy', version: legacyTransport.protocolVersion });

  // The modern client's listen stream, for tool-list changes.
  const subscription = await modern.listen({ toolsListChanged: true });
  say('listening', { client: 'modern', honored: subscription.honoredFilter });

  // Both list (the upstream servers may still be connecting) and call a tool of each server.
  const clients = [
    ['modern', modern, { cacheMode: 'refresh' }],
    ['legacy', legacy, undefined],
  ];
  for (const [who, client, options] of clients) {
    await waitForTools(client, who, BASE, options);
    const simple = await call(client, who, 'mcp__modern__test_simple_text');
    if (!simple.includes('This is a simple text response for testing.')) {
      throw new Error(`${who}: unexpected test_simple_text: ${simple}`);
    }
    const echoed = await call(client, who, 'mcp__legacy__echo', { text: `from-${who}` });
    if (echoed !== `from-${who}`) throw new Error(`${who}: echo said ${echoed}`);
  }

  // The modern server asks for a name: an input-required result through serve to the modern
  // client (the SDK answers through its elicitation handler and calls again), and an
  // `elicitation/create` of serve's own to the legacy client.
  const greetedModern = await call(modern, 'modern', ELICITING);
  const greetedLegacy = await call(legacy, 'legacy', ELICITING);
  if (greetedModern !== 'Hello, Ann!') throw new Error(`modern: ${greetedModern}`);
  if (greetedLegacy !== 'Hello, Bob!') throw new Error(`legacy: ${greetedLegacy}`);

  // The test adds a server; both clients must be told.
  say('ready');
  const lines = createInterface({ input: process.stdin });
  const edited = await new Promise((resolve) => {
    lines.on('line', (line) => line.trim() === 'edited' && resolve(true));
    lines.on('close', () => resolve(false));
  });
  if (!edited) throw new Error('stdin closed before the edit');
  const heardBefore = { modern: modernHeard.length, legacy: legacyHeard.length };
  const heard = { modern: modernHeard, legacy: legacyHeard };
  for (const [who, client] of clients) {
    await waitFor(`${who} to hear notifications/tools/list_changed`, () => {
      return heard[who].length > heardBefore[who];
    });
    say('heard', { client: who, notification: 'notifications/tools/list_changed' });
    // A plain list after the notification: the modern SDK drops its cached list when told.
    await waitForTools(client, who, [...BASE, ADDED]);
    const sum = await call(client, who, ADDED, { a: 2, b: 3 });
    if (sum !== '5') throw new Error(`${who}: add said ${sum}`);
  }

  await Promise.all([...modernWire.pending, ...legacyWire.pending]);
  say('report', {
    modern: {
      version: modern.getNegotiatedProtocolVersion(),
      era: modern.getProtocolEra(),
      asked: modernAsked,
      heard: modernHeard.length,
      honored: subscription.honoredFilter,
      wire: modernWire,
    },
    legacy: {
      version: legacyTransport.protocolVersion,
      session: legacyTransport.sessionId !== undefined,
      asked: legacyAsked,
      heard: legacyHeard.length,
      wire: legacyWire,
    },
  });
  lines.close();
  await subscription.close();
  await modern.close();
  await legacyTransport.terminateSession().catch(() => {});
  await legacy.close();
  say('done');
}

main().then(
  () => process.exit(0),
  (error) => {
    say('failed', { error: String(error?.stack ?? error) });
    process.exit(1);
  },
);
