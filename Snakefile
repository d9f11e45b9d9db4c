# asrscale: how acoustic-model training scales across learners.
# Corpus -> features -> shards -> training under each algorithm and learner count -> decoding
# -> WER -> one HTML report. Edit config.yaml; `snakemake --cores all` runs the study.
from snakemake.utils import min_version

from asrscale.config.files import read_config_file

min_version("9.0")

# A typo in config.yaml named by its line and column, before Snakemake reads it (Snakemake's own
# message names neither). A file of --configfile Snakemake reads before this line runs:
# `asrscale check --configfile config.yaml <files>` reads every one first (docs/slurm.md).
if Path("config.yaml").is_file():
    read_config_file("config.yaml")


configfile: "config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/slurm.smk"
include: "workflow/rules/settings.smk"
include: "workflow/rules/corpus.smk"
include: "workflow/rules/features.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/decode.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        f"reports/{STUDY.name}.html",
        STUDY.at(paths.RESULTS),
