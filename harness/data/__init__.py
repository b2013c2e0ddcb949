"""Data for a run: sources loaded and split, eval sets, perturbed texts and their cache, pretokenized batches."""
