"""Writes this folder's tiny TREC-format example from the chitchat-dataset wheel (MIT): 60 dialogue contexts as
queries, each with its true next turn (rel 1) and 3 turns of other conversations (rel 0) as judged candidates.

    .venv/bin/python docs/examples/byod/make_example.py
"""

from __future__ import annotations

from pathlib import Path

from curricula.data.chitchat import load

HERE = Path(__file__).resolve().parent


def clean(text: str) -> str:
    return " ".join(text.split())  # no tab or newline inside a field


def main() -> None:
    data = load({}, negatives=3, max_instances={"train": 48, "dev": 6, "test": 6}, max_context_turns=2, seed=7)
    qid = {q: f"q{i:03d}" for i, q in enumerate(sorted(data.queries["qid"]))}
    docid = {d: f"d{i:04d}" for i, d in enumerate(sorted(data.candidates["docid"].unique()))}
    texts = dict(data.docs.select("docid", "text").iter_rows())
    rel = {(q, d): r for q, d, r in data.qrels.select("qid", "docid", "rel").iter_rows()}
    with open(HERE / "collection.tsv", "w", encoding="utf-8") as out:
        out.writelines(f"{docid[d]}\t{clean(texts[d])}\n" for d in sorted(docid, key=docid.get))
    with open(HERE / "queries.tsv", "w", encoding="utf-8") as out:
        rows = sorted(data.queries.select("qid", "text").iter_rows(), key=lambda row: qid[row[0]])
        out.writelines(f"{qid[q]}\t{clean(text)}\n" for q, text in rows)
    with open(HERE / "qrels.txt", "w", encoding="utf-8") as out:
        pairs = sorted(data.candidates.select("qid", "docid").iter_rows(), key=lambda p: (qid[p[0]], docid[p[1]]))
        out.writelines(f"{qid[q]} 0 {docid[d]} {rel.get((q, d), 0)}\n" for q, d in pairs)


if __name__ == "__main__":
    main()
