"""The data stages: a corpus (built-in or your own) into Kaldi-style data dirs, features, tokens,
shards per learner, and batches."""
