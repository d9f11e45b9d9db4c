"""Target 8: what decoding with the word LM costs against greedy decoding, on the default study's
test set, with the decode stage's own code and settings (`decode:` in config.yaml).

The model is SEQ's, trained here for a few hundred steps so that its outputs are as peaked as
those of a model in training (an untrained model's flat outputs would keep every hypothesis in
the beam); its greedy and LM WERs are printed to show where it stands. Greedy decoding is the
model's forward pass plus the best path; the LM decode is the forward pass plus the beam search;
the decode job also chooses the LM weight and word bonus on the dev set (every pair of the grid).
"""

import itertools
import time

from asrscale.config import paths
from benchmarks.common import Bench, PreparedCorpus, median


def run(bench: Bench) -> None:
    from asrscale.config.sections import DecodeSettings, from_settings
    from asrscale.decoding.beam import LexiconBeamSearch, Weights
    from asrscale.decoding.decode import choose_weights, wer
    from asrscale.decoding.log_probs import model_outputs

    study = PreparedCorpus.of(bench.work)
    steps = 2 if bench.quick else 400
    model = _trained_model(study, steps)
    dev, test = study.subset("dev"), study.subset("test")
    settings = from_settings(DecodeSettings, study.resolved.stage_settings("decode"))

    greedy_s, outputs = _timed(bench.repetitions, lambda: model_outputs(model, test))
    search = LexiconBeamSearch(
        study.path(paths.LANGUAGE_MODEL), study.tokens, settings.beam, settings.beam_threshold
    )
    start = time.perf_counter()
    tried = choose_weights(search, model_outputs(model, dev), settings)
    choose_s = time.perf_counter() - start
    decoder = search.decoder(Weights(tried[0]["lm_weight"], tried[0]["word_bonus"]))
    beam_s, hypotheses = _timed(
        bench.repetitions,
        lambda: [search.decode(decoder, scores) for scores in outputs.log_probs],
        [],
    )
    greedy, beam = median(greedy_s), median(beam_s)
    details = dict(
        utterances=len(outputs.utts),
        greedy_s=greedy,
        beam_search_s=beam,
        choose_on_dev_s=choose_s,
        grid=len(tried),
        beam=settings.beam,
        training_steps=steps,
    )
    bench.add(
        "decoding",
        "LM decode / greedy decode of the test set (forward pass included)",
        (greedy + beam) / greedy,
        "x",
        **details,
    )
    bench.add(
        "decoding",
        f"decode job (weights chosen on dev from {len(tried)} pairs, both decodes) / greedy decode",
        (greedy + choose_s + greedy + beam) / greedy,
        "x",
    )
    for name, guesses in (("greedy", outputs.greedy), ("with the LM", hypotheses)):
        bench.add(
            "decoding",
            f"test WER after {steps} training steps, {name}",
            100 * wer(outputs.references, guesses),
            "%",
        )


def _trained_model(study: PreparedCorpus, steps: int):
    """SEQ's model trained for `steps` steps on the training set's batches, in turn, ready to
    decode."""
    import torch

    from asrscale.training.learner import Learner, make_optimizer
    from asrscale.worlds.ops import run_alone

    torch.manual_seed(1)
    model, train, train_set = study.build_model(), study.seq.train, study.subset("train")
    learner = Learner(
        model, make_optimizer(train.optimizer, train.momentum, model), train.clip_grad_norm, "step"
    )
    groups = train_set.batches(sorted(train_set.frames), train.batch_size, seed=1)
    for group in itertools.islice(itertools.cycle(groups), steps):
        run_alone(learner.backward(train_set.collate(group)))
        run_alone(learner.update(train.lr))
    model.eval()
    return model


def _timed(repetitions: int, function, result=None) -> tuple[list[float], object]:
    """The seconds of each of `repetitions` calls of `function`, and what the last one returned
    (`result` where none was made)."""
    seconds = []
    for _ in range(repetitions):
        start = time.perf_counter()
        result = function()
        seconds.append(time.perf_counter() - start)
    return seconds, result
