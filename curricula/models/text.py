"""Shared parts of the fast (non-transformer) rankers: two-sided token ids, word embeddings, save/load.

The fast rankers read the context and the response separately (ConvKNRM matches their n-grams; the CNN/LSTM
answer-selection models encode each side). Both sides are cut to word pieces of the training model's tokenizer
(the packaged MiniLM's by default), without special tokens: the context keeps its *last* ``query_length``
pieces (the latest turns decide what a good reply is) and the response its first ``doc_length``.

Word embeddings start from a matrix of the same vocabulary: the model's own word-piece input embeddings
(``embeddings: model``), or a word-vector text file in fastText ``.vec`` format (``embeddings: /path/x.vec``),
looked up per word piece (``##`` stripped, lower-cased when the exact form is missing; pieces absent from the
file get small seeded random vectors).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import transformers
from safetensors.torch import load_file, save_file


from curricula.models.base import RANKER_FILE, Ranker
from curricula.models.hf import input_embeddings, load_tokenizer, quiet_transformers, resolve_model_dir
from curricula.plumbing.atomic import write_dir_atomically
from curricula.training.spec import RankerSpec

TOKENIZER_DIR = "tokenizer"
WEIGHTS_FILE = "model.safetensors"


def two_sided_ids(tokenizer, contexts: Sequence[str], responses: Sequence[str], query_length: int,
                  doc_length: int, cache: dict[tuple[str, str], list[int]] | None = None
                  ) -> list[tuple[list[int], list[int]]]:
    """(context ids, response ids) per pair: the context's last ``query_length`` pieces, the response's first
    ``doc_length``. An empty side becomes one ``[UNK]`` so every row has a position to match.

    Each distinct text is tokenised once per call; with ``cache`` (a dict the caller keeps, keyed by side and text)
    once per cache, so the training loop does not re-tokenise the contexts and responses it draws again and again.
    The cached id lists are shared between the pairs (and calls) that use them: read them, never modify them.
    """
    unk = tokenizer.unk_token_id if tokenizer.unk_token_id is not None else 0
    cache = {} if cache is None else cache
    for side, texts in (("q", contexts), ("d", responses)):
        missing = [t for t in dict.fromkeys(texts) if (side, t) not in cache]
        if not missing:
            continue
        ids = tokenizer(missing, add_special_tokens=False, truncation=False, verbose=False)["input_ids"]
        for text, x in zip(missing, ids):
            cache[(side, text)] = (x[-query_length:] if side == "q" else x[:doc_length]) or [unk]
    return [(cache[("q", c)], cache[("d", r)]) for c, r in zip(contexts, responses)]


def pad_side(seqs: Sequence[Sequence[int]], min_width: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ids (0) and a float mask (1 = token) of width max(len, ``min_width``)."""
    lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    width = max(min_width, int(lengths.max()))
    ids = np.zeros((len(seqs), width), dtype=np.int64)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = s
    mask = (np.arange(width)[None, :] < lengths[:, None]).astype(np.float32)
    return torch.from_numpy(ids), torch.from_numpy(mask)


