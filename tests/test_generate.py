"""UniLM-style generation: the seq2seq mask, the MLM each checkpoint gives, training, greedy and beam
search, the metrics, the task builders and the command line. Tiny models: the file runs in seconds."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
import torch
from eval_helpers import one_thread, tiny_checkpoint, tiny_config, write_vocab  # noqa: F401

from encoderlab.cli import main
from encoderlab.config import ConfigError
from encoderlab.data.tokenizer import load_tokenizer
from encoderlab.eval.tasks import TaskDataError
from encoderlab.generate import metrics as M
from encoderlab.generate.config import GenerationConfig
from encoderlab.generate.decode import Hypothesis, ModelStep, beam_search, greedy
from encoderlab.generate.model import (
    IGNORE,
    SOURCE,
    TARGET,
    GenerationSetupError,
    hidden_states,
    next_token_batch,
    position_ids_of,
    seq2seq_mask,
    seq2seq_start,
    training_batch,
)
from encoderlab.generate.tasks import GenerationTask, Pair, load_task, split_of, wiki_title_task
from encoderlab.generate.train import lengths_for, load_generator, run_generation
from encoderlab.models.build import build_model
from encoderlab.models.networks import MaskedLM

S, G, P = SOURCE, TARGET, -1  # -1: padding, in the layouts below


def _layout(rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    kinds = torch.tensor(rows)
    return kinds.clamp(min=0), (kinds >= 0).long()  # segment_ids, attention_mask


# ---- the mask ------------------------------------------------------------------------------------
def test_mask_visibility_pattern_exactly():
    # Training layout (padding at the end) and decoding layout (padding between source and target).
    segments, real = _layout([[S, S, S, G, G, P], [S, S, P, G, G, G]])
    got = seq2seq_mask(segments, real)
    assert got.shape == (2, 1, 6, 6) and got.dtype == torch.bool
    expected_0 = [  # query rows, key columns: source bidirectional, target causal, padding never seen
        [1, 1, 1, 0, 0, 0],
        [1, 1, 1, 0, 0, 0],
        [1, 1, 1, 0, 0, 0],
        [1, 1, 1, 1, 0, 0],
        [1, 1, 1, 1, 1, 0],
        [1, 1, 1, 0, 0, 0],  # a padded query sees the source only: never an all-False row (NaN)
    ]
    expected_1 = [
        [1, 1, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0],
        [1, 1, 0, 1, 0, 0],
        [1, 1, 0, 1, 1, 0],
        [1, 1, 0, 1, 1, 1],
    ]
    assert got[0, 0].int().tolist() == expected_0
    assert got[1, 0].int().tolist() == expected_1
    assert position_ids_of(real).tolist() == [[0, 1, 2, 3, 4, 4], [0, 1, 1, 2, 3, 4]]


def _tiny_mlm(family: str = "bert", **enc):
    torch.manual_seed(0)
    return build_model(tiny_config(family, "mlm", **enc)).eval()


@pytest.mark.parametrize("family", ["bert", "albert"])
def test_hidden_states_equal_the_encoder_forward_when_every_key_is_visible(family):
    # A source-only batch: the seq2seq mask is then the key-padding mask, and this module's pass
    # through the encoder's submodules must equal Encoder.forward (guards against drift in the core).
    model = _tiny_mlm(family)
    ids = torch.randint(5, 40, (3, 9))
    real = torch.ones(3, 9, dtype=torch.long)
    real[1, 6:] = 0
    real[2, 4:] = 0
    ours = hidden_states(model.encoder, ids, torch.zeros_like(ids), real)
    ref = model.encoder(ids, real).hidden
    keep = real.bool()
    torch.testing.assert_close(ours[keep], ref[keep], atol=1e-5, rtol=1e-5)


def test_a_target_token_changes_nothing_before_it_and_padding_changes_nothing():
    model = _tiny_mlm()
    segments, real = _layout([[S, S, S, S, G, G, G, G, P, P]])
    ids = torch.randint(5, 40, (1, 10))
    base = hidden_states(model.encoder, ids, segments, real)
    changed = ids.clone()
    changed[0, 6] = 41  # the third target token
    other = hidden_states(model.encoder, changed, segments, real)
    torch.testing.assert_close(other[0, :6], base[0, :6], atol=0, rtol=0)  # source and earlier targets
    assert not torch.allclose(other[0, 6:8], base[0, 6:8])  # itself and later targets do see it
    padded = ids.clone()
    padded[0, 8:] = 42
    torch.testing.assert_close(hidden_states(model.encoder, padded, segments, real)[0, :8], base[0, :8],
                               atol=0, rtol=0)


def test_decoding_a_source_alone_or_padded_in_a_batch_gives_the_same_distribution():
    model = _tiny_mlm()
    ids = dict(cls_id=2, sep_id=3, mask_id=4, pad_id=0, forbidden=[0, 1, 2, 4])
    batch = ModelStep(model, [[5, 6, 7, 8, 9, 10, 11], [12, 13]], **ids)
    alone = ModelStep(model, [[12, 13]], **ids)
    prefix = torch.tensor([[14, 15]])
    torch.testing.assert_close(batch(torch.tensor([1]), prefix), alone(torch.tensor([0]), prefix),
                               atol=1e-5, rtol=1e-5)
    logp = alone(torch.tensor([0]), prefix)
    assert torch.isinf(logp[0, [0, 1, 2, 4]]).all()  # special tokens other than [SEP] never generated
    assert math.isclose(float(logp.exp().sum()), 1.0, rel_tol=1e-5)


def test_training_batch_masks_a_fraction_of_each_target_only():
    pairs = [([10, 11, 12], [20, 21, 22, 23, 24, 25, 26, 27, 28, 3]), ([13], [29, 3])]
    b = training_batch(pairs, cls_id=2, sep_id=3, mask_id=4, pad_id=0, mask_prob=0.7, rng=np.random.default_rng(0))
    assert b.input_ids.shape == (2, 15)
    masked = b.labels != IGNORE
    assert masked.sum(1).tolist() == [7, 1]  # round(0.7 * 10), round(0.7 * 2) = 1 (at least one)
    assert (b.segment_ids[masked] == TARGET).all() and (b.input_ids[masked] == 4).all()
    original = torch.tensor([2, 10, 11, 12, 3, 20, 21, 22, 23, 24, 25, 26, 27, 28, 3])
    torch.testing.assert_close(torch.where(masked[0], b.labels[0], b.input_ids[0]), original)
    assert b.segment_ids[0].tolist() == [0] * 5 + [1] * 10
    assert b.attention_mask[1].tolist() == [1] * 5 + [0] * 10


def test_next_token_batch_labels_each_position_with_the_target_token_after_it():
    pairs = [([10, 11, 12], [20, 21, 3]), ([13], [29, 3])]
    b = next_token_batch(pairs, cls_id=2, sep_id=3, mask_id=4, pad_id=0, mask_prob=0.7, rng=None)
    assert b.input_ids[0].tolist() == [2, 10, 11, 12, 3, 20, 21, 3] and (b.input_ids != 4).all()  # nothing masked
    # the source's [SEP] predicts the first target token, the last-but-one target token the final [SEP]
    assert b.labels[0].tolist() == [IGNORE] * 4 + [20, 21, 3, IGNORE]
    assert b.labels[1].tolist() == [IGNORE, IGNORE, 29, 3] + [IGNORE] * 4
    # under the seq2seq mask no position sees the token it is labelled with (no future leakage)
    visible = seq2seq_mask(b.segment_ids, b.attention_mask)[:, 0]  # (B, T, T)
    for i, j in (b.labels != IGNORE).nonzero().tolist():
        assert not visible[i, j, j + 1:].any()


def test_next_token_decoding_reads_the_sources_sep_alone_or_padded_in_a_batch():
    model = _tiny_mlm()
    ids = dict(cls_id=2, sep_id=3, mask_id=4, pad_id=0, forbidden=[0, 1, 2, 4], decoding="next")
    batch = ModelStep(model, [[5, 6, 7, 8, 9, 10, 11], [12, 13]], **ids)
    alone = ModelStep(model, [[12, 13]], **ids)
    for prefix in (torch.zeros(1, 0, dtype=torch.long), torch.tensor([[14, 15]])):
        torch.testing.assert_close(batch(torch.tensor([1]), prefix), alone(torch.tensor([0]), prefix),
                                   atol=1e-5, rtol=1e-5)
    # the first token's distribution is the MLM head at [CLS] 12 13 [SEP]'s last position, nothing appended
    hidden = model.encoder(torch.tensor([[2, 12, 13, 3]]), torch.ones(1, 4, dtype=torch.long)).hidden
    logits = model.mlm_head(hidden[:, -1]).float()
    logits[:, [0, 1, 2, 4]] = float("-inf")
    torch.testing.assert_close(alone(torch.tensor([0]), torch.zeros(1, 0, dtype=torch.long)),
                               logits.log_softmax(-1), atol=1e-5, rtol=1e-5)


# ---- which MLM a checkpoint gives ----------------------------------------------------------------
def _state_equal(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_electra_generator_keeps_its_head_and_discriminator_gets_a_fresh_tied_one():
    torch.manual_seed(0)
    cfg = dataclasses.replace(tiny_config("electra", "electra"), embedding_sharing="gdes")
    pair = build_model(cfg)
    with torch.no_grad():  # gdes: the discriminator's table is E_G + delta; make delta matter
        pair.discriminator.encoder.embeddings.word_embeddings.delta.normal_()

    gen = seq2seq_start(pair, "generator")
    assert gen.network == "generator" and not gen.fresh_head
    assert _state_equal(gen.model, pair.generator)  # encoder and MLM head, the generator's own
    assert gen.model.config.encoder == cfg.generator

    disc = seq2seq_start(pair, "discriminator")
    assert disc.network == "discriminator" and disc.fresh_head
    head = disc.model.mlm_head
    assert torch.equal(head.bias, torch.zeros_like(head.bias))  # freshly initialised
    assert torch.equal(head.layer_norm.weight, torch.ones_like(head.layer_norm.weight))
    assert head.decoder_weight is disc.model.encoder.embeddings.word_embeddings.weight  # tied
    effective = pair.discriminator.encoder.embeddings.word_embeddings.weight
    assert torch.equal(disc.model.encoder.embeddings.word_embeddings.weight, effective)
    body = {k: v for k, v in pair.discriminator.encoder.state_dict().items() if "embeddings" not in k}
    assert all(torch.equal(disc.model.encoder.state_dict()[k], v) for k, v in body.items())

    with torch.no_grad():  # a copy: training it leaves the checkpoint's network alone
        disc.model.encoder.attention[0].qkv.weight.add_(1.0)
    qkv = pair.discriminator.encoder.attention[0].qkv.weight
    assert not torch.equal(disc.model.encoder.attention[0].qkv.weight, qkv)

    with pytest.raises(GenerationSetupError, match="network=generator"):
        seq2seq_start(pair, "auto")


def test_bert_mlm_path_drops_the_sentence_head_and_random_is_fresh():
    torch.manual_seed(0)
    bert = build_model(tiny_config("bert", "pretraining"))
    start = seq2seq_start(bert, "auto")
    assert start.network == "mlm" and not start.fresh_head and start.model.sentence_head is None
    assert _state_equal(start.model.mlm_head, bert.mlm_head) and _state_equal(start.model.encoder, bert.encoder)
    rand = seq2seq_start(bert, "random")
    assert rand.fresh_head and rand.model.encoder.config == bert.encoder.config
    assert not torch.equal(rand.model.encoder.attention[0].qkv.weight, bert.encoder.attention[0].qkv.weight)
    with pytest.raises(GenerationSetupError, match="ELECTRA"):
        seq2seq_start(bert, "discriminator")
    disc_only = build_model(tiny_config("electra", "discriminator"))
    assert seq2seq_start(disc_only, "auto").network == "discriminator" and seq2seq_start(disc_only, "auto").fresh_head
    with pytest.raises(GenerationSetupError, match="no MLM head"):
        seq2seq_start(disc_only, "mlm")


# ---- searches ------------------------------------------------------------------------------------
EOS = 0


def _table_step(table: dict[tuple, list[float]], V: int):
    """A step function from a table of next-token probabilities by prefix (uniform elsewhere)."""
    def step(rows, prefix):
        return torch.log(torch.tensor([table.get(tuple(p.tolist()), [1 / V] * V) for p in prefix], dtype=torch.float64))
    return step


def test_beam_search_escapes_the_greedy_trap():
    # Greedy takes A (0.6), after which the best is [SEP] at 0.34: 0.204. B (0.4) then [SEP] (0.9): 0.36.
    A, B = 1, 2
    table = {(): [0.0, 0.6, 0.4], (A,): [0.34, 0.33, 0.33], (B,): [0.9, 0.05, 0.05]}
    step = _table_step(table, 3)
    g = greedy(step, 1, eos=EOS, max_length=4)[0]
    b = beam_search(step, 1, beam=2, eos=EOS, max_length=4, length_penalty=0.0)[0]
    assert g.tokens == [A] and math.isclose(g.score, math.log(0.6 * 0.34))
    assert b.tokens == [B] and math.isclose(b.score, math.log(0.4 * 0.9)) and b.finished
    assert b.score > g.score
    assert beam_search(step, 1, beam=1, eos=EOS, max_length=4) == [g]


def test_a_sep_ranked_below_the_beam_does_not_finish_a_hypothesis():
    # transformers' rule: after A and B, the best 4 extensions are AA .25, A[SEP] .15, B[SEP] .135,
    # BA .105. B[SEP] (rank 2 of beam 2) is dropped, so the search goes on and finds AA[SEP] (.225);
    # counting B[SEP] as the second finished hypothesis would have stopped at A[SEP] (.15).
    A, B = 1, 2
    table = {(): [0.2, 0.5, 0.3], (A,): [0.3, 0.5, 0.2], (B,): [0.45, 0.35, 0.2], (A, A): [0.9, 0.05, 0.05],
             (B, A): [0.5, 0.3, 0.2]}
    best = beam_search(_table_step(table, 3), 1, beam=2, eos=EOS, max_length=5, length_penalty=0.0)[0]
    assert best.tokens == [A, A] and math.isclose(best.score, math.log(0.5 * 0.5 * 0.9))


def _random_step(V: int, seed: int):
    """Deterministic random next-token log-probs that depend on the example and its whole prefix."""
    def step(rows, prefix):
        out = []
        for r, p in zip(rows.tolist(), prefix.tolist()):
            key = seed + 1000 * r + sum((t + 1) * 7 ** i for i, t in enumerate(p))
            out.append(torch.randn(V, generator=torch.Generator().manual_seed(key)).log_softmax(-1))
        return torch.stack(out)
    return step


def _all_hypotheses(step, example: int, V: int, max_length: int) -> list[Hypothesis]:
    """Every sequence decoding can produce: [SEP] after 1..max_length-1 tokens, or cut at max_length."""
    out, live = [], [([], 0.0)]
    for t in range(max_length):
        nxt = []
        for tokens, score in live:
            logp = step(torch.tensor([example]), torch.tensor([tokens], dtype=torch.long).view(1, -1))[0]
            for v in range(V):
                if v == EOS:
                    if t >= 1:
                        out.append(Hypothesis(tokens, score + float(logp[v]), True))
                else:
                    nxt.append(([*tokens, v], score + float(logp[v])))
        live = nxt
    return out + [Hypothesis(tk, s, False) for tk, s in live]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beam_one_is_greedy_and_a_wide_beam_is_exhaustive(seed):
    V, L, n = 4, 3, 3
    step = _random_step(V, seed)
    g = greedy(step, n, eos=EOS, max_length=L)
    b1 = beam_search(step, n, beam=1, eos=EOS, max_length=L)
    assert [h.tokens for h in b1] == [h.tokens for h in g]
    assert all(math.isclose(x.score, y.score, rel_tol=1e-9) for x, y in zip(b1, g))
    # A beam wider than the whole space (3 + 9 + 27 hypotheses) keeps everything: the best score.
    wide = beam_search(step, n, beam=64, eos=EOS, max_length=L, length_penalty=0.0)
    for ex in range(n):
        best = max(_all_hypotheses(step, ex, V, L), key=lambda h: h.score)
        assert wide[ex].tokens == best.tokens and math.isclose(wide[ex].score, best.score, rel_tol=1e-9)
        assert wide[ex].score >= g[ex].score


# ---- training: a tiny model learns fixed targets ---------------------------------------------------
PAIRS = [Pair("the cat sat on the mat", "cat mat", "a"), Pair("the dog ran and ran", "dog ran", "b"),
         Pair("this film was really good", "yes good film", "c"), Pair("the plot of the story was poor", "no", "d")]
FAST = dict(epochs=150, batch_size=4, learning_rate=3e-3, warmup=0.0, label_smoothing=0.0, beam_size=2,
            max_target_length=6, precision="fp32", device="cpu")


def test_overfit_greedy_and_beam_reproduce_the_targets(tmp_path):
    ckpt = tiny_checkpoint(tmp_path, "bert", "mlm")
    task = GenerationTask("toy", {"train": PAIRS, "dev": PAIRS})
    r = run_generation(ckpt, task, GenerationConfig(**FAST), [0], log=lambda *a: None)
    run = r.seeds[0]
    assert run.final_loss < 0.5 * run.first_loss
    assert r.median("dev/greedy/exact_match") == 1.0 and r.median("dev/beam2/exact_match") == 1.0
    assert [e["prediction"] for e in run.examples] == [p.target for p in PAIRS]
    assert r.median("dev/beam2/log_prob") >= r.median("dev/greedy/log_prob") - 1e-6
    d = r.to_dict()
    assert d["network"] == "mlm" and d["summary"]["dev/greedy/f1"]["n"] == 1
    json.dumps(d)  # JSON-ready


def test_next_token_decoding_overfits_and_is_saved_with_the_model(tmp_path):
    ckpt = tiny_checkpoint(tmp_path, "bert", "mlm")
    task = GenerationTask("toy", {"train": PAIRS, "dev": PAIRS})
    r = run_generation(ckpt, task, GenerationConfig(**FAST, decoding="next"), [0], out_dir=tmp_path / "gen",
                       log=lambda *a: None)
    assert r.seeds[0].final_loss < 0.5 * r.seeds[0].first_loss
    assert r.median("dev/greedy/exact_match") == 1.0 and r.median("dev/beam2/exact_match") == 1.0
    assert load_generator(tmp_path / "gen")[2].decoding == "next"  # decode reads it back


def test_untrained_model_does_not_reproduce_the_targets(tmp_path):
    # The overfit test's control: the same setup without training scores near zero.
    ckpt = tiny_checkpoint(tmp_path, "bert", "mlm")
    task = GenerationTask("toy", {"train": PAIRS, "dev": PAIRS})
    r = run_generation(ckpt, task, GenerationConfig(**{**FAST, "epochs": 1, "learning_rate": 1e-9}), [0],
                       log=lambda *a: None)
    assert r.median("dev/greedy/exact_match") == 0.0


def test_cli_train_then_decode(tmp_path, capsys):
    ckpt = tiny_checkpoint(tmp_path, "electra", "electra")
    task = tmp_path / "task"
    task.mkdir()
    rows = "source\ttarget\n" + "".join(f"{p.source}\t{p.target}\n" for p in PAIRS)
    (task / "train.tsv").write_text(rows)
    (task / "dev.tsv").write_text(rows)
    out = tmp_path / "gen"
    overrides = [f"{k}={v}" for k, v in FAST.items()]
    assert main(["generate", "train", "--task", str(task), "--out", str(out), str(ckpt), "network=generator",
                 *overrides]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["network"] == "generator" and results["config"]["epochs"] == 150
    model, tok, cfg = load_generator(out)
    assert cfg.network == "generator" and cfg.max_target_length == 6
    assert model.encoder.config.hidden_size == 16  # the generator's width, not the discriminator's
    capsys.readouterr()
    assert main(["generate", "decode", "--input", str(task / "dev.tsv"), "--beam", "1",
                 "--output", str(tmp_path / "pred.txt"), str(out)]) == 0
    # The saved model decodes as the trained one did: the same greedy exact match as in results.json.
    preds = (tmp_path / "pred.txt").read_text().splitlines()
    em = M.score(preds, [p.target for p in PAIRS])["exact_match"]
    assert em == results["summary"]["dev/greedy/exact_match"]["median"] and em >= 0.5
    assert f"exact_match {em:.4f}" in capsys.readouterr().err
    (tmp_path / "sources.txt").write_text("".join(p.source + "\n" for p in PAIRS))  # plain text: printed
    assert main(["generate", "decode", "--input", str(tmp_path / "sources.txt"), str(out), "beam_size=1"]) == 0
    assert capsys.readouterr().out.splitlines() == preds
    assert main(["generate", "train", "--task", str(task), "--out", str(out), str(ckpt), "epochs=1"]) == 1
    assert "network=generator" in capsys.readouterr().err  # an ELECTRA pair must be told which half


# ---- metrics -------------------------------------------------------------------------------------
def test_metrics_on_known_examples():
    assert M.normalize("The  Cat's, hat!") == "cats hat"
    assert M.exact_match("the Eiffel Tower.", "Eiffel tower") == 1.0
    assert M.exact_match("Eiffel", "Eiffel tower") == 0.0
    # prediction "paris france capital", reference "capital of france": 2 common tokens
    assert math.isclose(M.token_f1("Paris France capital", "capital of France"), 2 * (2 / 3) * (2 / 3) / (4 / 3))
    assert M.token_f1("a", "the") == 1.0 and M.token_f1("x", "the") == 0.0  # empty after normalization
    # LCS of "a b c d e" and "a c e f": a c e (3); P = 3/5, R = 3/4
    assert M.lcs_length(list("abcde"), list("acef")) == 3
    assert math.isclose(M.rouge_l("b1 c d e1 f", "b1 d f g"), 2 * 0.6 * 0.75 / 1.35)
    assert M.rouge_l("x y z", "z y x") == pytest.approx(1 / 3)  # bag F1 would be 1: order matters
    assert M.token_f1("x y z", "z y x") == 1.0
    s = M.score(["cat mat", "dog"], ["cat mat", "dog ran"])
    assert s["exact_match"] == 0.5 and math.isclose(s["f1"], (1 + 2 / 3) / 2)


# ---- tasks ---------------------------------------------------------------------------------------
def _doc(i: int, title: str, body: str) -> str:
    return f'<doc id="{i}" url="?curid={i}" title="{title}">\n{title}\n\n{body}\n</doc>\n'


def _wiki_files(d):
    d.mkdir()
    words = " is a thing that exists in the world and is described here"
    docs = [_doc(100 + i, f"Title {i}", f"Title {i}{words}.\nSection.\nMore text {i}.") for i in range(40)]
    docs[3] = _doc(103, "Stub", "")  # title only: skipped
    (d / "wiki_00").write_text("".join(docs[:20]))
    (d / "wiki_01").write_text("".join(docs[20:]))
    return d


def test_title_task_holds_out_by_article(tmp_path):
    d = _wiki_files(tmp_path / "wiki")
    task = load_task(d, dev_fraction=0.25, test_fraction=0.25)
    by_id = {p.id: (s, p) for s, ps in task.splits.items() for p in ps}
    assert len(by_id) == sum(len(v) for v in task.splits.values()) == 39 and task.skipped == 1
    assert all(len(task.splits[s]) > 0 for s in ("train", "dev", "test"))
    first = "Title 5 is a thing that exists in the world and is described here."
    assert by_id["105"][1] == Pair(first, "Title 5", "105")
    assert all(s == split_of(i, 0.25, 0.25) for i, (s, _) in by_id.items())
    # The split of an article does not depend on which files are read, nor in what order.
    alone = wiki_title_task([d / "wiki_01"], dev_fraction=0.25, test_fraction=0.25)
    reverse = wiki_title_task([d / "wiki_01", d / "wiki_00"], dev_fraction=0.25, test_fraction=0.25)
    for t in (alone, reverse):
        assert all(by_id[p.id][0] == s for s, ps in t.splits.items() for p in ps)
    small = load_task(d, dev_fraction=0.25, test_fraction=0.25, limits={"train": 3, "dev": 2, "test": 2})
    assert [len(small.splits[s]) for s in ("train", "dev", "test")] == [3, 2, 2]
    assert small.splits["train"] == task.splits["train"][:3]  # the first N, in file order


def test_task_bad_input_names_file_and_line(tmp_path):
    bad = tmp_path / "w"
    bad.mkdir()
    (bad / "a").write_text(_doc(1, "T", "some body text") + '<doc id="2" url="" title="U">\nU\n\ntext\n')
    with pytest.raises(TaskDataError, match=r"a: the <doc> opened at line 6 has no </doc>"):
        load_task(bad)
    (bad / "a").write_text('<doc url="" title="U">\nU\n</doc>\n')
    with pytest.raises(TaskDataError, match=r"a:1: <doc> tag without an id"):
        load_task(bad)
    (bad / "a").write_text(_doc(1, "T", "x") + _doc(1, "T", "x"))
    with pytest.raises(TaskDataError, match="id 1 occurs twice"):
        load_task(bad)
    tsv = tmp_path / "p.tsv"
    tsv.write_text("src\ttarget\na\tb\n")
    with pytest.raises(TaskDataError, match=r"p.tsv:1: the header has no source column"):
        load_task(tsv)
    tsv.write_text("source\ttarget\na\tb\nc\td\te\n")
    with pytest.raises(TaskDataError, match=r"p.tsv:3: 3 field\(s\)"):
        load_task(tsv)
    jl = tmp_path / "p.jsonl"
    jl.write_text('{"source": "a", "target": "b"}\n{"source": "a", "target": ""}\n')
    with pytest.raises(TaskDataError, match=r"p.jsonl:2: empty target"):
        load_task(jl)
    jl.write_text('{"source": "a", "target": "b"}\n{"source": "a"\n')
    with pytest.raises(TaskDataError, match=r"p.jsonl:2: invalid JSON"):
        load_task(jl)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "train.tsv").write_text("source\ttarget\na\tb\n")
    with pytest.raises(TaskDataError, match="no dev.tsv or dev.jsonl"):
        load_task(tmp_path / "d")
    (tmp_path / "x.txt").write_text("hello\n")
    with pytest.raises(TaskDataError, match="not '.txt'"):
        load_task(tmp_path / "x.txt")


def test_one_file_of_pairs_is_split_by_row_id(tmp_path):
    jl = tmp_path / "p.jsonl"
    jl.write_text("".join(json.dumps({"id": str(i), "source": f"s {i}", "target": f"t {i}"}) + "\n"
                          for i in range(200)))
    task = load_task(jl, dev_fraction=0.1, test_fraction=0.1)
    assert sum(len(v) for v in task.splits.values()) == 200
    assert all(split_of(p.id, 0.1, 0.1) == s for s, ps in task.splits.items() for p in ps)
    assert 5 < len(task.splits["dev"]) < 40


# ---- settings --------------------------------------------------------------------------------------
def test_config_round_trip_bad_keys_and_lengths(tmp_path):
    c = GenerationConfig(network="discriminator", beam_size=3, max_train_examples=10)
    assert GenerationConfig.from_dict(c.to_dict()) == c
    with pytest.raises(ConfigError, match="valid keys"):
        GenerationConfig.from_dict({"beams": 3})
    with pytest.raises(ConfigError, match="mask_prob"):
        GenerationConfig(mask_prob=0.0)
    assert lengths_for(GenerationConfig(max_source_length=64, max_target_length=24), 32) == (6, 24)
    with pytest.raises(ValueError, match="no room for a source"):
        lengths_for(GenerationConfig(max_target_length=30), 32)
    ckpt = tiny_checkpoint(tmp_path, "bert", "mlm")  # a bare MLM decodes with the default settings
    model, tok, cfg = load_generator(ckpt)
    assert cfg == GenerationConfig() and tok.mask_id == 4 and isinstance(model, MaskedLM)
    assert load_tokenizer(ckpt).vocab_size == tok.vocab_size
