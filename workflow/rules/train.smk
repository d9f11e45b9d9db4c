rule calibrate:
    input:
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
        gres=f"{SLURM['gpu_gres']}:1" if SLURM["gpu_gres"] else None,  # times the GPU learners train on
    params:
        train=as_json(config["train"]),
        model=as_json(config["model"]),
        features=as_json(config["features"]),
    shell:
        "python -m asrscale calibrate --train {params.train} --model {params.model}"
        " --features {params.features} --data results/{wildcards.corpus}/data"
        " --feats results/{wildcards.corpus}/feats --tokens {input.tokens} --out {output} > {log} 2>&1"


rule train:
    input:
        unpack(simulation_inputs),
        data=expand("results/{{corpus}}/data/{subset}/text", subset=["train", "dev"]),
        feats=expand(
            "results/{{corpus}}/feats/{subset}/feats.scp", subset=["train", "dev"]
        ),
        shards="results/{corpus}/shards/P{learners}",
        tokens="results/{corpus}/tokens.txt",
    output:
        model="results/{corpus}/studies/{study}/runs/{world}/{algorithm}/{variant}/P{learners}/seed{seed}/model.pt",
        metrics="results/{corpus}/studies/{study}/runs/{world}/{algorithm}/{variant}/P{learners}/seed{seed}/metrics.tsv",
        record="results/{corpus}/studies/{study}/runs/{world}/{algorithm}/{variant}/P{learners}/seed{seed}/run.json",
    log:
        "logs/{corpus}/{study}/train/{world}/{algorithm}/{variant}-P{learners}-seed{seed}.log",
    benchmark:
        "benchmarks/{corpus}/{study}/train/{world}/{algorithm}/{variant}-P{learners}-seed{seed}.tsv"
    conda:
        "../../envs/train.yaml"
    # A run owns the machine, so that no other job distorts its timings.
    threads: lambda wildcards: job_cores()
    resources:
        **TRAIN_RESOURCES,
    params:
        launch=lambda wildcards: launcher(wildcards) or "",
        train=train_settings,
        model=as_json(config["model"]),
        features=as_json(config["features"]),
        out=lambda wildcards, output: Path(output.model).parent,
        timeout=config["mpi"]["timeout_s"],
        collectives=config["mpi"]["collectives"],
        world=world_arguments,
    shell:
        "{params.launch} python -m asrscale train --train {params.train} --model {params.model}"
        " --features {params.features} --data results/{wildcards.corpus}/data"
        " --feats results/{wildcards.corpus}/feats --shards {input.shards} --tokens {input.tokens}"
        " --out {params.out} --timeout {params.timeout} --collectives {params.collectives} {params.world} > {log} 2>&1"
