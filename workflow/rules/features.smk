FEATURE_JOBS = config["features"]["jobs"]
# normalisation is applied when features are loaded: changing it must not re-extract them
EXTRACTION = {key: value for key, value in config["features"].items() if key != "cmvn"}


rule features:
    input:
        multiext(
            "results/{corpus}/data/{subset}/",
            "wav.scp",
            "utt2spk",
            "spk2utt",
            "text",
            "utt2dur",
        ),
    output:
        multiext(
            "results/{corpus}/feats/{subset}/part{part}",
            ".ark",
            ".scp",
            ".frames",
            ".cmvn.npz",
            ".skipped",
        ),
    log:
        "logs/{corpus}/features/{subset}-part{part}.log",
    benchmark:
        "benchmarks/{corpus}/features/{subset}-part{part}.tsv"
    conda:
        "../../envs/features.yaml"
    resources:
        **JOB_RESOURCES,
    params:
        config=as_json(EXTRACTION),
        bad_input=as_json(config["corpus"]["bad_input"]),
        # your own corpus: a rerun after a fix computes only the utterances that changed
        cache=f"--cache results/{CORPUS}/cache/features" if IMPORTED else "",
        parts=FEATURE_JOBS,
    shell:
        "python -m asrscale features --config {params.config} --data results/{wildcards.corpus}/data/{wildcards.subset}"
        " --part {wildcards.part} --parts {params.parts} --bad-input {params.bad_input} {params.cache}"
        " --out results/{wildcards.corpus}/feats/{wildcards.subset}/part{wildcards.part} > {log} 2>&1"


rule combine_features:
    input:
        expand(
            "results/{{corpus}}/feats/{{subset}}/part{part}{ext}",
            part=range(FEATURE_JOBS),
            ext=[".scp", ".frames", ".cmvn.npz", ".skipped"],
        ),
    output:
        multiext(
            "results/{corpus}/feats/{subset}/",
            "feats.scp",
            "utt2num_frames",
            "cmvn.npz",
            "skipped.tsv",
        ),
    log:
        "logs/{corpus}/combine_features/{subset}.log",
    conda:
        "../../envs/features.yaml"
    resources:
        **JOB_RESOURCES,
    params:
        parts=expand(
            "results/{{corpus}}/feats/{{subset}}/part{part}", part=range(FEATURE_JOBS)
        ),
    shell:
        "python -m asrscale combine-features --out results/{wildcards.corpus}/feats/{wildcards.subset}"
        " {params.parts} > {log} 2>&1"


rule shard:
    input:
        "results/{corpus}/feats/train/utt2num_frames",
    output:
        directory("results/{corpus}/shards/P{learners}"),
    log:
        "logs/{corpus}/shard/P{learners}.log",
    conda:
        "../../envs/features.yaml"
    resources:
        **JOB_RESOURCES,
    shell:
        "python -m asrscale shard --feats results/{wildcards.corpus}/feats/train --learners {wildcards.learners}"
        " --out {output} > {log} 2>&1"
