"""CLI: ``encoderlab convert`` (transformers import/export, unsharing ALBERT layers) and
``encoderlab export-onnx``. Parsing only; the work is in encoderlab.checkpoint and encoderlab.interop."""

from __future__ import annotations

from encoderlab import checkpoint
from encoderlab.interop.onnx import export_onnx
from encoderlab.models.build import unshare


def register(sub) -> None:
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


def cmd_convert(args) -> int:
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
    model = checkpoint.load_model(args.src).eval()
    path = export_onnx(model, args.dst, opset=args.opset)
    print(f"exported {model.config.family}/{model.config.head} -> {path} ({path.stat().st_size / 1e6:.1f} MB)")
    return 0
