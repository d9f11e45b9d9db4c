"""Corpora: one importer per format (registered in `formats`), and the built-in synthetic corpus,
all producing Kaldi-style data dirs."""
