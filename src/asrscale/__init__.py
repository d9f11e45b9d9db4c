"""asrscale: how speech acoustic-model training scales across learners."""

__version__ = "0.1.0"
