"""Does a saved cross-encoder folder score long pairs elsewhere as this project does? And how good is the run's
teacher on dev and test?

Takes a finished run's teacher folder (or ``--folder``), the test split's candidate pairs that the pair rule
(:func:`curricula.models.cross_encoder.pair_token_ids`) has to cut, a seeded sample of ``--pairs`` of them, and
scores them three ways in fp32: this project's evaluation (``load_ranker`` + ``score_pairs``),
``sentence_transformers.CrossEncoder(folder)`` and ``transformers.AutoModelForSequenceClassification`` with the
folder's own ``AutoTokenizer`` (``truncation=True``; [CLS] folders only). Prints max |diff| and the Spearman
correlation of each peer against the project. A folder from before the truncation rule travelled with the model
has no ``truncation_side`` in its ``tokenizer_config.json``: the peers then get ``max_length`` from its
``ranker.json``, as a user would pass it. Then the teacher's AP and P@1 on dev and test from the run's
``teacher/scores.parquet``.

    .venv/bin/python analyses/interop_cross_encoder.py --root <run dir> [--config config.yaml] [--pairs 1000]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from scipy.stats import spearmanr  # noqa: E402

from curricula.data.ingest import INGEST_TABLES, candidate_pairs, read_ingest  # noqa: E402
from curricula.evaluation.metrics import split_metrics  # noqa: E402
from curricula.models import load_ranker, score_pairs  # noqa: E402
from curricula.models.cross_encoder import distinct_token_ids  # noqa: E402
from curricula.plumbing.config import load_config  # noqa: E402
from curricula.plumbing.contracts import TEACHER_SCORES, read_table  # noqa: E402
from curricula.plumbing.layout import Layout  # noqa: E402


def peer_scores(folder: Path, contexts: list[str], responses: list[str], max_length: int | None,
                pooling: str) -> dict[str, np.ndarray]:
    """sentence-transformers' and (for [CLS]) transformers' fp32 scores of the pairs from the folder alone
    (``max_length`` None), or with ``max_length`` passed as a user of an older folder would."""
    import sentence_transformers
    import transformers

    kw = {} if max_length is None else {"max_length": max_length}
    st = sentence_transformers.CrossEncoder(str(folder), device="cpu", local_files_only=True,
                                            activation_fn=torch.nn.Identity(), **kw)
    out = {"sentence-transformers": np.asarray(st.predict(list(zip(contexts, responses)), batch_size=64,
                                                          show_progress_bar=False))}
    if pooling == "cls":
        model = transformers.AutoModelForSequenceClassification.from_pretrained(folder, local_files_only=True).eval()
        tok = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
        logits = []
        with torch.inference_mode():
            for i in range(0, len(contexts), 64):
                batch = tok(contexts[i:i + 64], responses[i:i + 64], padding=True, truncation=True,
                            return_tensors="pt", **kw)
                logits.append(model(**batch).logits.view(-1).numpy())
        out["transformers"] = np.concatenate(logits)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True, help="the run's working directory (holds results/)")
    ap.add_argument("--config", default=str(REPO / "config.yaml"))
    ap.add_argument("--folder", help="a cross-encoder folder (default: the run's teacher/model)")
    ap.add_argument("--pairs", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(2)
    config = load_config(args.config)
    layout = Layout.of(config)
    folder = Path(args.folder) if args.folder else Path(args.root, layout.teacher()["model"])
    data = read_ingest({n: Path(args.root, layout.data(n)) for n in INGEST_TABLES})
    rmin = config["dataset"]["relevant_min"]

    ranker = load_ranker(folder, device="cpu")
    test = candidate_pairs(data, splits=("test",), relevant_min=rmin)
    contexts, responses = test["context"].to_list(), test["response"].to_list()
    n_ctx = np.array([len(x) for x in distinct_token_ids(ranker.tokenizer, contexts)])
    n_rsp = np.array([len(x) for x in distinct_token_ids(ranker.tokenizer, responses)])
    cut = np.flatnonzero(n_ctx + n_rsp + 3 > ranker.max_length)
    pick = np.sort(np.random.default_rng(args.seed).choice(cut, size=min(args.pairs, cut.size), replace=False))
    contexts, responses = [contexts[i] for i in pick], [responses[i] for i in pick]
    print(f"{folder}: {ranker.pooling} pooling, max_length {ranker.max_length}; {cut.size:,} of {len(n_ctx):,} test "
          f"pairs are cut (both sides longer than half the budget: "
          f"{int(((n_ctx > ranker.max_length // 2) & (n_rsp > ranker.max_length // 2)).sum()):,}); "
          f"{len(pick):,} sampled (seed {args.seed})")

    ours = score_pairs(ranker, contexts, responses, batch_size=64, device=torch.device("cpu"), precision="fp32",
                       progress=False)
    tok_cfg = json.loads((folder / "tokenizer_config.json").read_text())
    carried = tok_cfg.get("truncation_side") == "left" and tok_cfg.get("model_max_length") == ranker.max_length
    print("  the folder carries the truncation rule" if carried else
          f"  the folder does not carry the truncation rule: the peers get max_length={ranker.max_length}")
    for name, theirs in peer_scores(folder, contexts, responses, None if carried else ranker.max_length,
                                    ranker.pooling).items():
        diff = np.abs(theirs - ours)
        print(f"  {name:>21}: max |diff| {diff.max():.3g}, median {np.median(diff):.3g}, "
              f"Spearman {spearmanr(theirs, ours).statistic:.4f}")

    scores = read_table(Path(args.root, layout.teacher()["scores"]), TEACHER_SCORES).select("qid", "docid", "score")
    for split in ("dev", "test"):
        m = split_metrics(scores, data["queries"], data["qrels"], split, ["AP", "P@1"], rmin)
        print(f"  the run's teacher on {split}: " + ", ".join(f"{k} {v:.4f}" for k, v in m.items()))


if __name__ == "__main__":
    main()
