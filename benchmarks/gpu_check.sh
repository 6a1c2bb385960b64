#!/usr/bin/env bash
# The GPU checks, in order of importance, for one short session on a CUDA machine: the CUDA tests
# (every objective trains, checkpoints load on a CPU, resume, torchrun with NCCL, fine-tuning
# matches the CPU), the training step against transformers at batch 32, the demo study end to end,
# and the training step at batch 256. Each part writes under $OUT as it finishes, so a run cut short keeps what it did.
#
#     OUT=runs/gpu bash benchmarks/gpu_check.sh        # uses the python3 that has torch with CUDA
set -u
OUT=${OUT:-runs/gpu}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
t0=$(date +%s)
stamp() { echo "[gpu_check $(( $(date +%s) - t0 )) s] $*"; }

stamp "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
$PY -c "import torch, transformers, sys; print(sys.version.split()[0], 'torch', torch.__version__, 'cuda', \
torch.version.cuda, torch.cuda.get_device_name(0), 'transformers', transformers.__version__)"

stamp "CUDA tests"
$PY -m pytest -q -p no:cacheprovider tests/test_cuda.py "tests/test_eval_finetune.py::test_finetune_on_cuda_matches_cpu" \
    2>&1 | tee "$OUT/tests.log" | tail -25

stamp "training step, batch 32 x 128, fp32 and bf16, with memory"
$PY benchmarks/train_step.py --device cuda --models electra-small,bert-small,albert-base,bert-base \
    --seconds 2 --rounds 2 --batch 32 --json "$OUT/train_step_b32.json" 2>&1 | tail -8

stamp "demo study"
$PY -m encoderlab demo out_dir="$OUT/demo-run" > "$OUT/demo.log" 2>&1
tail -25 "$OUT/demo.log"
cp "$OUT/demo-run/report.md" "$OUT/demo_report.md" 2>/dev/null
cp "$OUT/demo-run/report.json" "$OUT/demo_report.json" 2>/dev/null
rm -rf "$OUT/demo-run"
stamp "training step, batch 256 x 128, bf16"
$PY benchmarks/train_step.py --device cuda --models electra-small,bert-small,albert-base,bert-base \
    --dtypes bf16 --seconds 3 --rounds 2 --batch 256 --no-memory --json "$OUT/train_step_b256.json" 2>&1 | tail -7

if [ "${STUDY:-0}" = 1 ]; then  # issue 18's GPU profile: hours, not minutes; only when asked
    stamp "GPU study docs/studies/gpu-small/study.yaml"
    $PY -m encoderlab study docs/studies/gpu-small/study.yaml out_dir="$OUT/gpu-small" > "$OUT/gpu_small.log" 2>&1
    tail -40 "$OUT/gpu_small.log"
    cp "$OUT/gpu-small/report.md" "$OUT/gpu-small/report.json" "$OUT/" 2>/dev/null
fi
stamp "done"
