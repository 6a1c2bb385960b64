"""Fine-tuning and evaluation: GLUE-style tasks, intrinsic scores (pseudo-perplexity, minimal pairs),
fill-mask, replaced-token detection, and prompt-based zero/few-shot classification."""
