"""Scoring: packed scoring jobs (per-byte NLL), cell metrics, permutations and compressor baselines."""
