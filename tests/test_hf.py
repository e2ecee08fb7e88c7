"""Model loading helpers: packaged model, offline loading, layer truncation, devices and precision."""

from __future__ import annotations

import os

import pytest
import torch

from curricula.models import heads, hf
from curricula.models.device import select_device
from curricula.models.heads import load_cross_encoder
from curricula.models.hf import (
    autocast,
    autocast_dtype,
    cpu_has_native_bf16,
    load_encoder,
    load_tokenizer,
    resolve_model_dir,
    save_model,
    write_dir_atomically,
)
from curricula.models.runtime import set_threads


def test_packaged_minilm_resolves_offline():
    path = resolve_model_dir("minilm")
    assert path.is_dir() and (path / "config.json").is_file() and (path / "tokenizer.json").is_file()
    assert resolve_model_dir("sentence-transformers/all-MiniLM-L6-v2") == path
    assert resolve_model_dir(str(path)) == path
    assert os.environ["HF_HUB_OFFLINE"] == "1" and os.environ["TRANSFORMERS_OFFLINE"] == "1"


def test_unknown_model_is_a_clear_error_not_a_download(tmp_path):
    with pytest.raises(FileNotFoundError, match="never downloaded"):
        resolve_model_dir("bert-base-uncased")
    with pytest.raises(FileNotFoundError, match="no config.json"):
        resolve_model_dir(tmp_path)


def test_select_device():
    assert select_device("cpu") == torch.device("cpu")
    assert select_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="device 'cuda' asked for, but torch"):  # a DeviceError
            select_device("cuda")
    with pytest.raises(ValueError, match="expected 'auto'"):
        select_device("tpu")


def test_autocast_rules(monkeypatch):
    cpu = torch.device("cpu")
    assert autocast_dtype(cpu, "auto") is None and autocast_dtype(cpu, "fp32") is None
    assert autocast_dtype(cpu, "bf16") == torch.bfloat16
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))  # an A100
    assert autocast_dtype(torch.device("cuda"), "auto", transformer=True) == torch.bfloat16  # GPU transformers: bf16
    assert autocast_dtype(torch.device("cuda"), "auto") is None  # the fast rankers: fp32 (tests/test_precision.py)
    assert autocast_dtype(torch.device("cuda"), "fp32") is None
    with pytest.raises(ValueError, match="precision"):
        autocast_dtype(cpu, "fp16")
    a = torch.ones(4, 4)
    with autocast(cpu):
        assert (a @ a).dtype == torch.float32
    with autocast("cpu", "bf16"):
        assert (a @ a).dtype == torch.bfloat16
    with autocast(cpu, "fp32"):
        assert (a @ a).dtype == torch.float32


def test_auto_precision_is_bf16_on_cpu_only_for_transformers_on_a_cpu_with_bf16_instructions(monkeypatch):
    cpu = torch.device("cpu")
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    monkeypatch.delenv("DNNL_MAX_CPU_ISA", raising=False)
    for native in (True, False):
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda n=native: n)
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
        assert cpu_has_native_bf16() is native
        assert autocast_dtype(cpu, "auto", transformer=True) == (torch.bfloat16 if native else None)
        assert autocast_dtype(cpu, "auto", transformer=False) is None  # ConvKNRM & co. stay fp32
        assert autocast_dtype(cpu, "fp32", transformer=True) is None
        assert autocast_dtype(cpu, "bf16", transformer=False) == torch.bfloat16
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True)
    assert cpu_has_native_bf16()
    a = torch.ones(4, 4)
    with autocast(cpu, "auto", transformer=True):
        assert (a @ a).dtype == torch.bfloat16
    with autocast(cpu, "auto"):
        assert (a @ a).dtype == torch.float32


