"""TREC-style files (collection, queries, qrels, run) and the ir_datasets adapter's mapping.

No TREC-format sample ships in ../shared/data (ANTIQUE and MS MARCO are too large), so each test writes small files
in the exact native formats: ANTIQUE-style ids (qid ``2020338``, docid ``2020338_0``, qrels iter ``U0``, grades
1-4) and MS MARCO-style numeric ids with tab-separated qrels.
"""

from __future__ import annotations

import re
import sys
import types
from collections import namedtuple
from pathlib import Path

import polars as pl
import pytest

from curricula.data import ir_datasets as irds_adapter
from curricula.data import trec
from curricula.plumbing.errors import InputFormatError

DOCS = [
    ("2020338_0", ("A small group of politicians believed strongly that Saddam Hussein remaining in power was a "
                   "sign of weakness.")),
    ("2020338_1", "Because there is a lot of oil in Iraq."),
    ("2020338_2", "It is tempting to say that the US invaded Iraq because of its oil, but the reasons were many."),
    ("3097310_0", "It depends on the cause of the swelling; see a doctor if it lasts more than a few days."),
    ("3097310_1", "Could be gout or arthritis."),
    ("1964316_0", "Your body spends a lot of energy digesting a large meal."),
    ("1964316_1", "Blood flow goes to the stomach after eating, and insulin makes you sleepy."),
    ("1971899_0", "Ask friends and family for recommendations, then check the doctor's credentials."),
]
QUERIES = {
    "train": [("2020338", "Why did the U.S Invade Iraq ?"),
              ("3097310", "What causes severe swelling and pain in the knees?")],
    "dev": [("1971899", "How do I find a good doctor?")],
    "test": [("1964316", "Why do I get tired after eating?")],
}
QRELS = {
    "train": [("2020338", "2020338_0", 4), ("2020338", "2020338_1", 2), ("2020338", "2020338_2", 3),
              ("3097310", "3097310_0", 3), ("3097310", "3097310_1", 1)],
    "dev": [("1971899", "1971899_0", 2)],
    "test": [("1964316", "1964316_0", 4), ("1964316", "1964316_1", -1)],
}
# Deliberately not in rank order. Rank ties: 2020338 rank 2 (higher score first), 1964316 rank 2 (equal scores:
# docid ascending). Scores order each query like its ranks, so ranking by score gives the same lists.
RUN = [
    ("2020338", "2020338_1", 4, 3.0),
    ("2020338", "2020338_0", 2, 12.9),
    ("2020338", "2020338_2", 1, 14.2),
    ("2020338", "3097310_0", 2, 13.5),
    ("3097310", "3097310_1", 1, 9.1),
    ("1964316", "2020338_1", 2, 10.0),
    ("1964316", "1964316_1", 1, 11.0),
    ("1964316", "1964316_0", 2, 10.0),
]


def write(path: Path, lines: list[str], newline: str = "\n") -> Path:
    path.write_bytes("".join(line + newline for line in lines).encode("utf-8"))
    return path


@pytest.fixture
def files(tmp_path):
    """The ANTIQUE-style dataset: queries and qrels per split (train queries with CRLF), one run file."""
    out = {
        "collection": str(write(tmp_path / "antique-collection.txt", [f"{d}\t{t}" for d, t in DOCS])),
        "queries": {}, "qrels": {},
        "run": str(write(tmp_path / "bm25.run", [f"{q} Q0 {d} {r} {s} bm25" for q, d, r, s in RUN])),
    }
    for split, rows in QUERIES.items():
        crlf = "\r\n" if split == "train" else "\n"
        out["queries"][split] = str(write(tmp_path / f"antique-{split}-queries.txt",
                                          [f"{q}\t{t}" for q, t in rows], crlf))
    for split, rows in QRELS.items():
        # a trailing blank line, as some distributions have
        lines = [f"{q} U0 {d} {r}" for q, d, r in rows] + [""]
        out["qrels"][split] = str(write(tmp_path / f"antique-{split}.qrel", lines))
    return out


def pairs(df: pl.DataFrame) -> list[tuple[str, str]]:
    return list(df.select("qid", "docid").iter_rows())


