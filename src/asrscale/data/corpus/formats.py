"""The corpus formats a source of `corpus.subsets` may have: a format is its importer and its
registry entry here, named as the configuration names it (checked when this module loads)."""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from asrscale.config.sections import CORPUS_FORMATS
from asrscale.data.badinput import Skipped
from asrscale.data.corpus.entry import Entry
from asrscale.data.corpus.kaldi import import_kaldi, kaldi_listings, kaldi_problem
from asrscale.data.corpus.lhotse import import_lhotse, lhotse_listings, lhotse_problem
from asrscale.data.corpus.librispeech import (
    import_librispeech,
    librispeech_listings,
    librispeech_problem,
)
from asrscale.data.corpus.manifest import import_manifest, manifest_listings, manifest_problem


@dataclass(frozen=True)
class Format:
    read: Callable[
        [Path, Skipped], list[Entry]
    ]  # a source's utterances; bad ones reported to Skipped
    listings: Callable[
        [Path], list[Path]
    ]  # the files that list a source's utterances (the workflow watches them)
    # why a path is not a source of the format ("does not exist", "is empty", ...), checked before
    # any job starts, without reading its utterances; None where it may be one
    problem: Callable[[Path], str | None]


FORMATS = {
    "kaldi": Format(import_kaldi, kaldi_listings, kaldi_problem),
    "librispeech": Format(import_librispeech, librispeech_listings, librispeech_problem),
    "manifest": Format(import_manifest, manifest_listings, manifest_problem),
    "lhotse": Format(import_lhotse, lhotse_listings, lhotse_problem),
}
if (
    tuple(FORMATS) != CORPUS_FORMATS
):  # a format added on one side only: the schema would let it by, or refuse it
    raise RuntimeError(
        f"corpus formats {list(FORMATS)} differ from config.sections.CORPUS_FORMATS "
        f"{CORPUS_FORMATS}"
    )


def source_problem(source: dict) -> str | None:
    """Why a source of corpus.subsets (its format and path) is not one, said of its path; None where
    it may be."""
    return FORMATS[source["format"]].problem(Path(source["path"]))


def listings(sources: list[dict]) -> list[Path]:
    """The files that list the utterances of a subset's sources (editing one imports it again)."""
    return [
        path
        for source in sources
        for path in FORMATS[source["format"]].listings(Path(source["path"]))
    ]
