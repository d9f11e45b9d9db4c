rule calibrate:
    input:
        settings="results/{corpus}/studies/{study}/settings/calibrate.json",
        data="results/{corpus}/data/train/text",
        feats="results/{corpus}/feats/train/feats.scp",
        tokens="results/{corpus}/tokens.txt",
    output:
        "results/{corpus}/studies/{study}/calibration.json",
    log:
        "logs/{corpus}/{study}/calibrate.log",
    benchmark:
        "benchmarks/{corpus}/{study}/calibrate.tsv"
    conda:
        "../../envs/train.yaml"
    # timings need the machine to themselves
    threads: lambda wildcards: job_cores()
    resources:
        **JOB_RESOURCES,
        gres=ONE_GPU,  # times the GPU learners train on
    shell:
        "python -m asrscale calibrate --settings {input.settings} --data results/{wildcards.corpus}/data"
        " --feats results/{wildcards.corpus}/feats --tokens {input.tokens} --out {output} > {log} 2>&1"


# a run's job, as its log and benchmark files name it
TRAIN_JOB = (
    "{corpus}/{study}/train/{world}/{algorithm}/{variant}-P{learners}-seed{seed}"
)


rule train:
    input:
        unpack(simulation_inputs),
        settings=f"{RUN}/settings.json",
        data=expand("results/{{corpus}}/data/{subset}/text", subset=["train", "dev"]),
        feats=expand(
            "results/{{corpus}}/feats/{subset}/feats.scp", subset=["train", "dev"]
        ),
        shards="results/{corpus}/shards/P{learners}",
        tokens="results/{corpus}/tokens.txt",
    output:
        model=f"{RUN}/model.pt",
        metrics=f"{RUN}/metrics.tsv",
        record=f"{RUN}/run.json",
    log:
        f"logs/{TRAIN_JOB}.log",
    benchmark:
        f"benchmarks/{TRAIN_JOB}.tsv"
    conda:
        "../../envs/train.yaml"
    threads: train_cores
    resources:
        **TRAIN_RESOURCES,
    params:
        launch=lambda wildcards: launcher(wildcards) or "",
        out=lambda wildcards, output: Path(output.model).parent,
        attempts=f"logs/{TRAIN_JOB}.attempts.log",
        simulated=lambda wildcards, input, threads: (
            f"--calibration {input.calibration} --cores {threads}"
            if "calibration" in input.keys()
            else ""
        ),
    shell:
        # Snakemake empties {log} for each attempt: what a preempted, cancelled or failed attempt
        # printed stays in {params.attempts}, each attempt under a line saying when and where
        'echo "== attempt $(date -Is) on $(uname -n)${{SLURM_JOB_ID:+, SLURM job $SLURM_JOB_ID}}" >> {params.attempts};'
        " {params.launch} python -m asrscale train --settings {input.settings} --data results/{wildcards.corpus}/data"
        " --feats results/{wildcards.corpus}/feats --shards {input.shards} --tokens {input.tokens}"
        " --out {params.out} {params.simulated} 2>&1 | tee -a {params.attempts} > {log}"