def distinct_rows(ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The distinct rows of a padded side (ids and mask together) and, per row, the index of its distinct row:
    ``ids_u[index] == ids``. A training batch pairs each context with its 1 + m responses, so its query side
    is mostly repeats."""
    both = torch.cat([ids.double(), mask.double()], dim=1)  # exact for word-piece ids and float masks
    uniq, index = torch.unique(both, dim=0, return_inverse=True)
    width = ids.shape[1]
    return uniq[:, :width].to(ids.dtype), uniq[:, width:].to(mask.dtype), index


def distinct_ids(items: Sequence[tuple[Sequence[int], Sequence[int]]]) -> torch.Tensor:
    """The sorted distinct token ids of both sides of every (context ids, response ids) item."""
    sides = [np.asarray(side, dtype=np.int64) for item in items for side in item]
    return torch.from_numpy(np.unique(np.concatenate(sides)))


def dropout_active(dropout: torch.nn.Module) -> bool:
    """Whether a dropout layer draws random masks now (training or MC-dropout mode, rate > 0)."""
    return dropout.training and dropout.p > 0


def read_vec(path: str | Path, vocab: Mapping[str, int], dim_hint: int | None = None,
             seed: int = 0) -> torch.Tensor:
    """An embedding matrix (len(vocab), dim) from a fastText/word2vec ``.vec`` text file.

    Each vocabulary piece takes the vector of its surface form (``##`` stripped), else of its lower-cased form;
    pieces not in the file keep N(0, 0.1^2) seeded vectors. Raises ValueError naming the file and line of a
    malformed row.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"embeddings file {path} does not exist")
    wanted: dict[str, list[int]] = {}
    for piece, idx in vocab.items():
        wanted.setdefault(piece[2:] if piece.startswith("##") else piece, []).append(idx)
    found: dict[int, np.ndarray] = {}
    found_lower: dict[int, np.ndarray] = {}
    dim = None
    with path.open(encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, start=1):
            parts = line.rstrip("\n").rstrip(" ").split(" ")
            if lineno == 1 and len(parts) == 2 and all(p.isdigit() for p in parts):
                dim = int(parts[1])  # the "<count> <dim>" header
                continue
            if len(parts) < 2:
                raise ValueError(f"{path}, line {lineno}: expected a word and its vector, got {line[:60]!r}")
            word, values = parts[0], parts[1:]
            if dim is None:
                dim = len(values)
            if len(values) != dim:
                raise ValueError(f"{path}, line {lineno}: vector of {len(values)} values, expected {dim}")
            for target, form in ((found, word), (found_lower, word.lower())):
                for idx in wanted.get(form, ()):
                    if idx not in target:
                        try:
                            target[idx] = np.asarray(values, dtype=np.float32)
                        except ValueError:
                            raise ValueError(f"{path}, line {lineno}: non-numeric vector value") from None
    if dim is None:
        raise ValueError(f"{path}: no vectors")
    gen = torch.Generator().manual_seed(seed)
    matrix = torch.randn((len(vocab), dim), generator=gen) * 0.1
    for idx, vec in {**found_lower, **found}.items():
        matrix[idx] = torch.from_numpy(vec)
    return matrix


def embedding_matrix(source: str, model_dir: Path, tokenizer, seed: int = 0) -> torch.Tensor:
    """The initial word embeddings: ``"model"`` = the model's own input embeddings, else a ``.vec`` path."""
    if source == "model":
        return input_embeddings(model_dir)
    return read_vec(source, tokenizer.get_vocab(), seed=seed)


class TwoSidedRanker(Ranker):
    """Base of the fast rankers: two-sided featurisation, safetensors + tokenizer save/load.

    Subclasses set ``name`` (its knobs and defaults are ``curricula.models.ARCHITECTURES[name]``) and
    ``make_module(arch, embeddings)``.
    """

    #: distinct (side, text) token-id lists kept by :meth:`encode` (the default chitchat run has ~40,000, ~35 MB);
    #: past this many the cache starts afresh
    CACHE_LIMIT = 200_000

    def __init__(self, module: torch.nn.Module, tokenizer, arch: Mapping[str, Any]):
        super().__init__(module)
        self.tokenizer = tokenizer
        self.arch = dict(arch)
        self._ids: dict[tuple[str, str], list[int]] = {}

    # -- construction
    @classmethod
    def make_module(cls, arch: Mapping[str, Any], embeddings: torch.Tensor) -> torch.nn.Module:
        raise NotImplementedError

    @classmethod
    def build(cls, spec: RankerSpec, seed: int) -> TwoSidedRanker:
        """A new ranker from a ranker spec: its resolved ``architecture`` over the word-piece embeddings of
        ``model``; every random initialisation seeded with ``seed``."""
        arch = spec.arch()
        model_dir = resolve_model_dir(spec.model)
        tokenizer = load_tokenizer(model_dir)
        emb = embedding_matrix(arch["embeddings"], model_dir, tokenizer, seed)
        torch.manual_seed(seed)
        module = cls.make_module(arch, emb)
        return cls(module, tokenizer, arch)

    @classmethod
    def load(cls, folder: Path, config: Mapping[str, Any]) -> TwoSidedRanker:
        arch = dict(config["architecture"])
        shape = tuple(config["embedding_shape"])
        module = cls.make_module(arch, torch.zeros(shape))
        module.load_state_dict(load_file(str(folder / WEIGHTS_FILE)))
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder / TOKENIZER_DIR, local_files_only=True)
        return cls(module, tokenizer, arch)

    # -- Ranker interface
    def encode(self, contexts, responses):
        # the training loop draws the same contexts and responses again and again: tokenise each text once
        if len(self._ids) > self.CACHE_LIMIT:
            self._ids.clear()
        return two_sided_ids(self.tokenizer, contexts, responses, self.arch["query_length"],
                             self.arch["doc_length"], cache=self._ids)

    #: the response lengths a batching key leaves room for beneath (any side is far shorter)
    _SIDE = 1 << 20

    def length(self, item) -> int:
        """Response length first, then context length: a scoring batch's padded response width decides most of
        a two-sided ranker's work (ConvKNRM matches every context position with every response position, while
        contexts are mostly cut at the same length), so batches group responses of about the same length.
        Measured on the default run's dev evaluation (5,000 pairs, 1 thread): 2.34 s -> 1.9 s against batching
        by the sum of the two lengths, which mixed long and short responses (most batches 64 wide)."""
        return len(item[1]) * self._SIDE + len(item[0])

    def min_width(self) -> int:
        return 1

    def collate(self, items):
        q, qm = pad_side([x[0] for x in items], self.min_width())
        d, dm = pad_side([x[1] for x in items], self.min_width())
        return {"q": q, "q_mask": qm, "d": d, "d_mask": dm}

    def forward(self, batch):
        return self.module(batch["q"], batch["q_mask"], batch["d"], batch["d_mask"])

    def scoring_cache(self, items=()):
        """Modules with a ``context_cache`` (ConvKNRM) compute each distinct context's side once per scoring pass
        instead of once per batch it appears in (length-sorted batches scatter a context's candidates), and, with a
        ``prepare_scoring``, the per-token work of every token id of ``items`` up front."""
        if not hasattr(self.module, "context_cache"):
            return contextlib.nullcontext()
        return self._context_cache(items)

    @contextlib.contextmanager
    def _context_cache(self, items):
        self.module.context_cache = {}
        if hasattr(self.module, "token_cache"):
            self.module.token_cache = {}
        if items and hasattr(self.module, "prepare_scoring"):
            self.module.prepare_scoring(distinct_ids(items))
        try:
            yield
        finally:
            self.module.context_cache = None
            if hasattr(self.module, "token_cache"):
                self.module.token_cache = None

    def config(self):
        emb = self.module.embedding.weight
        return {"architecture": self.arch, "embedding_shape": list(emb.shape)}

    def save(self, out_dir):
        def fill(tmp: Path) -> None:
            state = {k: v.detach().to("cpu").contiguous() for k, v in self.module.state_dict().items()}
            save_file(state, str(tmp / WEIGHTS_FILE))
            with quiet_transformers():
                self.tokenizer.save_pretrained(tmp / TOKENIZER_DIR)
            (tmp / RANKER_FILE).write_text(self._ranker_json())

        return write_dir_atomically(out_dir, fill)


def read_ranker_json(folder: Path) -> dict[str, Any] | None:
    path = folder / RANKER_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}, line {err.lineno}: not valid JSON ({err.msg})") from None


def masked_max(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Max over positions (dim 1) of x (B, L, C) where mask (B, L) is 1; rows need one valid position."""
    return x.masked_fill(mask[..., None] <= 0, torch.finfo(x.dtype).min).max(dim=1).values
