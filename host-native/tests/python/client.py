"""A real MCP client (the official Python SDK, PyPI `mcp`) against `mcp-reconcile serve`.

Run by host-native/tests/python_clients.rs with the test venv's Python. One scenario for both
transports:

  1. list the tools and call two of them;
  2. edit the settings file while connected (a server gains a tool): a `tools/list_changed`
     notification arrives, the new tool is listed and answers;
  3. edit it again to remove a server: a `tools/list_changed` arrives, its tools are gone, and
     calling one says the server was removed.

A second scenario, `pair`, starts SERVE_COMMAND twice at once (two clients in one project):

  1. both list the same tools and call one;
  2. the `notes` server was started once for both (its marker file has one start line);
  3. removing a server from the settings sends each client a `tools/list_changed`, and each
     listing then lacks its tools.

Usage:
  client.py stdio SCENARIO.json -- SERVE_COMMAND...
  client.py http SCENARIO.json URL TOKEN_FILE
  client.py pair SCENARIO.json -- SERVE_COMMAND...

SCENARIO.json: {"settings": path of the settings file, "edited": its content after the first
edit, "removed": its content after the second, and for `pair` "marker": the `notes` server's
marker file}. Waits are bounded by PATIENCE seconds (generous:
nothing here measures time). Prints one line per step; any failure raises (non-zero exit).
"""

import json
import os
import sys
from contextlib import asynccontextmanager

import anyio
from mcp import ClientSession, types
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamablehttp_client

PATIENCE = 45

# Set once a scenario's last step has passed.
STEPS_DONE = False


class ListChanged:
    """Counts `notifications/tools/list_changed` and lets a step wait for the next one."""

    def __init__(self):
        self.count = 0
        self.event = anyio.Event()

    async def handle(self, message):
        if isinstance(message, types.ServerNotification) and isinstance(
            message.root, types.ToolListChangedNotification
        ):
            self.count += 1
            self.event.set()

    def arm(self):
        self.event = anyio.Event()

    async def next(self):
        await self.event.wait()
        self.arm()


def write_atomically(path, value):
    """As editors save: a temp file renamed over the settings file."""
    tmp = path + ".tmp~"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=2)
    os.replace(tmp, path)


async def tool_names(session):
    return sorted(t.name for t in (await session.list_tools()).tools)


def text_of(result):
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def edit_and_wait(session, changes, path, content, settled):
    """Writes `content` to `path`, then waits for list_changed notifications until the listing
    after one satisfies `settled`; returns that listing."""
    changes.arm()
    write_atomically(path, content)
    with anyio.fail_after(PATIENCE):
        while True:
            await changes.next()
            names = await tool_names(session)
            if settled(names):
                return names


async def scenario(session, changes, plan):
    await session.initialize()

    names = await tool_names(session)
    expected = ["mcp__notes__add", "mcp__notes__echo", "mcp__other__echo"]
    assert names == expected, f"listed {names}, expected {expected}"
    print(f"listed: {' '.join(names)}", flush=True)

    added = await session.call_tool("mcp__notes__add", {"a": 2, "b": 3})
    assert not added.isError and text_of(added) == "5", added
    echoed = await session.call_tool("mcp__other__echo", {"text": "hello"})
    assert not echoed.isError and "hello" in text_of(echoed), echoed
    print("called: mcp__notes__add mcp__other__echo", flush=True)

    names = await edit_and_wait(
        session, changes, plan["settings"], plan["edited"],
        lambda names: "mcp__notes__sleep" in names,
    )
    assert "mcp__other__echo" in names, names
    slept = await session.call_tool("mcp__notes__sleep", {"ms": 10})
    assert not slept.isError, slept
    print("edited: mcp__notes__sleep listed and called", flush=True)

    names = await edit_and_wait(
        session, changes, plan["settings"], plan["removed"],
        lambda names: "mcp__other__echo" not in names,
    )
    assert names == ["mcp__notes__add", "mcp__notes__echo", "mcp__notes__sleep"], names
    gone = await session.call_tool("mcp__other__echo", {"text": "hello"})
    assert gone.isError and "removed" in text_of(gone), gone
    print("removed: list_changed arrived, mcp__other__echo is gone", flush=True)
    global STEPS_DONE
    STEPS_DONE = True


