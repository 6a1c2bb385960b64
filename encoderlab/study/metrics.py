"""The names of the numbers the claims and the report read, one place for each.

Held-out metrics are named as the trainer logs them in metrics.jsonl (train/evaluate.py and the
objectives write them; each eval record in a result's ``curve["eval"]`` has them as keys); the speed
and measurement fields are named as study/speed.py and study/measure.py store them. Changing one
here does not rename it on disk: these strings are the file formats.
"""

from __future__ import annotations

# ---- held-out evaluation (curve["eval"] records) --------------------------------------------------
EVAL_MLM_ACCURACY = "eval_mlm_accuracy"  # a masked LM's accuracy at the masked positions
EVAL_MLM_LOSS = "eval_mlm_loss"
EVAL_GEN_ACCURACY = "eval_gen_accuracy"  # an ELECTRA pair's generator, the same positions
EVAL_GEN_LOSS = "eval_gen_loss"
EVAL_DISC_AUC = "eval_disc_auc"  # an ELECTRA pair's discriminator: replaced-token detection AUC
EVAL_CLM_ACCURACY = "eval_clm_accuracy"  # next-token accuracy (the arms' causal objective)
# All-Tokens-MLM (claim 10): the masked positions alone, its softmax without the copy gate, the gate
EVAL_MLM_MASKED_ACCURACY = "eval_mlm_masked_accuracy"
EVAL_MLM_MASKED_SOFTMAX_ACCURACY = "eval_mlm_masked_softmax_accuracy"
EVAL_COPY_PROBABILITY = "eval_copy_probability"
EVAL_COPY_PROBABILITY_REPLACED = "eval_copy_probability_replaced"
FLOPS = "flops"  # the FLOPs the trainer had counted at a record

# ---- speed and measurement ---------------------------------------------------------------------
TOKENS_PER_S = "tokens_per_s"  # training throughput (VariantResult.speed, logged train records)
PEAK_MEMORY_MB = "peak_memory_mb"
LATENCY_MS = "latency_ms"  # measure[LATENCY_MS]: {precision: {batch: ms}} of the deployed encoder