FROM_RUN = [("1964316", "1964316_0"), ("1964316", "1964316_1"), ("1964316", "2020338_1"),
            ("2020338", "2020338_0"), ("2020338", "2020338_1"), ("2020338", "2020338_2"), ("2020338", "3097310_0"),
            ("3097310", "3097310_1")]
FROM_RUN_DEPTH_2 = [("1964316", "1964316_0"), ("1964316", "1964316_1"),
                    ("2020338", "2020338_2"), ("2020338", "3097310_0"), ("3097310", "3097310_1")]
FROM_QRELS = [("1964316", "1964316_0"), ("1964316", "1964316_1"), ("1971899", "1971899_0"),
              ("2020338", "2020338_0"), ("2020338", "2020338_1"), ("2020338", "2020338_2"),
              ("3097310", "3097310_0"), ("3097310", "3097310_1")]


def test_tables_with_split_mappings_and_a_run(files):
    data = trec.load(files, candidates="run", run_depth=2).validate("trec")
    assert data.queries.to_dicts() == [
        {"qid": "1964316", "split": "test", "text": "Why do I get tired after eating?",
         "turns": ["Why do I get tired after eating?"], "domain": None},
        {"qid": "1971899", "split": "dev", "text": "How do I find a good doctor?",
         "turns": ["How do I find a good doctor?"], "domain": None},
        {"qid": "2020338", "split": "train", "text": "Why did the U.S Invade Iraq ?",
         "turns": ["Why did the U.S Invade Iraq ?"], "domain": None},
        {"qid": "3097310", "split": "train", "text": "What causes severe swelling and pain in the knees?",
         "turns": ["What causes severe swelling and pain in the knees?"], "domain": None},
    ]
    assert data.docs["docid"].to_list() == sorted(d for d, _ in DOCS)
    assert dict(data.docs.iter_rows())["2020338_1"] == "Because there is a lot of oil in Iraq."
    assert list(data.qrels.iter_rows()) == [
        ("1964316", "1964316_0", 4), ("1964316", "1964316_1", -1), ("1971899", "1971899_0", 2),
        ("2020338", "2020338_0", 4), ("2020338", "2020338_1", 2), ("2020338", "2020338_2", 3),
        ("3097310", "3097310_0", 3), ("3097310", "3097310_1", 1)]
    assert data.qrels.schema["rel"] == pl.Int32
    assert pairs(data.candidates) == FROM_RUN_DEPTH_2
    assert data.split_counts() == {"train": 2, "dev": 1, "test": 1}


@pytest.mark.parametrize("candidates, depth, expected", [
    ("run", None, FROM_RUN), ("auto", None, FROM_RUN), ("auto", 2, FROM_RUN_DEPTH_2), ("run", 1, [
        ("1964316", "1964316_1"), ("2020338", "2020338_2"), ("3097310", "3097310_1")]),
    ("qrels", None, FROM_QRELS), ("none", None, []),
])
def test_candidate_modes(files, candidates, depth, expected):
    data = trec.load(files, candidates=candidates, run_depth=depth).validate("trec")
    assert pairs(data.candidates) == expected


def test_auto_without_run_uses_qrels(files):
    del files["run"]
    assert pairs(trec.load(files).candidates) == FROM_QRELS


def test_run_as_split_mapping(files, tmp_path):
    """Run files per split are one run; their split keys only organise files."""
    files["run"] = {
        "train": str(write(tmp_path / "train.run", [f"{q} Q0 {d} {r} {s} bm25" for q, d, r, s in RUN[:5]])),
        "test": str(write(tmp_path / "test.run", [f"{q} Q0 {d} {r} {s} bm25" for q, d, r, s in RUN[5:]])),
    }
    assert pairs(trec.load(files, run_depth=2).candidates) == FROM_RUN_DEPTH_2


def test_deterministic_and_independent_of_chunking(files, monkeypatch):
    first = trec.load(files, run_depth=3)
    again = trec.load(files, run_depth=3)
    monkeypatch.setattr(trec, "CHUNK_ROWS", 2)
    chunked = trec.load(files, run_depth=3)
    for name in ("queries", "docs", "qrels", "candidates"):
        assert getattr(first, name).equals(getattr(again, name)), name
        assert getattr(first, name).equals(getattr(chunked, name)), name


