"""CLI: ``encoderlab models`` (the presets) and ``encoderlab convert`` (transformers interop, unsharing)."""

from __future__ import annotations

from encoderlab.models.presets import PUBLISHED_M, count_encoder_parameters, preset, preset_names


def register(sub) -> None:
    p = sub.add_parser("models", help="list the family presets with their parameter counts")
    p.set_defaults(func=cmd_models)

    p = sub.add_parser("convert", help="convert checkpoints to/from transformers, or unshare ALBERT layers")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--from-hf", action="store_true", help="IN is a transformers model directory (safetensors)")
    g.add_argument("--to-hf", action="store_true", help="write a plain transformers directory")
    g.add_argument("--unshare", action="store_true", help="give every shared layer its own copy (same outputs)")
    p.add_argument("src", metavar="IN")
    p.add_argument("dst", metavar="OUT")
    p.set_defaults(func=cmd_convert)

    p = sub.add_parser("export-onnx", help="export an encoder network (ELECTRA: the discriminator) to ONNX")
    p.add_argument("src", metavar="CKPT")
    p.add_argument("dst", metavar="OUT.onnx")
    p.add_argument("--opset", type=int, default=18)
    p.set_defaults(func=cmd_export_onnx)


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


def cmd_convert(args) -> int:
    from encoderlab import checkpoint
    from encoderlab.models.networks import unshare

    if args.from_hf:
        model = checkpoint.load_model(args.src)
        checkpoint.save_model(model, args.dst, tokenizer_dir=args.src)
        print(f"imported {model.config.family}/{model.config.head} from {args.src} -> {args.dst}")
    elif args.to_hf:
        model = checkpoint.load_model(args.src)
        notes = checkpoint.export_hf(model, args.dst, tokenizer_dir=args.src)
        for n in notes:
            print(f"note: {n}")
        print(f"exported {model.config.family}/{model.config.head} -> {args.dst} (transformers directory)")
    else:
        model = checkpoint.load_model(args.src)
        before = sum(p.numel() for p in model.parameters())
        unshare(model)
        after = sum(p.numel() for p in model.parameters())
        checkpoint.save_model(model, args.dst, tokenizer_dir=args.src)
        print(f"unshared {args.src} -> {args.dst}: {before / 1e6:.2f}M -> {after / 1e6:.2f}M parameters, same outputs")
    return 0


def cmd_export_onnx(args) -> int:
    from encoderlab import checkpoint
    from encoderlab.interop.onnx import export_onnx

    model = checkpoint.load_model(args.src).eval()
    path = export_onnx(model, args.dst, opset=args.opset)
    print(f"exported {model.config.family}/{model.config.head} -> {path} ({path.stat().st_size / 1e6:.1f} MB)")
    return 0
