rule train:
    input:
        data=expand("results/{{corpus}}/data/{subset}/text", subset=["train", "dev"]),
        feats=expand(
            "results/{{corpus}}/feats/{subset}/feats.scp", subset=["train", "dev"]
        ),
        shards="results/{corpus}/shards/P{learners}",
        tokens="results/{corpus}/tokens.txt",
    output:
        model="results/{corpus}/runs/{algorithm}/P{learners}/seed{seed}/model.pt",
        metrics="results/{corpus}/runs/{algorithm}/P{learners}/seed{seed}/metrics.tsv",
        record="results/{corpus}/runs/{algorithm}/P{learners}/seed{seed}/run.json",
    log:
        "logs/{corpus}/train/{algorithm}-P{learners}-seed{seed}.log",
    benchmark:
        "benchmarks/{corpus}/train/{algorithm}-P{learners}-seed{seed}.tsv"
    conda:
        "../../envs/train.yaml"
    # A run owns the machine, so that no other job distorts its timings.
    threads: lambda wildcards: workflow.cores
    params:
        launch=launcher,
        train=train_settings,
        model=as_json(config["model"]),
        features=as_json(config["features"]),
        out=lambda wildcards, output: Path(output.model).parent,
        timeout=config["mpi"]["timeout_s"],
    shell:
        "{params.launch} python -m asrscale train --train {params.train} --model {params.model}"
        " --features {params.features} --data results/{wildcards.corpus}/data"
        " --feats results/{wildcards.corpus}/feats --shards {input.shards} --tokens {input.tokens}"
        " --out {params.out} --timeout {params.timeout} > {log} 2>&1"
