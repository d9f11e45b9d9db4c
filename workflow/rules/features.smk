rule features:
    input:
        # extraction and bad input only: normalisation (features.cmvn) is applied as features load
        settings=fill(paths.CORPUS_SETTINGS, stage="features"),
        data=paths.DATA,
    output:
        multiext(paths.FEATURE_PART, ".ark", ".scp", ".frames", ".cmvn.npz", ".skipped"),
    log:
        "logs/{corpus}/features/{subset}-part{part}.log",
    benchmark:
        "logs/benchmarks/{corpus}/features/{subset}-part{part}.tsv"
    conda:
        "../../envs/features.yaml"
    params:
        prefix=lambda wildcards, output: Path(output[0]).with_suffix(""),
        parts=STUDY.feature_jobs,
        # your own corpus: a rerun after a fix computes only the utterances that changed
        cache=f"--cache {STUDY.at(paths.FEATURE_CACHE)}" if STUDY.imported else "",
    shell:
        "python -m asrscale features --settings {input.settings} --data {input.data} --part {wildcards.part}"
        " --parts {params.parts} {params.cache} --out {params.prefix} > {log} 2>&1"


rule combine_features:
    input:
        expand(
            f"{paths.FEATURE_PART}{{ext}}",
            part=range(STUDY.feature_jobs),
            ext=[".scp", ".frames", ".cmvn.npz", ".skipped"],
            allow_missing=True,
        ),
    output:
        directory(paths.FEATURES),
    log:
        "logs/{corpus}/combine_features/{subset}.log",
    conda:
        "../../envs/features.yaml"
    params:
        parts=expand(
            paths.FEATURE_PART, part=range(STUDY.feature_jobs), allow_missing=True
        ),
    shell:
        "python -m asrscale combine-features --out {output} {params.parts} > {log} 2>&1"


rule shard:
    input:
        fill(paths.FEATURES, subset="train"),
    output:
        directory(paths.SHARDS),
    log:
        "logs/{corpus}/shard/P{learners}.log",
    conda:
        "../../envs/features.yaml"
    shell:
        "python -m asrscale shard --feats {input} --learners {wildcards.learners} --out {output} > {log} 2>&1"