def test_msmarco_style_single_paths(tmp_path):
    """Numeric ids, tab-separated qrels, CRLF queries; a single queries path puts everything in train."""
    collection = write(tmp_path / "collection.tsv", [
        ("0\tThe presence of communication amid scientific minds was equally important to the success of the "
         "Manhattan Project as scientific intellect."),
        "1\tThe Manhattan Project and its atomic bomb helped bring an end to World War II.",
        "7067032\tCost of a jewelry box: about $40.",
    ])
    queries = write(tmp_path / "queries.train.tsv", [
        "1185869\t)what was the immediate impact of the success of the manhattan project?",
        "1185868\t_________ justice is designed to repair the harm to victim",
    ], "\r\n")
    qrels = write(tmp_path / "qrels.train.tsv", ["1185869\t0\t0\t1", "1185869\t0\t1\t-2", "1185868\t0\t7067032\t1"])
    data = trec.load({"collection": str(collection), "queries": str(queries), "qrels": str(qrels)})
    data.validate("msmarco")
    assert data.queries.select("qid", "split").rows() == [("1185868", "train"), ("1185869", "train")]
    assert not data.queries["text"].str.contains("\r").any()
    assert data.queries["text"][1].endswith("manhattan project?")
    assert list(data.qrels.iter_rows()) == [("1185868", "7067032", 1), ("1185869", "0", 1), ("1185869", "1", -2)]
    assert pairs(data.candidates) == [("1185868", "7067032"), ("1185869", "0"), ("1185869", "1")]


# --- bad input: every error names path:line -------------------------------------------------------------------

QRELS_TRAIN = [f"{q} U0 {d} {r}" for q, d, r in QRELS["train"]]
RUN_LINES = [f"{q} Q0 {d} {r} {s} bm25" for q, d, r, s in RUN]
COLLECTION = [f"{d}\t{t}" for d, t in DOCS]


def set_file(files, role, split, lines):
    """Replace one file's content (split None: a single-path role) and return its path."""
    path = Path(files[role][split] if split else files[role])
    write(path, lines)
    return path


