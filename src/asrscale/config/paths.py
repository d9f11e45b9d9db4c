"""Every path the workflow writes, in one place: a corpus's data dirs, features, tokens, shards and
language model; a study's settings, calibration, runs, tables, figures and report. Each is a
template whose fields are Snakemake's wildcards ({corpus}, {subset}, {study}, ...): the rules use
the templates as they are, and `Study` fills them in for its own corpus, study and runs."""

CORPUS = "results/{corpus}"
CORPUS_SETTINGS = CORPUS + "/settings/{stage}.json"  # the settings of a corpus's stage
SYNTHESIS_PART = (
    CORPUS + "/synth/part{part}"
)  # the built-in corpus: one synthesis job's audio and data
DATA = CORPUS + "/data/{subset}"  # a subset's Kaldi data dir
DATA_WATCH = CORPUS + "/data/{subset}.watch"  # bad audio an import found: fixing one imports again
FEATURE_PART = CORPUS + "/feats/{subset}.parts/part{part}"  # one extraction job's .ark, .scp, ...
FEATURES = CORPUS + "/feats/{subset}"  # a subset's feats.scp, utt2num_frames, cmvn.npz, skipped.tsv
FEATURE_CACHE = (
    CORPUS + "/cache/features"
)  # your own corpus: features per utterance, kept across reruns
TOKENS = CORPUS + "/tokens.txt"
SHARDS = CORPUS + "/shards/P{learners}"
LANGUAGE_MODEL = CORPUS + "/lm/words.arpa"  # decode.lm: train

STUDY = CORPUS + "/studies/{study}"
STUDY_SETTINGS = STUDY + "/settings/{stage}.json"
CALIBRATION = STUDY + "/calibration.json"
LANGUAGE_MODEL_STATISTICS = STUDY + "/lm.json"  # what decoding's LM knows of dev and test
# {cluster}: what a run ran on, "mpi" (real ranks) or "sim-<profile>" (a simulated cluster)
RUN = STUDY + "/runs/{cluster}/{algorithm}/{variant}/P{learners}/seed{seed}"
# a tuned study's grid of one configuration (an algorithm at a learner count) and its choice
TUNING = STUDY + "/tuning/{cluster}/{algorithm}/P{learners}.json"
# its grid's halving at the rung (study.tuning.halving): which runs go on, which stop
HALVING = STUDY + "/tuning/{cluster}/{algorithm}/P{learners}.halving.json"
# a run's dev and test sets' log-probabilities and greedy hypotheses, which decoding reads
LOG_PROBS = RUN + "/log-probs"
# what decoding writes of a run's test set, in <run>/<test set>/
SCORES = (
    "scores.json",
    "speakers.tsv",
    "hypotheses.tsv",
    "utterances.tsv",
    "alignment.lm.txt",
    "alignment.greedy.txt",
)
TABLE = STUDY + "/{table}.tsv"  # the gathered tables
TABLES = (
    "runs",
    "epochs",
    "staleness",
    "sweeps",
    "exchanges",
    "confusions",
    "learners",
    "utterances",
    "tuning",
)
FIGURES = STUDY + "/figures"
RESULTS = STUDY + "/RESULTS.md"  # per test set, each algorithm's WERs and speedup
REPORT = "reports/{study}.html"
PUBLISHED_SPEEDUPS = (
    "results/published-speedups.tsv"  # the cost model replaying the studies' own figures
)

# a run's job of one stage (settings, train, decode), as its log (logs/<job>.log) and benchmark
# (logs/benchmarks/<job>.tsv) name it
RUN_JOB = "{corpus}/{study}/{stage}/{cluster}/{algorithm}/{variant}-P{learners}-seed{seed}"


def run_job(stage: str) -> str:
    """RUN_JOB of `stage`, its other fields left to the rule's wildcards."""
    return RUN_JOB.replace("{stage}", stage)
