"""A run's model on its dev and test sets, once: each utterance's log-probabilities and greedy CTC
hypothesis (asrscale.decoding.outputs), the short part of decoding that wants the GPU. The beam
search over them runs in a job of its own on CPUs (asrscale.decoding.decode).

The same model gives the same log-probabilities in one process or in two: they are computed with
deterministic kernels (on a GPU, cuBLAS and cuDNN pick non-deterministic ones by default, and the
beam search follows the last bit of a log-probability)."""

import contextlib
import os
from pathlib import Path

import torch

from asrscale.config.sections import FeatureConfig, ModelConfig
from asrscale.data.batches import Subset
from asrscale.data.tokens import Tokens
from asrscale.decoding.outputs import Outputs, write_outputs
from asrscale.models import build_model
from asrscale.progress import Ticker
from asrscale.worlds.devices import resolve_device


@contextlib.contextmanager
def deterministic():
    """Torch's deterministic kernels, as long as the block runs (cuBLAS's workspace as it asks)."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    before = torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.benchmark
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before[0])
        torch.backends.cudnn.benchmark = before[1]


def model_outputs(model, subset: Subset, batch_size: int = 64) -> Outputs:
    """The model's log-probabilities of every utterance of a subset (computed deterministically),
    and its greedy hypotheses."""
    by_utt = {}
    device = next(model.parameters()).device
    ticker = Ticker("forward passes", len(subset.frames))
    with torch.no_grad(), deterministic():
        for group in subset.batches(list(subset.frames), batch_size, seed=None):
            ticker(len(by_utt))
            batch = subset.collate(group).to(device)
            log_probs, lengths = model(batch.features, batch.lengths)
            texts = subset.tokens.greedy(log_probs, lengths)
            for utt, scores, length, text in zip(
                group, log_probs.float().cpu().numpy(), lengths.tolist(), texts
            ):
                by_utt[utt] = (text, scores[:length])
    ticker(len(by_utt))
    utts = sorted(by_utt)
    return Outputs(
        utts,
        [subset.text[u] for u in utts],
        [by_utt[u][0] for u in utts],
        [by_utt[u][1] for u in utts],
        [subset.utt2spk.get(u, u) for u in utts],
    )


def load_model(model_path: Path, device: str):
    """A trained model on `device` for inference, with its tokens, and the features and CMVN it was
    trained on."""
    saved = torch.load(model_path, weights_only=False)
    # (a model saved before features.kaldi_dim and features.dither were settings has neither)
    tokens = Tokens(saved["tokens"])
    features = FeatureConfig(**{"kaldi_dim": None, "dither": 0.0, **saved["features"]})
    model = build_model(ModelConfig(**saved["model_config"]), features.dim, len(tokens))
    model.load_state_dict(saved["model"])
    return model.to(resolve_device(device)).eval(), tokens, saved["cmvn"]


def write_log_probs(
    model_path: Path,
    subsets: dict[str, tuple[Path, Path]],
    train_feats_dir: Path,
    device: str,
    out_dir: Path,
) -> None:
    """Each subset's (name -> its data and feature dirs) outputs of the model on `device`, into
    `out_dir`/<name>.{ark,scp,tsv}, with the model's tokens (tokens.txt), which decoding spells
    its words in."""
    model, tokens, cmvn = load_model(model_path, device)
    out_dir = Path(out_dir)
    for name, (data, feats) in subsets.items():
        outputs = model_outputs(model, Subset(data, feats, train_feats_dir, cmvn, tokens))
        write_outputs(outputs, out_dir, name)
    tokens.write(out_dir / "tokens.txt")