BAD = [
    # (role, split, lines, bad line, message)
    ("collection", None, COLLECTION[:2] + ["2020338_9 no tab here"], 3,
     r"expected 2 tab-separated fields \(docid, text\), got 1"),
    ("collection", None, COLLECTION[:2] + ["2020338_9\ta\tb"], 3, r"expected 2 tab-separated fields .*got 3"),
    ("collection", None, COLLECTION + ["1964316_1\tanother text"], 9,
     r"duplicate docid '1964316_1' \(first at .*antique-collection\.txt:7\)"),
    ("collection", None, COLLECTION[:1] + ["2020338_1\t   "] + COLLECTION[2:], 2,
     r"empty text for docid '2020338_1'"),
    ("collection", None, COLLECTION[:1] + ["\tsome text"] + COLLECTION[2:], 2, r"empty docid"),
    ("queries", "test", ["1964316\tWhy do I get tired after eating?\textra"], 1,
     r"expected 2 tab-separated fields \(qid, text\), got 3"),
    ("queries", "test", ["1964316\t "], 1, r"empty text for qid '1964316'"),
    ("queries", "test", ["1964316\tWhy do I get tired?", "", "1964316\tWhy am I tired?"], 3,
     r"duplicate qid '1964316' \(first at .*antique-test-queries\.txt:1\)"),
    ("queries", "dev", ["1971899\tHow do I find a good doctor?", "2020338\tWhy did the U.S Invade Iraq ?"], 2,
     (r"qid '2020338' is listed in the dev queries and already in the train queries "
      r"\(.*antique-train-queries\.txt:1\)")),
    ("qrels", "train", QRELS_TRAIN[:3] + ["3097310 U0 3097310_0"], 4,
     r"expected 4 whitespace-separated fields \(qid iter docid rel\), got 3"),
    ("qrels", "train", QRELS_TRAIN[:1] + ["2020338 U0 2020338_1 high"], 2, r"rel must be an integer, got 'high'"),
    ("qrels", "train", QRELS_TRAIN[:1] + ["2020338 U0 2020338_1 2.5"], 2, r"rel must be an integer, got '2.5'"),
    ("qrels", "train", QRELS_TRAIN[:1] + ["2020338 U0 2020338_1 4294967296"], 2,
     r"rel 4294967296 is outside the 32-bit"),
    ("qrels", "train", QRELS_TRAIN[:2] + ["9999999 U0 2020338_2 3"], 3,
     r"unknown qid in qrels: '9999999' is not in the queries"),
    ("qrels", "train", QRELS_TRAIN[:2] + ["2020338 U0 2020338_7 3"], 3,
     r"unknown docid in qrels: '2020338_7' is not in the collection"),
    ("qrels", "train", QRELS_TRAIN + ["2020338 U0 2020338_1 1"], 6,
     r"duplicate qrels entry for qid '2020338' docid '2020338_1' \(first at .*antique-train\.qrel:2\)"),
    ("run", None, RUN_LINES[:1] + ["2020338 Q0 2020338_0 2 12.9"], 2,
     r"expected 6 whitespace-separated fields \(qid Q0 docid rank score tag\), got 5"),
    ("run", None, RUN_LINES[:1] + ["2020338 Q0 2020338_0 1.5 12.9 bm25"], 2, r"rank must be an integer, got '1.5'"),
    ("run", None, RUN_LINES[:1] + ["2020338 Q0 2020338_0 2 twelve bm25"], 2,
     r"score must be a number, got 'twelve'"),
    ("run", None, RUN_LINES[:1] + ["2020338 Q0 2020338_0 2 nan bm25"], 2, r"score must be a finite number"),
    ("run", None, RUN_LINES[:3] + ["1 Q0 2020338_0 2 12.9 bm25"], 4, r"unknown qid in run: '1' is not in the"),
    ("run", None, RUN_LINES[:3] + ["2020338 Q0 D42 2 12.9 bm25"], 4,
     r"unknown docid in run: 'D42' is not in the collection"),
    ("run", None, RUN_LINES + ["2020338 Q0 2020338_2 9 1.0 bm25"], 9,
     r"duplicate run entry for qid '2020338' docid '2020338_2' \(first at .*bm25\.run:3\)"),
    # a header line is refused, not read as a document or a query (a blank line before it still counts)
    ("collection", None, ["docid\ttext"] + COLLECTION, 1,
     r"looks like a header line \('docid\\ttext'\); these files have no header: delete the line"),
    ("queries", "test", ["", "QID\tQuery", "1964316\tWhy do I get tired after eating?"], 2,
     r"looks like a header line \('QID\\tQuery'\)"),
    ("qrels", "train", ["qid iter docid rel"] + QRELS_TRAIN, 1, r"looks like a header line"),
    ("run", None, ["qid Q0 docid rank score tag"] + RUN_LINES, 1, r"looks like a header line"),
]


@pytest.mark.parametrize("role, split, lines, line, message", BAD, ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)])
def test_bad_input_names_path_and_line(files, role, split, lines, line, message):
    path = set_file(files, role, split, lines)
    with pytest.raises(InputFormatError, match=rf"^{re.escape(str(path))}:{line}: {message}"):
        trec.load(files)


def test_second_qrels_file_is_named(files):
    """A duplicate across two split files points at the second file's line and the first file's."""
    path = set_file(files, "qrels", "test", ["1964316 Q0 1964316_0 4", "2020338 Q0 2020338_2 1"])
    with pytest.raises(InputFormatError, match=rf"^{re.escape(str(path))}:2: duplicate qrels entry .*"
                                               rf"antique-train\.qrel:3\)"):
        trec.load(files)


