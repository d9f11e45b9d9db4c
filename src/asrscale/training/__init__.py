"""Training: models, learners, the training loop, the algorithms, and calibration of compute."""