@asynccontextmanager
async def connect(argv):
    mode, rest = argv[0], argv[2:]
    if mode == "stdio":
        assert rest[0] == "--", argv
        # The whole environment (the SDK passes only a few variables by default): the test's
        # runtime directory decides which daemon serve attaches to.
        params = StdioServerParameters(command=rest[1], args=rest[2:], env=dict(os.environ))
        async with stdio_client(params) as (read, write):
            yield read, write
    elif mode == "http":
        url, token_file = rest
        with open(token_file, encoding="utf-8") as f:
            token = f.readline().strip()
        headers = {"Authorization": f"Bearer {token}"}
        async with streamablehttp_client(url, headers=headers) as (read, write, _):
            yield read, write
    else:
        raise SystemExit(f"unknown transport {mode!r}")


async def pair(argv, plan):
    """Two clients of two `serve` processes for the same project at once."""
    assert argv[2] == "--", argv
    params = StdioServerParameters(command=argv[3], args=argv[4:], env=dict(os.environ))
    one_changes, two_changes = ListChanged(), ListChanged()
    async with stdio_client(params) as (r1, w1), stdio_client(params) as (r2, w2):
        async with ClientSession(r1, w1, message_handler=one_changes.handle) as one, \
                ClientSession(r2, w2, message_handler=two_changes.handle) as two:
            with anyio.fail_after(PATIENCE):
                await one.initialize()
                await two.initialize()
            expected = ["mcp__notes__add", "mcp__notes__echo", "mcp__other__echo"]
            for session in (one, two):
                names = await tool_names(session)
                assert names == expected, f"listed {names}, expected {expected}"
                added = await session.call_tool("mcp__notes__add", {"a": 2, "b": 3})
                assert not added.isError and text_of(added) == "5", added
            print(f"listed and called in both: {' '.join(expected)}", flush=True)

            with open(plan["marker"], encoding="utf-8") as f:
                starts = [l for l in f.read().splitlines() if l.startswith("server ")]
            assert len(starts) == 1, f"notes started {len(starts)} times: {starts}"
            print("shared: one notes process for both clients", flush=True)

            gone = lambda names: "mcp__other__echo" not in names
            await edit_and_wait(one, one_changes, plan["settings"], plan["removed"], gone)
            with anyio.fail_after(PATIENCE):
                while not gone(await tool_names(two)):
                    await two_changes.next()
            print("removed: both clients heard list_changed", flush=True)
            global STEPS_DONE
            STEPS_DONE = True


def teardown_race_only(group):
    """Whether every error in `group` is the SDK's stdio reader handing a late message (a
    notification still on its way) to a session that already closed its stream."""
    late = (anyio.BrokenResourceError, anyio.ClosedResourceError)
    return group.subgroup(lambda e: not isinstance(e, late) and not isinstance(e, BaseExceptionGroup)) is None


async def run(argv, plan):
    if argv[0] == "pair":
        await pair(argv, plan)
        return
    changes = ListChanged()
    async with connect(argv) as (read, write):
        async with ClientSession(read, write, message_handler=changes.handle) as session:
            await scenario(session, changes, plan)


async def main(argv):
    with open(argv[1], encoding="utf-8") as f:
        plan = json.load(f)
    try:
        await run(argv, plan)
    except BaseExceptionGroup as group:
        # Every step has passed by the time the sessions close; a message that arrives while
        # the SDK tears its streams down is not a failure of the server (each step asserts).
        if not (STEPS_DONE and teardown_race_only(group)):
            raise
        print("(a late message met the SDK's closed stream at teardown)", file=sys.stderr)
    if not STEPS_DONE:
        raise SystemExit("the scenario ended before its last step")
    print("done", flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1:])
