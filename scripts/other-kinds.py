#!/usr/bin/env python3
"""Two corpora of other kinds than Wikipedia, for `streamrag eval`, built from Debian packages so
that anyone can rebuild them byte for byte (nothing is committed but this script and the
questions):

- narrative: eleven narrative books of the King James Bible (package bible-kjv-text, read with
  the package bible-kjv's reader), in chunks of consecutive verses of at most 1,200 characters;
- technical: nine files of Vim's reference manual (package vim-runtime), in chunks of
  consecutive paragraphs of at most 1,200 characters. Key terms are lower-case option and
  command names.

Chunks have opaque titles (n0, n1, ... / t0, t1, ...): no chunk is an entity's own page. The
questions (scripts/other-kinds/<kind>.json) were written by reading chunks drawn at random
(seeded); each names its one gold chunk. Their type is "tune" for the first half and "test" for
the second, so `eval` prints both halves; only the first may guide a choice.

Usage: scripts/other-kinds.py OUT_DIR   (writes OUT_DIR/narrative and OUT_DIR/technical)
       scripts/other-kinds.py --sample KIND N SEED OUT_DIR   (prints N random chunks to read)
"""
import glob
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

LIMIT = 1200
BOOKS = ["Genesis", "Exodus", "Judges", "Ruth", "1Samuel", "2Samuel", "1Kings", "Esther", "Jonah", "Daniel", "Acts"]
VIM_FILES = ["options", "pattern", "change", "motion", "windows", "editing", "insert", "undo", "fold"]
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "other-kinds")


def unpack(pkg, work):
    """Downloads a Debian package (the registry) and unpacks it under `work`."""
    subprocess.run(["apt-get", "download", pkg], cwd=work, check=True, stdout=subprocess.DEVNULL)
    deb = glob.glob(os.path.join(work, f"{pkg}_*.deb"))[0]
    root = os.path.join(work, pkg)
    subprocess.run(["dpkg-deb", "-x", deb, root], check=True)
    return root


def pack(units, prefix):
    """Consecutive units joined (by `sep`) into chunks of at most LIMIT characters; a unit
    longer than LIMIT is cut at line ends, then at LIMIT."""
    chunks, cur = [], ""
    for unit, sep, brk in units:
        pieces = [unit]
        if len(unit) > LIMIT:
            pieces, part = [], ""
            for line in unit.split("\n"):
                while len(line) > LIMIT:
                    pieces.append(line[:LIMIT])
                    line = line[LIMIT:]
                if part and len(part) + 1 + len(line) > LIMIT:
                    pieces.append(part)
                    part = line
                else:
                    part = f"{part}\n{line}" if part else line
            if part:
                pieces.append(part)
        for p in pieces:
            if cur and (brk or len(cur) + len(sep) + len(p) > LIMIT):
                chunks.append(cur)
                cur = ""
            cur = f"{cur}{sep}{p}" if cur else p
            brk = False
    if cur:
        chunks.append(cur)
    return [{"title": f"{prefix}{i}", "text": c} for i, c in enumerate(chunks)]


def narrative(work):
    data = os.path.join(unpack("bible-kjv-text", work), "usr", "lib")
    reader = os.path.join(unpack("bible-kjv", work), "usr", "bin", "bible")
    units, last = [], None
    for book in BOOKS:
        out = subprocess.run([reader, "-f", f"{book}1:1-{book}99:99"], cwd=data, check=True, capture_output=True, text=True).stdout
        for line in out.splitlines():
            m = re.match(r"^(\S+?)(\d+):(\d+) (.*)$", line)
            if not m:
                continue
            chapter = (m.group(1), m.group(2))
            units.append((m.group(4).strip(), " ", chapter != last))
            last = chapter
    return pack(units, "n")


def technical(work):
    root = unpack("vim-runtime", work)
    docs = glob.glob(os.path.join(root, "usr", "share", "vim", "vim*", "doc"))[0]
    units = []
    for name in VIM_FILES:
        with open(os.path.join(docs, f"{name}.txt"), encoding="utf-8", errors="replace") as f:
            text = f.read()
        first = True
        for para in re.split(r"\n\s*\n", text):
            lines = [l.rstrip() for l in para.split("\n") if not re.match(r"^\s*(vim:|={5,}|-{5,})", l)]
            para = "\n".join(l for l in lines if l.strip())
            if para:
                units.append((para, "\n\n", first))
                first = False
    return pack(units, "t")


def main(out):
    work = tempfile.mkdtemp()
    try:
        for kind, build in (("narrative", narrative), ("technical", technical)):
            chunks = build(work)
            d = os.path.join(out, kind)
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "corpus.json"), "w", encoding="utf-8") as f:
                json.dump(chunks, f)
            qpath = os.path.join(HERE, f"{kind}.json")
            n = 0
            if os.path.exists(qpath):
                shutil.copy(qpath, os.path.join(d, "questions.json"))
                n = len(json.load(open(qpath)))
            print(f"{kind}: {len(chunks)} chunks, {n} questions -> {d}")
    finally:
        shutil.rmtree(work)


def sample(kind, n, seed, out):
    chunks = json.load(open(os.path.join(out, kind, "corpus.json")))
    for c in random.Random(seed).sample(chunks, n):
        print(f"=== {c['title']}\n{c['text']}\n")


if __name__ == "__main__":
    a = sys.argv[1:]
    if len(a) == 5 and a[0] == "--sample":
        sample(a[1], int(a[2]), int(a[3]), a[4])
    elif len(a) == 1:
        main(a[0])
    else:
        sys.exit(__doc__)
