"""Training: the learners, the training loop, the algorithms (one file each), the fused kernels
(`fused`), checkpoints and each run's records."""
