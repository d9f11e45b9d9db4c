if STUDY.imported:

    rule import_subset:
        input:
            watched,
            settings=fill(paths.CORPUS_SETTINGS, stage="import-{subset}"),
        output:
            directory(paths.DATA),
        log:
            "logs/{corpus}/import/{subset}.log",
        conda:
            "../../envs/corpus.yaml"
        shell:
            "python -m asrscale import-data --settings {input.settings} --out {output} > {log} 2>&1"

else:

    rule synthesise:
        input:
            settings=fill(paths.CORPUS_SETTINGS, stage="synthesise"),
        output:
            directory(paths.SYNTHESIS_PART),
        log:
            "logs/{corpus}/synthesise/part{part}.log",
        benchmark:
            "logs/benchmarks/{corpus}/synthesise/part{part}.tsv"
        conda:
            "../../envs/corpus.yaml"
        params:
            parts=STUDY.synthesis_jobs,
        shell:
            "python -m asrscale synth --settings {input.settings} --part {wildcards.part} --parts {params.parts}"
            " --out {output} > {log} 2>&1"

    rule data_dir:
        input:
            [
                fill(paths.SYNTHESIS_PART, part=part)
                for part in range(STUDY.synthesis_jobs)
            ],
        output:
            directory(paths.DATA),
        log:
            "logs/{corpus}/data_dir/{subset}.log",
        conda:
            "../../envs/corpus.yaml"
        params:
            parts=lambda wildcards, input: [
                f"{part}/{wildcards.subset}" for part in input
            ],
        shell:
            "python -m asrscale combine-data --out {output} {params.parts} > {log} 2>&1"


rule tokens:
    input:
        fill(paths.DATA, subset="train"),
    output:
        paths.TOKENS,
    log:
        "logs/{corpus}/tokens.log",
    conda:
        "../../envs/corpus.yaml"
    shell:
        "python -m asrscale tokens --data {input} --out {output} > {log} 2>&1"