def test_invalid_utf8_empty_missing_and_blank_files(files, tmp_path):
    coll = Path(files["collection"])
    coll.write_bytes(b"2020338_0\tok\n2020338_1\tcaf\xe9\n")
    with pytest.raises(InputFormatError, match=rf"^{re.escape(str(coll))}:2: invalid UTF-8"):
        trec.load(files)
    coll.write_bytes(b"")
    with pytest.raises(InputFormatError, match=rf"^{re.escape(str(coll))}: file is empty"):
        trec.load(files)
    qrels = Path(files["qrels"]["dev"])
    qrels.write_text("\n  \n")
    write(coll, COLLECTION)
    with pytest.raises(InputFormatError, match=rf"^{re.escape(str(qrels))}: file has only blank lines"):
        trec.load(files)
    files["run"] = str(tmp_path / "missing.run")
    write(qrels, ["1971899 Q0 1971899_0 2"])
    with pytest.raises(InputFormatError, match=rf"^{re.escape(str(tmp_path / 'missing.run'))}: file not found"):
        trec.load(files)


def test_bad_options_and_roles(files):
    with pytest.raises(ValueError, match="candidates must be one of"):
        trec.load(files, candidates="bm25")
    with pytest.raises(ValueError, match="run_depth must be a positive integer"):
        trec.load(files, run_depth=0)
    with pytest.raises(ValueError, match="run_depth applies to candidates from a run"):
        trec.load(files, candidates="qrels", run_depth=5)
    with pytest.raises(ValueError, match="unknown file role 'corpus'"):
        trec.load({**files, "corpus": files["collection"]})
    no_run = {k: v for k, v in files.items() if k != "run"}
    with pytest.raises(ValueError, match="candidates='run' needs a run"):
        trec.load(no_run, candidates="run")
    with pytest.raises(ValueError, match=r"missing \['qrels'\]"):
        trec.load({k: v for k, v in no_run.items() if k != "qrels"})
    with pytest.raises(ValueError, match="files.queries: unknown file role 'validation'"):
        trec.load({**files, "queries": {"validation": files["queries"]["dev"]}})


# --- ir_datasets adapter: our mapping on duck-typed dataset objects (not ir_datasets itself) --------------------

Doc = namedtuple("Doc", "doc_id text")
Query = namedtuple("Query", "query_id text")
Qrel = namedtuple("Qrel", "query_id doc_id relevance iteration")
ScoredDoc = namedtuple("ScoredDoc", "query_id doc_id score")


class TitledDoc(namedtuple("TitledDoc", "doc_id title body")):
    def default_text(self) -> str:
        return f"{self.title}. {self.body}"


class FakeDataset:
    """Implements the iterators the adapter uses; ``scoreddocs=None`` means the dataset has none."""

    def __init__(self, docs=(), queries=(), qrels=(), scoreddocs=None):
        self.docs, self.queries, self.qrels, self.scored = list(docs), list(queries), list(qrels), scoreddocs

    def docs_iter(self):
        return iter(self.docs)

    def queries_iter(self):
        return iter(self.queries)

    def qrels_iter(self):
        return iter(self.qrels)

    def has_scoreddocs(self):
        return self.scored is not None

    def scoreddocs_iter(self):
        return iter(self.scored)


def fake_antique(with_run=True):
    corpus = FakeDataset(docs=[Doc(d, t) for d, t in DOCS])
    run = [ScoredDoc(q, d, s) for q, d, _, s in RUN]
    splits = {}
    for split in ("train", "dev", "test"):
        qids = {q for q, _ in QUERIES[split]}
        splits[split] = FakeDataset(
            queries=[Query(q, t) for q, t in QUERIES[split]],
            qrels=[Qrel(q, d, r, "U0") for q, d, r in QRELS[split]],
            scoreddocs=[r for r in run if r.query_id in qids] if with_run else None)
    return corpus, splits


@pytest.mark.parametrize("candidates, depth", [("auto", 2), ("run", None), ("qrels", None), ("none", None)])
def test_ir_datasets_mapping_matches_trec_files(files, candidates, depth):
    corpus, splits = fake_antique()
    got = irds_adapter.from_datasets(corpus, splits, candidates=candidates, run_depth=depth).validate("irds")
    want = trec.load(files, candidates=candidates, run_depth=depth)
    for name in ("queries", "docs", "qrels", "candidates"):
        assert getattr(got, name).equals(getattr(want, name)), name


