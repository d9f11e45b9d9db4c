import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from asrscale.corpus.synthetic import SyntheticConfig, synthesise_part
from asrscale.datadir import read_table
from asrscale.features import FeatureConfig, combine_parts, extract_part, read_frame_counts
from asrscale.shard import write_shards
from asrscale.tokens import Tokens

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def tiny_corpus_config(**changes) -> SyntheticConfig:
    settings = dict(
        seed=7, sample_rate=16000, utterances={"train": 96, "dev": 16, "test": 16}, utterances_per_speaker=8,
        held_out_variants={"dev": 8, "test": 12}, snr_db=(15, 30), rate_wpm=(150, 190), pitch=(30, 70),
    )  # fmt: skip
    settings.update(changes)
    return SyntheticConfig(**settings)


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Path:
    """A tiny real corpus: eSpeak audio, Kaldi data dirs, features, tokens and shards for 1, 2 and 4 learners."""
    root = tmp_path_factory.mktemp("corpus")
    for subset, data in synthesise_part(tiny_corpus_config(), 0, 1, root / "audio").items():
        data.write(root / "data" / subset)
        extract_part(data, FeatureConfig(), 0, 1, root / "feats" / subset / "part0")
        combine_parts([root / "feats" / subset / "part0"], root / "feats" / subset)
    Tokens.from_texts(read_table(root / "data" / "train" / "text").values()).write(root / "tokens.txt")
    for learners in (1, 2, 4):
        write_shards(read_frame_counts(root / "feats" / "train"), learners, root / "shards" / f"P{learners}")
    return root


def mpiexec(ranks: int, *command, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess:
    """Run `command` on `ranks` real MPI ranks (the pip-installed MPICH), one thread each."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT / "src"))
    launcher = shutil.which("mpiexec", path=str(BIN)) or "mpiexec"
    result = subprocess.run(
        [launcher, "-n", str(ranks), *map(str, command)], capture_output=True, text=True, timeout=timeout, env=env
    )
    if check and result.returncode != 0:
        raise AssertionError(f"mpiexec -n {ranks} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result
