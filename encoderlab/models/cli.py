"""CLI: ``encoderlab models``, the presets with their parameter counts. (``convert`` and ``export-onnx``
need checkpoints and interop, above this package: encoderlab/interop/cli.py.)"""

from __future__ import annotations

from encoderlab.models.presets import PUBLISHED_M, count_encoder_parameters, preset, preset_names


def register(sub) -> None:
    p = sub.add_parser("models", help="list the family presets with their parameter counts")
    p.set_defaults(func=cmd_models)


def models_table() -> list[dict]:
    rows = []
    for name in preset_names():
        cfg = preset(name)
        e = cfg.encoder
        rows.append({
            "name": name, "layers": e.num_layers, "hidden": e.hidden_size, "heads": e.num_heads,
            "embedding": e.emb_size, "sharing": e.sharing, "params_m": count_encoder_parameters(e) / 1e6,
            "published_m": PUBLISHED_M.get(name),
            "generator_m": count_encoder_parameters(cfg.generator) / 1e6 if cfg.generator else None,
        })
    return rows


def cmd_models(args) -> int:
    head = f"{'preset':<16}{'layers':>7}{'hidden':>8}{'heads':>6}{'emb':>6}  {'sharing':<8}{'params':>9}" \
           f"{'published':>11}{'generator':>11}"
    print(head)
    print("-" * len(head))
    for r in models_table():
        pub = f"{r['published_m']}M" if r["published_m"] else "-"
        gen = f"{r['generator_m']:.2f}M" if r["generator_m"] else "-"
        print(f"{r['name']:<16}{r['layers']:>7}{r['hidden']:>8}{r['heads']:>6}{r['embedding']:>6}  "
              f"{r['sharing']:<8}{r['params_m']:>8.2f}M{pub:>11}{gen:>11}")
    print("\nparams: the encoder (embeddings, layers, pooler), equal to transformers' BertModel/AlbertModel/"
          "ElectraModel;\ngenerator: ELECTRA's generator encoder at the paper's default width (shared embeddings "
          "counted in it too).")
    return 0
