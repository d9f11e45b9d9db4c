"""The corpus formats a source of `corpus.subsets` may have: a format is its importer and its
registry entry here, named as the configuration names it (checked when this module loads)."""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from asrscale.config.sections import CORPUS_FORMATS
from asrscale.data.badinput import Skipped
from asrscale.data.corpus.entry import Entry
from asrscale.data.corpus.kaldi import import_kaldi, kaldi_listings
from asrscale.data.corpus.lhotse import import_lhotse, lhotse_listings
from asrscale.data.corpus.librispeech import import_librispeech, librispeech_listings
from asrscale.data.corpus.manifest import import_manifest, manifest_listings


@dataclass(frozen=True)
class Format:
    read: Callable[[Path, Skipped], list[Entry]]  # a source's utterances; bad ones reported to Skipped
    listings: Callable[[Path], list[Path]]  # the files that list a source's utterances (the workflow watches them)


FORMATS = {
    "kaldi": Format(import_kaldi, kaldi_listings),
    "librispeech": Format(import_librispeech, librispeech_listings),
    "manifest": Format(import_manifest, manifest_listings),
    "lhotse": Format(import_lhotse, lhotse_listings),
}
if tuple(FORMATS) != CORPUS_FORMATS:  # a format added on one side only: the schema would let it by, or refuse it
    raise RuntimeError(f"corpus formats {list(FORMATS)} differ from config.sections.CORPUS_FORMATS {CORPUS_FORMATS}")


def listings(sources: list[dict]) -> list[Path]:
    """The files that list the utterances of a subset's sources (editing one imports it again)."""
    return [path for source in sources for path in FORMATS[source["format"]].listings(Path(source["path"]))]
