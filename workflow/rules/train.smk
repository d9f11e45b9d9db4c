localrules:
    replay_published,
    wall_time,
    tune,
    halve,
    adopt,


rule replay_published:
    input:
        # the figures and their fit: a new fit replays them again
        Path(workflow.basedir) / "src/asrscale/costmodel/published.yaml",
        Path(workflow.basedir) / "src/asrscale/worlds/fitted.yaml",
    output:
        paths.PUBLISHED_SPEEDUPS,
    log:
        "logs/published-speedups.log",
    conda:
        "../../envs/train.yaml"
    shell:
        "python -m asrscale replay-published --out {output} > {log} 2>&1"


rule calibrate:
    input:
        settings=fill(paths.STUDY_SETTINGS, stage="calibrate"),
        train_data=fill(paths.DATA, subset="train"),
        train_feats=fill(paths.FEATURES, subset="train"),
        tokens=paths.TOKENS,
    output:
        paths.CALIBRATION,
    log:
        "logs/{corpus}/{study}/calibrate.log",
    benchmark:
        "logs/benchmarks/{corpus}/{study}/calibrate.tsv"
    conda:
        "../../envs/train.yaml"
    # timings need the machine to themselves
    threads: lambda wildcards: job_cores()
    resources:
        gres=ONE_GPU,  # times the GPU learners train on
    shell:
        "python -m asrscale calibrate --settings {input.settings} --train-data {input.train_data}"
        " --train-feats {input.train_feats} --tokens {input.tokens} --out {output} > {log} 2>&1"


# The study's wall time at this machine's speed (study.wall_time), said in Snakemake's own output
# as soon as the calibration has timed it (rule all asks for it where the study states one).
rule wall_time:
    input:
        paths.CALIBRATION,
    output:
        paths.WALL_TIME,
    log:
        "logs/{corpus}/{study}/wall-time.log",
    priority: 100
    params:
        wall_time=STUDY.wall_time,
    run:
        say_wall_time(input[0], params.wall_time, [output[0], log[0]])


TRAIN_JOB = paths.run_job("train")
# the tuned run at the tuning seed is its configuration's chosen grid run (trained once)
ADOPTED = fill(paths.RUN, variant=TUNED, seed=STUDY.tuning_seed)


ruleorder: adopt > train


# study.tuning: a configuration's grid, trained, chosen among by the best dev loss
rule tune:
    input:
        grid_records,
    output:
        paths.TUNING,
    log:
        "logs/{corpus}/{study}/tune/{cluster}/{algorithm}-P{learners}.log",
    conda:
        "../../envs/train.yaml"
    params:
        runs=lambda wildcards, input: [Path(record).parent for record in input],
    shell:
        "python -m asrscale tune --runs {params.runs} --out {output} > {log} 2>&1"


rule adopt:
    input:
        choice=paths.TUNING,
        settings=f"{ADOPTED}/settings.json",
    output:
        model=f"{ADOPTED}/model.pt",
        metrics=f"{ADOPTED}/metrics.tsv",
        record=f"{ADOPTED}/run.json",
    log:
        f"logs/{fill(paths.run_job('adopt'), variant=TUNED, seed=STUDY.tuning_seed)}.log",
    conda:
        "../../envs/train.yaml"
    params:
        folder=lambda wildcards, output: Path(output.model).parent,
    shell:
        "python -m asrscale adopt --choice {input.choice} --settings {input.settings} --out {params.folder}"
        " > {log} 2>&1"


# what every run's training reads; decoding's LM first made and checked against the dev transcripts
TRAIN_INPUTS = {
    "settings": f"{paths.RUN}/settings.json",
    "train_data": fill(paths.DATA, subset="train"),
    "dev_data": fill(paths.DATA, subset="dev"),
    "train_feats": fill(paths.FEATURES, subset="train"),
    "dev_feats": fill(paths.FEATURES, subset="dev"),
    "shards": paths.SHARDS,
    "tokens": paths.TOKENS,
    "lm": STUDY.language_model,
}
# Snakemake empties a job's log for each attempt: what a preempted, cancelled or failed attempt
# printed stays in {params.attempts}, each attempt under a line saying when and where (a halved
# grid's run: its rung's attempts and the rest's). {params.part}: a halved grid's run's part.
TRAIN_SHELL = (
    'echo "== attempt $(date -Is) on $(uname -n)${{SLURM_JOB_ID:+, SLURM job $SLURM_JOB_ID}}" >> {params.attempts};'
    " {{ {params.launch} python -m asrscale train --settings {input.settings} --train-data {input.train_data}"
    " --dev-data {input.dev_data} --train-feats {input.train_feats} --dev-feats {input.dev_feats}"
    " --shards {input.shards} --tokens {input.tokens} --out {params.folder} {params.part} {params.simulated};"
    " }} 2>&1 | tee -a {params.attempts} > {log}"
)


rule train:
    input:
        unpack(simulation_inputs),
        unpack(halving_decision),
        **TRAIN_INPUTS,
    output:
        model=f"{paths.RUN}/model.pt",
        metrics=f"{paths.RUN}/metrics.tsv",
        record=f"{paths.RUN}/run.json",
    log:
        f"logs/{TRAIN_JOB}.log",
    benchmark:
        f"logs/benchmarks/{TRAIN_JOB}.tsv"
    conda:
        "../../envs/train.yaml"
    threads: train_cores
    resources:
        **TRAIN_RESOURCES,
    params:
        launch=launch_line,
        folder=run_folder,
        attempts=f"logs/{TRAIN_JOB}.attempts.log",
        simulated=simulated_arguments,
        part=lambda wildcards, input: (
            f"--halving {input.decision}" if "decision" in input.keys() else ""
        ),
    shell:
        TRAIN_SHELL


# study.tuning.halving: a halved grid's run to its rung (it goes on in `train` if its grid keeps it)
rule train_rung:
    input:
        unpack(simulation_inputs),
        **TRAIN_INPUTS,
        halving=fill(paths.STUDY_SETTINGS, stage="halving"),
    output:
        f"{paths.RUN}/rung.json",
    log:
        f"logs/{TRAIN_JOB}.rung.log",
    benchmark:
        f"logs/benchmarks/{TRAIN_JOB}.rung.tsv"
    conda:
        "../../envs/train.yaml"
    threads: train_cores
    resources:
        **TRAIN_RESOURCES,
    params:
        launch=launch_line,
        folder=run_folder,
        attempts=f"logs/{TRAIN_JOB}.attempts.log",
        simulated=simulated_arguments,
        part=lambda wildcards, input: f"--rung {input.halving}",
    shell:
        TRAIN_SHELL


# a configuration's halved grid at its rung: which runs go on (study.tuning.halving)
rule halve:
    input:
        settings=fill(paths.STUDY_SETTINGS, stage="halving"),
        rungs=halving_rungs,
    output:
        paths.HALVING,
    log:
        "logs/{corpus}/{study}/halve/{cluster}/{algorithm}-P{learners}.log",
    conda:
        "../../envs/train.yaml"
    shell:
        "python -m asrscale halve --settings {input.settings} --rungs {input.rungs} --out {output} > {log} 2>&1"