def test_ir_datasets_ranks_scoreddocs_by_score_then_docid():
    corpus = FakeDataset(docs=[TitledDoc(f"d{i}", f"Title {i}", f"body {i}") for i in range(4)])
    ds = FakeDataset(queries=[Query("q1", " a query ")], qrels=[Qrel("q1", "d3", 1, "0")],
                     scoreddocs=[ScoredDoc("q1", "d0", 1.0), ScoredDoc("q1", "d3", 5.0),
                                 ScoredDoc("q1", "d2", 2.0), ScoredDoc("q1", "d1", 2.0)])
    data = irds_adapter.from_datasets(corpus, {"test": ds}, run_depth=2)
    assert data.candidates["docid"].to_list() == ["d1", "d3"]  # top 2 of d3 (5.0), d1 and d2 tied at 2.0 -> d1
    data3 = irds_adapter.from_datasets(corpus, {"test": ds}, run_depth=3)
    assert sorted(data3.candidates["docid"].to_list()) == ["d1", "d2", "d3"]
    assert dict(data.docs.iter_rows())["d2"] == "Title 2. body 2"  # default_text() over the fields
    assert data.queries.row(0) == ("q1", "test", "a query", ["a query"], None)


def test_ir_datasets_auto_without_scoreddocs_uses_qrels():
    corpus, splits = fake_antique(with_run=False)
    assert pairs(irds_adapter.from_datasets(corpus, splits).candidates) == FROM_QRELS
    with pytest.raises(ValueError, match="candidates='run' needs a run"):
        irds_adapter.from_datasets(corpus, splits, candidates="run")


def test_ir_datasets_errors_name_the_record():
    corpus, splits = fake_antique()
    splits["dev"].queries.append(Query("2020338", "Why did the U.S Invade Iraq ?"))
    with pytest.raises(InputFormatError, match=r"^ir_datasets antique/train/split200-valid queries record:2: qid "
                                               r"'2020338' is listed in the dev queries and already in the train"):
        irds_adapter.from_datasets(corpus, splits, names={"dev": "antique/train/split200-valid"})
    corpus, splits = fake_antique()
    splits["test"].qrels.append(Qrel("1964316", "nope", 1, "0"))
    with pytest.raises(InputFormatError, match=r"^ir_datasets test qrels record:3: unknown docid in qrels: 'nope'"):
        irds_adapter.from_datasets(corpus, splits)
    corpus.docs.append(Doc("empty", "  "))
    with pytest.raises(InputFormatError, match=r"^ir_datasets corpus docs record:9: empty text for doc 'empty'"):
        irds_adapter.from_datasets(corpus, splits)


def test_ir_datasets_load_opens_the_configured_ids(monkeypatch):
    corpus, splits = fake_antique()
    ids = {"antique": corpus, "antique/train/split200-train": splits["train"],
           "antique/train/split200-valid": splits["dev"], "antique/test": splits["test"]}
    opened = []
    fake = types.ModuleType("ir_datasets")
    fake.load = lambda i: opened.append(i) or ids[i]
    monkeypatch.setitem(sys.modules, "ir_datasets", fake)
    split_ids = {"train": "antique/train/split200-train", "dev": "antique/train/split200-valid",
                 "test": "antique/test"}
    data = irds_adapter.load({}, dataset_id="antique", splits=split_ids, candidates="qrels")
    assert opened == ["antique", *split_ids.values()]
    assert data.split_counts() == {"train": 2, "dev": 1, "test": 1}
    opened.clear()
    ids["antique"] = FakeDataset(docs=corpus.docs, queries=splits["train"].queries, qrels=splits["train"].qrels)
    default = irds_adapter.load({}, dataset_id="antique")
    assert opened == ["antique", "antique"] and default.split_counts() == {"train": 2, "dev": 0, "test": 0}
    with pytest.raises(ValueError, match="reads no files"):
        irds_adapter.load({"collection": "x"}, dataset_id="antique")


def test_ir_datasets_missing_package_is_a_clear_error(monkeypatch):
    # None in sys.modules makes `import ir_datasets` fail, whether or not the package is installed.
    monkeypatch.setitem(sys.modules, "ir_datasets", None)
    with pytest.raises(ModuleNotFoundError, match=r"pip install ir_datasets.*downloads the datasets from the "
                                                  r"internet"):
        irds_adapter.load({}, dataset_id="antique")
