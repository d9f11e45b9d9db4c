FEATURE_JOBS = config["features"]["jobs"]


rule features:
    input:
        # extraction and bad input only: normalisation (features.cmvn) is applied as features load
        settings="results/{corpus}/settings/features.json",
        data=multiext(
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
        # your own corpus: a rerun after a fix computes only the utterances that changed
        cache=f"--cache results/{STUDY.corpus}/cache/features" if STUDY.imported else "",
        parts=FEATURE_JOBS,
    shell:
        "python -m asrscale features --settings {input.settings} --data results/{wildcards.corpus}/data/{wildcards.subset}"
        " --part {wildcards.part} --parts {params.parts} {params.cache}"
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
