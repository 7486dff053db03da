"""The official MCP Python SDK as the client of `streamrag mcp` over stdio.

Usage: mcp_client.py STREAMRAG_BINARY NODE_HTTP_ADDR. The node holds the sample corpus and no
document about the Zorvathian Tide. Lists the tools, asks a question that needs a document
the client then ingests, asks again, deletes the document, and checks the errors. Prints what
it saw as JSON; any failed check exits non-zero.
"""
import asyncio
import json
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

binary, addr = sys.argv[1], sys.argv[2]
QUESTION = "Who discovered the Zorvathian Tide?"
DOC = {
    "id": "zorvathian-tide",
    "title": "Zorvathian Tide",
    "text": "The Zorvathian Tide is a seasonal current in the Kelmaran Sea. It was discovered by Ilsabet Quorne in 1843.",
}


def text_of(result):
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def stats(session):
    r = await session.call_tool("stats", {})
    assert not r.is_error, text_of(r)
    return r.structured_content


async def wait_for(session, pred, what, timeout=60):
    deadline = time.time() + timeout
    while True:
        s = await stats(session)
        if pred(s):
            return s
        assert time.time() < deadline, f"{what}: {s}"
        await asyncio.sleep(0.2)


async def main():
    seen = {}
    params = StdioServerParameters(command=binary, args=["mcp", "--http", addr])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            assert init.server_info.name == "streamrag", init.server_info
            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert set(tools) == {"ask", "ingest", "delete", "stats"}, set(tools)
            assert "question" in tools["ask"].input_schema["properties"], tools["ask"].input_schema
            assert set(tools["ingest"].input_schema["required"]) == {"id", "text"}, tools["ingest"].input_schema

            before = await stats(session)
            r = await session.call_tool("ask", {"question": QUESTION})
            assert not r.is_error, text_of(r)
            ids = [d["id"] for d in r.structured_content["documents"]]
            assert "zorvathian-tide" not in ids
            seen["before"] = {"ids": ids, "documents": before["documents"]}

            r = await session.call_tool("ingest", DOC)
            assert not r.is_error, text_of(r)
            assert r.structured_content["accepted"] == 1, r.structured_content
            await wait_for(session, lambda s: s["documents"] == before["documents"] + 1, "the document never reached the graph")

            # the answer now needs the new document: it is the top source, its fact is stated
            deadline = time.time() + 60
            while True:
                r = await session.call_tool("ask", {"question": QUESTION, "top_k": 3})
                assert not r.is_error, text_of(r)
                ids = [d["id"] for d in r.structured_content["documents"]]
                if ids[:1] == ["zorvathian-tide"] or time.time() > deadline:
                    break
                await asyncio.sleep(0.5)
            text = text_of(r)
            assert ids[0] == "zorvathian-tide", ids
            assert "Ilsabet Quorne" in text and "[1] Zorvathian Tide (zorvathian-tide)" in text, text
            assert len(ids) <= 3, ids
            seen["after"] = {"ids": ids, "text": text}

            r = await session.call_tool("delete", {"id": "zorvathian-tide"})
            assert not r.is_error, text_of(r)
            await wait_for(session, lambda s: s["documents"] == before["documents"], "the deletion never reached the graph")

            # bad input: a tool error with the node's reason, and the session goes on
            r = await session.call_tool("ingest", {"id": "x" * 600, "text": "too long an id"})
            assert r.is_error and "id" in text_of(r), text_of(r)
            seen["bad ingest"] = text_of(r)
            r = await session.call_tool("ask", {"question": "   "})
            assert r.is_error, text_of(r)
            seen["blank question"] = text_of(r)
            after = await stats(session)
            assert after["documents"] == before["documents"], after
    print(json.dumps(seen))


asyncio.run(main())
