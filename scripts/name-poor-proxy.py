#!/usr/bin/env python3
"""A name-poor stand-in of a titled retrieval dataset (the layout of
../shared/datasets/2wikimultihopqa): every passage and question lower-cased, titles replaced by
opaque ids (p0, p1, ...), gold titles mapped to them. The built-in extractor then finds few
entities and no question links a name, which is how text without proper names looks to the
hybrid. With --keep-case only the titles go (names still link, but no passage is any entity's
own page, as in a corpus of chunks). Usage: scripts/name-poor-proxy.py [--keep-case] SRC_DIR
OUT_DIR; then `streamrag eval --dataset OUT_DIR ...`."""
import gzip
import json
import os
import sys


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def main(src, out, keep_case=False):
    case = (lambda t: t) if keep_case else str.lower
    corpus = load(os.path.join(src, "corpus.json.gz"))
    ids = {}
    passages = []
    for i, p in enumerate(corpus):
        ids[p["title"]] = f"p{i}"
        passages.append({"title": f"p{i}", "text": case(p["text"])})
    gold = {g["id"]: g["gold_titles"] for g in load(os.path.join(src, "gold_titles_derived.json.gz"))}
    questions = []
    for q in load(os.path.join(src, "questions.json.gz")):
        titles = gold.get(q["id"], [])
        questions.append({
            "id": q["id"],
            "question_type": q["question_type"],
            "question": case(q["question"]),
            "gold_titles": [ids[t] for t in titles if t in ids],
            "answer": case(q["answer"]),
        })
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "corpus.json"), "w", encoding="utf-8") as f:
        json.dump(passages, f)
    with open(os.path.join(out, "questions.json"), "w", encoding="utf-8") as f:
        json.dump(questions, f)
    print(f"{len(passages)} passages, {len(questions)} questions -> {out}")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--keep-case"]
    if len(args) != 2:
        sys.exit(__doc__)
    main(args[0], args[1], keep_case="--keep-case" in sys.argv[1:])
