"""Corpora: importers and the built-in synthetic corpus, all producing Kaldi-style data dirs."""
