"""The official `openai` package as the client of streamrag's OpenAI-compatible endpoint.

Usage: openai_client.py BASE_URL (e.g. http://127.0.0.1:8080/v1). The node must hold the
sample corpus (samples/corpus.jsonl). Asserts and exits non-zero on the first failure; prints
what it saw as one JSON object on success.
"""
import json
import re
import sys

import openai

base = sys.argv[1]
client = openai.OpenAI(base_url=base, api_key="unused", max_retries=0, timeout=60)
seen = {}

models = [m.id for m in client.models.list()]
assert models == ["streamrag"], models

HUSBAND = "In which city was the husband of Marie Curie born?"
RIVER = "Which river flows through the city where Marie Curie was born?"


def check_citations(text, docs):
    cited = {int(n) for n in re.findall(r"\[(\d+)\]", text)}
    assert cited, f"no numbered citation in {text!r}"
    assert all(1 <= n <= len(docs) for n in cited), (cited, len(docs))
    for d in docs:
        assert f"[{d['n']}] " in text, (d, text)


# Not streamed: the answer, its numbered sources, and the documents in the extra field.
r = client.chat.completions.create(
    model="streamrag",
    messages=[{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": HUSBAND}],
)
text = r.choices[0].message.content
extra = r.model_extra["streamrag"]
docs = extra["documents"]
ids = [d["id"] for d in docs]
assert r.choices[0].finish_reason == "stop"
assert "pierre-curie" in ids[:3], ids
check_citations(text, docs)
assert extra["facts"], extra
# the answer itself, cited: the husband's birthplace, from his passage
assert text.startswith("Paris ["), text
assert extra["abstained"] is False, extra
assert "pierre-curie" in [c["document_id"] for c in extra["citations"]], extra["citations"]
for c in extra["citations"]:
    assert f"[{c['n']}]" in text.split("\n")[0], (c, text)
seen["husband"] = {"text": text, "ids": ids, "answered_by": extra["answered_by"]}

# Streamed, the same question: the same text, word by word; the extra field on the last chunk.
stream = client.chat.completions.create(model="streamrag", messages=[{"role": "user", "content": HUSBAND}], stream=True)
parts, last = [], None
for chunk in stream:
    if chunk.choices and chunk.choices[0].delta.content:
        parts.append(chunk.choices[0].delta.content)
    last = chunk
assert len(parts) > 3, parts
assert "".join(parts) == text, ("".join(parts), text)
assert last.choices[0].finish_reason == "stop"
assert [d["id"] for d in last.model_extra["streamrag"]["documents"]] == ids

# Another question about the same person gets other evidence; content given as parts.
r2 = client.chat.completions.create(model="streamrag", messages=[{"role": "user", "content": [{"type": "text", "text": RIVER}]}])
ids2 = [d["id"] for d in r2.model_extra["streamrag"]["documents"]]
assert "warsaw" in ids2[:3], ids2
assert ids2[:3] != ids[:3], (ids, ids2)
check_citations(r2.choices[0].message.content, r2.model_extra["streamrag"]["documents"])
seen["river"] = {"text": r2.choices[0].message.content, "ids": ids2}

# A question the corpus cannot answer: an abstention, no invented name, no sources listed.
r3 = client.chat.completions.create(model="streamrag", messages=[{"role": "user", "content": "Who won the 2031 Mars chess championship?"}])
text3 = r3.choices[0].message.content
extra3 = r3.model_extra["streamrag"]
assert extra3["abstained"] is True and extra3["answered_by"] == "none", extra3
assert extra3["citations"] == [], extra3
assert not re.search(r"(?<!^)\b[A-Z][a-z]", text3), f"the abstention names something: {text3!r}"
assert "Sources" not in text3, text3
seen["unanswerable"] = {"text": text3}

# Errors in OpenAI's shape, raised as the client's own exceptions.
def status_of(**kw):
    try:
        client.chat.completions.create(**kw)
    except openai.APIStatusError as e:
        body = e.response.json()["error"]
        assert body["message"] and body["type"], body
        return e.status_code, body
    raise AssertionError(f"accepted: {kw}")


seen["errors"] = {
    "no messages": status_of(model="streamrag", messages=[]),
    "no user message": status_of(model="streamrag", messages=[{"role": "system", "content": "hi"}]),
    "unknown model": status_of(model="gpt-4o", messages=[{"role": "user", "content": HUSBAND}]),
    "image part": status_of(model="streamrag", messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}]),
}
assert seen["errors"]["no messages"][0] == 400
assert seen["errors"]["no user message"][0] == 400
assert seen["errors"]["unknown model"][0] == 404 and seen["errors"]["unknown model"][1]["code"] == "model_not_found"
assert seen["errors"]["image part"][0] == 400
print(json.dumps(seen))
