#!/usr/bin/env python3
"""Recall of `streamrag eval` reports on the questions whose gold names a page the question
does not write: a gold title written neither in the question nor in another gold passage (by
its normalised title). These are the questions where an alias or a hop must find the page, and
where entity resolution could matter.

usage: scripts/unwritten-gold.py [--dataset DIR] REPORT.json [REPORT.json ...]
DIR: a 2Wiki directory with corpus.json(.gz), questions.json(.gz) and
gold_titles_derived.json(.gz) (default ../shared/datasets/2wikimultihopqa).
"""
import argparse
import gzip
import json
import os
import re


def load(path):
    for p in (path, path + ".gz"):
        if os.path.exists(p):
            opener = gzip.open if p.endswith(".gz") else open
            with opener(p, "rt") as f:
                return json.load(f)
    raise SystemExit(f"no {path}(.gz)")


def norm(s):
    return " ".join(re.sub(r"[^\w]+", " ", s.replace("'", "").lower()).split())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", default="../shared/datasets/2wikimultihopqa")
    ap.add_argument("reports", nargs="+")
    a = ap.parse_args()
    corpus = {p["title"]: p["text"] for p in load(os.path.join(a.dataset, "corpus.json"))}
    gold = {g["id"]: g["gold_titles"] for g in load(os.path.join(a.dataset, "gold_titles_derived.json"))}
    questions = {q["id"]: q["question"] for q in load(os.path.join(a.dataset, "questions.json"))}

    def unwritten(qid):
        q = " " + norm(questions[qid]) + " "
        titles = gold.get(qid, [])
        for t in titles:
            nt = " " + norm(t) + " "
            if nt in q or any(nt in " " + norm(corpus.get(o, "")) + " " for o in titles if o != t):
                continue
            return True
        return False

    for path in a.reports:
        with open(path) as f:
            per = json.load(f)["per_question"]
        sub = [x for x in per if unwritten(x["id"])]

        def rec(xs, k):
            return 100 * sum(x[k] for x in xs) / max(1, len(xs))

        print(f"{path}: all {len(per)} {rec(per, 'recall@2'):.1f} / {rec(per, 'recall@5'):.1f}; "
              f"gold not written {len(sub)} {rec(sub, 'recall@2'):.1f} / {rec(sub, 'recall@5'):.1f}")


if __name__ == "__main__":
    main()
