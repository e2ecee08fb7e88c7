"""The teacher cross-encoder (Penha & Hauff's BERT_pred / BERT_loss) on a few real chitchat instances."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from curricula.data import chitchat
from curricula.data.ingest import INGEST_TABLES, candidate_pairs, ingest_paths, write_ingest
from curricula.models import teacher
from curricula.models.cross_encoder import collate, pair_lengths, pair_token_ids
from curricula.models.hf import load_tokenizer
from curricula.plumbing.contracts import TEACHER_SCORES, read_table
from curricula.stages.teacher import teacher_score_shard, teacher_train

CAPS = {"train": 40, "dev": 8, "test": 8}
CFG = dict(layers=1, max_length=32, steps=6, batch_size=8, lr=1e-4, device="cpu", precision="fp32",
           threads=2, score_batch_size=64)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("teacher")
    d = chitchat.load({}, max_instances=CAPS, seed=11, max_context_turns=3)
    paths = ingest_paths(root)
    write_ingest(d, paths)
    paths["root"] = root
    return paths


def frames(data):
    return [pl.read_parquet(data[n]) for n in ("queries", "docs", "qrels", "candidates")]


def test_candidate_pairs_label_and_split(data):
    pairs = candidate_pairs(dict(zip(INGEST_TABLES, frames(data))), splits=("train",))
    assert pairs.height == CAPS["train"] * 10 and set(pairs["split"]) == {"train"}
    assert pairs["rel"].sum() == CAPS["train"]
    both = candidate_pairs(dict(zip(INGEST_TABLES, frames(data))), splits=("train", "dev", "test"))
    assert both.height == sum(CAPS.values()) * 10


def test_relevant_min_binarises_graded_labels():
    q = pl.DataFrame({"qid": ["a"], "split": ["train"], "text": ["x"], "turns": [["x"]], "domain": [None]},
                     schema_overrides={"domain": pl.String})
    d = pl.DataFrame({"docid": ["g", "p", "b"], "text": ["good", "useful", "bad"]})
    qrels = pl.DataFrame({"qid": ["a"] * 3, "docid": ["g", "p", "b"], "rel": [2, 1, 0]})
    cands = qrels.select("qid", "docid")
    tables = {"queries": q, "docs": d, "qrels": qrels, "candidates": cands}
    assert candidate_pairs(tables)["rel"].to_list() == [0, 1, 1]  # b, g, p
    assert candidate_pairs(tables, relevant_min=2)["rel"].to_list() == [0, 1, 0]


def test_balanced_batches_have_half_positives():
    labels = np.array([1, 0, 0, 0, 0, 1, 0, 0])
    for idx in teacher.balanced_batches(labels, steps=5, batch_size=6, rng=np.random.default_rng(0)):
        assert labels[idx].sum() == 3 and len(idx) == 6


def test_pair_inputs_keep_the_latest_context_tokens():
    tok = load_tokenizer("minilm")
    ids = pair_token_ids(tok, ["first words " * 20 + "latest turn"], ["a reply"], max_length=16)[0]
    text = tok.decode(ids)
    assert len(ids) == 16 and "latest turn" in text and "a reply" in text
    batch = collate([ids, ids[:10] + [ids[-1]]], tok.pad_token_id)
    reply_ids = tok("a reply", add_special_tokens=False)["input_ids"]
    assert batch["token_type_ids"][0].tolist().count(1) == len(reply_ids) + 1



def test_pair_inputs_tokenise_each_distinct_text_once_with_the_same_ids():
    """A context comes with all its candidates: tokenised once, the ids are those of tokenising every pair."""
    tok = load_tokenizer("minilm")
    calls = []

    class Counting:  # the tokenizer, recording what it is asked to tokenise
        def __call__(self, texts, **kw):
            calls.append(list(texts))
            return tok(texts, **kw)

        def __getattr__(self, name):
            return getattr(tok, name)

    counting = Counting()
    contexts = ["how are you " * 5 + "today", "how are you " * 5 + "today", "where now", "how are you " * 5 + "today"]
    responses = ["fine", "not bad at all", "fine", "fine"]
    got = pair_token_ids(counting, contexts, responses, max_length=16)
    assert sorted(len(c) for c in calls) == [2, 2]  # two distinct contexts, two distinct responses
    tok.truncation_side = "left"
    assert got == tok(contexts, responses, truncation="longest_first", max_length=16)["input_ids"]
    batch = collate(got, tok.pad_token_id)
    for i, ids in enumerate(got):  # types: 0 through the first SEP, then 1; padding 0
        first = ids.index(tok.sep_token_id)
        assert batch["token_type_ids"][i].tolist() == [0] * (first + 1) + [1] * (len(ids) - first - 1) + \
            [0] * (batch["input_ids"].shape[1] - len(ids))
        assert batch["attention_mask"][i].sum().item() == len(ids)
    assert pair_token_ids(tok, [], [], max_length=16) == []


def test_a_cache_carries_each_texts_ids_across_calls():
    """With a cache, a text is tokenised the first time a call brings it and never again (contexts and responses
    share it), and the ids are those of tokenising every call anew."""
    tok = load_tokenizer("minilm")
    calls = []

    class Counting:
        def __call__(self, texts, **kw):
            calls.append(list(texts))
            return tok(texts, **kw)

        def __getattr__(self, name):
            return getattr(tok, name)

    counting, cache = Counting(), {}
    first = (["how are you " * 5 + "today", "where now"], ["fine", "where now"])
    second = (["where now", "a new context"], ["fine", "not bad"])
    assert pair_token_ids(counting, *first, max_length=16, cache=cache) == pair_token_ids(tok, *first, max_length=16)
    assert pair_token_ids(counting, *second, max_length=16, cache=cache) == pair_token_ids(tok, *second, 16)
    assert sorted(t for call in calls for t in call) == sorted(set(first[0] + first[1] + second[0] + second[1]))
    assert set(cache) == set(first[0] + first[1] + second[0] + second[1])


@pytest.mark.slow
def test_training_tokenises_each_drawn_text_once_and_trains_as_tokenising_every_batch(data, monkeypatch):
    """The teacher's job-long token cache: the same losses and weights, bit for bit, as tokenising every batch."""
    import torch

    from curricula.models import cross_encoder
    from curricula.models.runtime import start_job

    pairs = candidate_pairs(dict(zip(INGEST_TABLES, frames(data))), splits=("train",))
    cfg = teacher.teacher_config(CFG, seed=3)
    runtime = start_job(cfg.runtime, True, "test")
    cache: dict[str, list[int]] = {}
    cached, cached_losses = teacher.train_cross_encoder(*teacher.training_texts(pairs), cfg, runtime, False, cache)
    drawn = np.concatenate(list(teacher.balanced_batches(teacher.training_texts(pairs)[2], cfg.steps,
                                                         cfg.batch_size, np.random.default_rng(cfg.seed))))
    assert set(cache) == set(pairs["context"].gather(drawn)) | set(pairs["response"].gather(drawn))
    plain_ids = cross_encoder.pair_token_ids
    monkeypatch.setattr(cross_encoder, "pair_token_ids", lambda tok, c, r, n, cache=None: plain_ids(tok, c, r, n))
    plain, plain_losses = teacher.train_cross_encoder(*teacher.training_texts(pairs), cfg, runtime, False)
    assert cached_losses == plain_losses
    want = plain.module.state_dict()
    assert all(torch.equal(value, want[key]) for key, value in cached.module.state_dict().items())


