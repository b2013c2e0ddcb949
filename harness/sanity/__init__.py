"""``tokbench sanity``: probes every encoder must pass (causality, random bytes, a Markov source, MDM)."""
