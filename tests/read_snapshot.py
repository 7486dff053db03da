"""Reads a streamrag Parquet snapshot with pyarrow alone (no streamrag code) and prints what
it found as JSON, for the Rust suites to compare with the graph they built."""
import json
import sys

import pyarrow.parquet as pq


def main(snapshot_dir: str) -> None:
    manifest = json.load(open(f"{snapshot_dir}/manifest.json"))
    tables = {name: pq.read_table(f"{snapshot_dir}/{file}") for name, file in manifest["files"].items()}
    triples = tables["triples"]
    support = triples.column("supporting_documents").to_pylist()
    out = {
        "rows": {name: t.num_rows for name, t in tables.items()},
        "columns": {name: t.column_names for name, t in tables.items()},
        "support": sum(len(s) for s in support),
        "distinct_triple_ids": len(set(triples.column("triple_id").to_pylist())),
        "empty_support": sum(1 for s in support if not s),
        "mentions": sum(tables["entities"].column("document_count").to_pylist()),
        "named_subjects": sum(1 for s in triples.column("subject").to_pylist() if s),
        "documents": sorted(tables["documents"].column("doc_id").to_pylist())[:3],
        "manifest_rows": manifest["rows"],
        "offsets": manifest["offsets"],
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