def test_a_onednn_isa_cap_below_bf16_counts_as_a_cpu_without_bf16(monkeypatch):
    """ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 imitates the AVX2 machine class: there "auto" runs fp32,
    as it does on such a CPU, instead of emulated bf16."""
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: True)
    monkeypatch.delenv("DNNL_MAX_CPU_ISA", raising=False)
    for cap, native in (("AVX2", False), ("avx512_core", False), ("AVX512_CORE_VNNI", False), ("AVX2_VNNI_2", False),
                        ("AVX512_CORE_BF16", True), ("AVX512_CORE_AMX", True), ("ALL", True), ("", True)):
        monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", cap)
        assert cpu_has_native_bf16() is native, cap
        assert autocast_dtype(torch.device("cpu"), "auto", transformer=True) == (torch.bfloat16 if native else None)
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA")
    monkeypatch.setenv("DNNL_MAX_CPU_ISA", "AVX2")
    assert not cpu_has_native_bf16()


def test_only_transformer_rankers_opt_into_cpu_bf16():
    from curricula.models import RANKERS, ranker_class

    assert {name for name in RANKERS if ranker_class(name).transformer} == {"cross_encoder"}


def test_set_threads():
    before = torch.get_num_threads()
    try:
        assert set_threads(1) == 1 == torch.get_num_threads()
        assert set_threads(None) == 1
    finally:
        set_threads(before)


def _forward(model, tok, texts):
    batch = tok(texts, padding=True, return_tensors="pt")
    with torch.inference_mode():
        return model(**batch)[0]


def test_encoder_truncation_keeps_first_layers_and_reloads(tmp_path):
    tok = load_tokenizer("minilm")
    full = load_encoder("minilm")
    two = load_encoder("minilm", layers=2)
    assert len(full.encoder.layer) == full.config.num_hidden_layers == 6
    assert len(two.encoder.layer) == two.config.num_hidden_layers == 2
    assert not two.training
    # the kept layers are the checkpoint's first two, unchanged
    sd_full, sd_two = full.state_dict(), two.state_dict()
    assert all(torch.equal(sd_two[k], sd_full[k]) for k in sd_two)
    assert save_model(two, tok, tmp_path / "m") == tmp_path / "m"
    assert [p.name for p in tmp_path.iterdir()] == ["m"]
    again = load_encoder(tmp_path / "m")
    assert len(again.encoder.layer) == 2
    texts = ["how are glacier caves formed?", "a glacier cave is a cave formed within the ice of a glacier"]
    assert torch.allclose(_forward(two, tok, texts), _forward(again, tok, texts), atol=1e-6)
    assert load_encoder("minilm", layers=6).config.num_hidden_layers == 6


@pytest.mark.parametrize("layers", [0, 7, -1, 2.0, True])
def test_encoder_layers_out_of_range(layers):
    with pytest.raises(ValueError, match="expected an integer from 1 to 6"):
        load_encoder("minilm", layers=layers)


def test_cross_encoder_head_is_seeded_and_reloads(tmp_path):
    a = load_cross_encoder("minilm", layers=1, seed=3)
    b = load_cross_encoder("minilm", layers=1, seed=3)
    c = load_cross_encoder("minilm", layers=1, seed=4)
    assert a.config.num_labels == 1 and len(a.bert.encoder.layer) == 1
    assert torch.equal(a.classifier.weight, b.classifier.weight)
    assert not torch.equal(a.classifier.weight, c.classifier.weight)
    tok = load_tokenizer("minilm")
    batch = tok(["what is a glacier cave?"], ["a cave in a glacier"], return_tensors="pt")
    with torch.inference_mode():
        logits = a(**batch).logits
    assert logits.shape == (1, 1)
    a.save_pretrained(tmp_path / "ce")
    tok.save_pretrained(tmp_path / "ce")
    again = load_cross_encoder(tmp_path / "ce", seed=99)  # the trained head is loaded, the seed is moot
    assert torch.equal(again.classifier.weight, a.classifier.weight)
    with torch.inference_mode():
        assert torch.allclose(again(**batch).logits, logits, atol=1e-6)


