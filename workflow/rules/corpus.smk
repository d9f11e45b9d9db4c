if STUDY.imported:

    rule import_subset:
        input:
            source_tables,
            settings="results/{corpus}/settings/import-{subset}.json",
        output:
            multiext(
                "results/{corpus}/data/{subset}/",
                "wav.scp",
                "text",
                "utt2spk",
                "spk2utt",
                "utt2dur",
                "skipped.tsv",
            ),
        log:
            "logs/{corpus}/import/{subset}.log",
        conda:
            "../../envs/corpus.yaml"
        resources:
            **JOB_RESOURCES,
        shell:
            "python -m asrscale import-data --settings {input.settings}"
            " --out results/{wildcards.corpus}/data/{wildcards.subset} > {log} 2>&1"

else:

    rule synthesise:
        input:
            settings="results/{corpus}/settings/synthesise.json",
        output:
            directory("results/{corpus}/synth/part{part}"),
        log:
            "logs/{corpus}/synthesise/part{part}.log",
        benchmark:
            "benchmarks/{corpus}/synthesise/part{part}.tsv"
        conda:
            "../../envs/corpus.yaml"
        resources:
            **JOB_RESOURCES,
        params:
            parts=config["corpus"]["builtin"]["jobs"],
        shell:
            "python -m asrscale synth --settings {input.settings} --part {wildcards.part} --parts {params.parts}"
            " --out {output} > {log} 2>&1"

    rule data_dir:
        input:
            expand(
                "results/{{corpus}}/synth/part{part}",
                part=range(config["corpus"]["builtin"]["jobs"]),
            ),
        output:
            multiext(
                "results/{corpus}/data/{subset}/",
                "wav.scp",
                "text",
                "utt2spk",
                "spk2utt",
                "utt2dur",
            ),
        log:
            "logs/{corpus}/data_dir/{subset}.log",
        conda:
            "../../envs/corpus.yaml"
        resources:
            **JOB_RESOURCES,
        params:
            parts=lambda wildcards, input: [
                f"{part}/{wildcards.subset}" for part in input
            ],
        shell:
            "python -m asrscale combine-data --out results/{wildcards.corpus}/data/{wildcards.subset}"
            " {params.parts} > {log} 2>&1"


rule tokens:
    input:
        "results/{corpus}/data/train/text",
    output:
        "results/{corpus}/tokens.txt",
    log:
        "logs/{corpus}/tokens.log",
    conda:
        "../../envs/corpus.yaml"
    resources:
        **JOB_RESOURCES,
    shell:
        "python -m asrscale tokens --data results/{wildcards.corpus}/data/train --out {output} > {log} 2>&1"
