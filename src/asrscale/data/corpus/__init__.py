"""Corpora: one importer per format, and the built-in synthetic corpus, all producing Kaldi-style data dirs."""

from asrscale.data.corpus.kaldi import import_kaldi
from asrscale.data.corpus.lhotse import import_lhotse
from asrscale.data.corpus.librispeech import import_librispeech
from asrscale.data.corpus.manifest import import_manifest

IMPORTERS = {"kaldi": import_kaldi, "librispeech": import_librispeech, "manifest": import_manifest,
             "lhotse": import_lhotse}  # fmt: skip
