"""Training: the one training loop, model building, and the samples and clocks its estimates use."""
