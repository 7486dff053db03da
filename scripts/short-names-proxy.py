#!/usr/bin/env python3
"""A stand-in of a titled retrieval dataset (the layout of ../shared/datasets/2wikimultihopqa)
whose questions write names shorter than the corpus does, as people do ("Curie" for "Marie
Curie", "Goose Girl" for "The Goose Girl"): where a question holds a passage title (without a
trailing parenthesis, "X (film)"), a person's (the passage says born) is cut to its last word
and a title led by an article loses the article. The
corpus and gold titles are unchanged, so a data directory indexed from the source serves it
(`streamrag eval --dataset OUT_DIR --data DIR --indexed`). Exact name linking then misses those
names. Usage: scripts/short-names-proxy.py SRC_DIR OUT_DIR."""
import gzip
import json
import os
import re
import shutil
import sys


ARTICLES = {"the", "a", "an", "el", "la", "le", "les", "il", "der", "die", "das"}


def load(path):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def main(src, out):
    corpus = load(os.path.join(src, "corpus.json.gz"))
    short = {}
    for p in corpus:
        name = re.sub(r"\s*\([^)]*\)\s*$", "", p["title"]).strip()
        words = name.split()
        if len(words) < 2:
            continue
        if words[0].lower() in ARTICLES:
            short[name] = " ".join(words[1:])
        elif re.search(r"\bborn\b", p["text"][:300]) and len(words[-1]) > 2:
            short[name] = words[-1]
    # longest first, so a name inside a longer one is not shortened on its own
    ordered = sorted(short, key=len, reverse=True)
    questions = load(os.path.join(src, "questions.json.gz"))
    changed = 0
    for q in questions:
        text = q["question"]
        done = []
        for name in ordered:
            if name in text and not any(name in d for d in done):
                text = re.sub(r"(?<!\w)" + re.escape(name) + r"(?!\w)", short[name], text)
                done.append(name)
        changed += text != q["question"]
        q["question"] = text
    os.makedirs(out, exist_ok=True)
    for f in ("corpus.json.gz", "gold_titles_derived.json.gz"):
        shutil.copyfile(os.path.join(src, f), os.path.join(out, f))
    with gzip.open(os.path.join(out, "questions.json.gz"), "wt", encoding="utf-8") as f:
        json.dump(questions, f, ensure_ascii=False)
    print(f"{changed} of {len(questions)} questions shortened", file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
