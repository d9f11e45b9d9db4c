"""Decoding a trained model and scoring its hypotheses."""
