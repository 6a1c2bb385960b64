"""Equal-compute studies, the claims report, and the demo corpus."""