def test_input_embeddings_are_read_from_the_checkpoint_equal_to_the_loaded_models(tmp_path):
    """The word embeddings read straight from model.safetensors equal the loaded encoder's ``get_input_embeddings``
    bit for bit: the packaged MiniLM (keys ``embeddings...``) and a checkpoint with a head (``bert.embeddings...``);
    a folder whose weights are not one safetensors file falls back to loading the encoder."""
    minilm = hf.resolve_model_dir("minilm")
    loaded = load_encoder(minilm).get_input_embeddings().weight.detach().float()
    read = hf.input_embeddings("minilm")
    assert read.dtype == torch.float32 and torch.equal(read, loaded)
    head = load_cross_encoder("minilm", layers=1, seed=3)
    head.save_pretrained(tmp_path / "ce")
    load_tokenizer("minilm").save_pretrained(tmp_path / "ce")
    assert hf.stored_word_embeddings(tmp_path / "ce") is not None
    assert torch.equal(hf.input_embeddings(tmp_path / "ce"), head.get_input_embeddings().weight.detach().float())
    assert hf.stored_word_embeddings(tmp_path) is None  # no model.safetensors here


def test_loading_checks_flag_foreign_checkpoints(tmp_path):
    info = {"missing_keys": ["encoder.layer.0.attention.self.query.weight"], "unexpected_keys": []}
    with pytest.raises(RuntimeError, match="lacks weights"):
        hf.check_loading_info(tmp_path, info, None, allow_missing=())
    ok = {"missing_keys": ["classifier.weight"], "unexpected_keys": ["encoder.layer.3.output.dense.bias"]}
    hf.check_loading_info(tmp_path, ok, 2, allow_missing=("classifier.",))


def test_write_dir_atomically_replaces_only_when_complete(tmp_path):
    out = tmp_path / "model"
    write_dir_atomically(out, lambda d: (d / "a.txt").write_text("one"))
    assert (out / "a.txt").read_text() == "one"

    def broken(d):
        (d / "a.txt").write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_dir_atomically(out, broken)
    assert (out / "a.txt").read_text() == "one"
    write_dir_atomically(out, lambda d: (d / "b.txt").write_text("two"))
    assert sorted(p.name for p in out.iterdir()) == ["b.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["model"]


def test_mean_pooled_cross_encoder_is_seeded_reads_every_token_and_reloads(tmp_path):
    a = load_cross_encoder("minilm", layers=1, seed=3, pooling="mean")
    b = load_cross_encoder("minilm", layers=1, seed=3, pooling="mean")
    c = load_cross_encoder("minilm", layers=1, seed=4, pooling="mean")
    assert isinstance(a, heads.MeanPooledCrossEncoder) and a.config.num_hidden_layers == 1
    assert torch.equal(a.head.weight, b.head.weight) and not torch.equal(a.head.weight, c.head.weight)
    assert heads.checkpoint_pooling("minilm") is None  # a sentence encoder: no trained scoring head
    tok = load_tokenizer("minilm")
    pairs = (["what is a glacier cave?", "what is a glacier cave?"], ["a cave in a glacier", "a cave in a hill"])
    batch = tok(*pairs, return_tensors="pt", padding=True)
    with torch.inference_mode():
        logits = a(**batch).logits.view(-1)
        hidden = a.encoder(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    expected = a.head((hidden * mask).sum(1) / mask.sum(1)).view(-1)
    assert torch.allclose(logits, expected, atol=1e-6)
    assert not torch.isclose(logits[0], logits[1])  # the last word of the response changes the score
    heads.save_cross_encoder(a, tok, tmp_path / "ce")
    assert heads.checkpoint_pooling(tmp_path / "ce") == "mean"
    again = load_cross_encoder(tmp_path / "ce", seed=99)  # the trained head, not a new one
    with torch.inference_mode():
        assert torch.allclose(again(**batch).logits.view(-1), logits, atol=1e-6)
    with pytest.raises(ValueError, match="pooling='cls'"):
        load_cross_encoder(tmp_path / "ce", pooling="cls")
    with pytest.raises(ValueError, match="expected one of"):
        load_cross_encoder("minilm", layers=1, pooling="max")