@pytest.mark.slow
@pytest.mark.parametrize("max_length", [8, 9, 16, 33, 64])
def test_pair_inputs_are_hugging_faces_left_longest_first_cut_of_real_pairs(max_length):
    """On real chitchat pairs (contexts of up to ten turns, every case: no cut, the context cut, both sides cut),
    the ids are what a Hugging Face tokenizer gives with ``truncation_side="left"`` and ``longest_first``, so a
    saved folder's tokenizer reproduces them (tests/test_interop.py scores such pairs elsewhere)."""
    d = chitchat.load({}, max_instances={"train": 20, "dev": 0, "test": 0}, seed=3, max_context_turns=10)
    frame = candidate_pairs({n: getattr(d, n) for n in INGEST_TABLES}, splits=("train",))
    contexts, responses = frame["context"].to_list(), frame["response"].to_list()
    tok = load_tokenizer("minilm")
    tok.truncation_side = "left"
    assert pair_token_ids(tok, contexts, responses, max_length) == \
        tok(contexts, responses, truncation="longest_first", max_length=max_length)["input_ids"]


@pytest.mark.parametrize("n_context,n_response,budget,kept", [
    (3, 4, 10, (3, 4)),      # fits: nothing cut
    (30, 4, 10, (6, 4)),     # the short response fits in half: the context gets the rest
    (4, 30, 10, (4, 6)),     # and the other way round
    (30, 30, 10, (5, 5)),    # both longer than half: half each
    (30, 20, 11, (6, 5)),    # an odd budget: the longer side gets the odd piece
    (20, 20, 11, (5, 6)),    # a tie: the second sequence counts as the longer one
])
def test_pair_lengths_follow_longest_first(n_context, n_response, budget, kept):
    assert pair_lengths(n_context, n_response, budget) == kept


def train_into(data, model: str, section: dict) -> dict:
    """Rule teacher_train with the teacher section ``section`` (seed 1) into ``<root>/<model>``."""
    return teacher_train(data, {"model": data["root"] / model}, teacher=section, seed=1, threads=section["threads"])


def score_into(data, model: str, out: str, section: dict) -> pl.DataFrame:
    """Rule teacher_score_shard, unsharded, of the teacher in ``<root>/<model>`` into ``<root>/<out>``."""
    return teacher_score_shard({**data, "model": data["root"] / model}, {"scores": data["root"] / out},
                               teacher=section, seed=1, threads=section["threads"])


@pytest.mark.slow
def test_train_then_score_every_candidate(data):
    stats = train_into(data, "model", CFG)
    assert stats["steps"] == 6 and stats["pairs"] == CAPS["train"] * 10
    scores = score_into(data, "model", "scores.parquet", CFG)
    back = read_table(data["root"] / "scores.parquet", TEACHER_SCORES)
    assert back.equals(scores) and back.height == sum(CAPS.values()) * 10
    assert (back["loss"] >= 0).all() and back["score"].std() > 0
    again = score_into(data, "model", "again.parquet", CFG)
    assert again.equals(scores)  # eval mode: deterministic


@pytest.mark.slow
def test_crossfit_scores_train_pairs_with_other_folds(data):
    folds = {**CFG, "folds": 2, "steps": 2}
    train_into(data, "model2", folds)
    scores = score_into(data, "model2", "cf.parquet", folds)
    plain = score_into(data, "model2", "plain.parquet", {**CFG, "steps": 2})
    train = pl.read_parquet(data["queries"]).filter(pl.col("split") == "train")["qid"].implode()
    cf_train = scores.filter(pl.col("qid").is_in(train))
    pl_train = plain.filter(pl.col("qid").is_in(train))
    assert not np.allclose(cf_train["score"].to_numpy(), pl_train["score"].to_numpy())  # other models
    # dev/test are scored by the saved model in both cases
    other = scores.filter(~pl.col("qid").is_in(train))
    assert np.allclose(other["score"].to_numpy(), plain.filter(~pl.col("qid").is_in(train))["score"].to_numpy(),
                       atol=1e-5)
