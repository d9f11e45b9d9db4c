rule language_model:
    input:
        settings="results/{corpus}/settings/language-model.json",
        text="results/{corpus}/data/train/text",
    output:
        "results/{corpus}/lm/words.arpa",
    log:
        "logs/{corpus}/language-model.log",
    conda:
        "../../envs/train.yaml"
    resources:
        **JOB_RESOURCES,
    shell:
        "python -m asrscale language-model --settings {input.settings} --data results/{wildcards.corpus}/data/train"
        " --out {output} > {log} 2>&1"


rule decode:
    input:
        settings="results/{corpus}/studies/{study}/settings/decode.json",
        model=f"{RUN}/model.pt",
        lm=language_model,
        data=expand("results/{{corpus}}/data/{subset}/text", subset=("dev", "test")),
        feats=expand(
            "results/{{corpus}}/feats/{subset}/feats.scp", subset=("dev", "test")
        ),
        train_feats="results/{corpus}/feats/train/cmvn.npz",
    output:
        scores=f"{RUN}/test/scores.json",
        hypotheses=f"{RUN}/test/hypotheses.tsv",
        alignments=multiext(f"{RUN}/test/alignment.", "lm.txt", "greedy.txt"),
    log:
        "logs/{corpus}/{study}/decode/{world}/{algorithm}/{variant}-P{learners}-seed{seed}.log",
    benchmark:
        "benchmarks/{corpus}/{study}/decode/{world}/{algorithm}/{variant}-P{learners}-seed{seed}.tsv"
    conda:
        "../../envs/train.yaml"
    resources:
        **JOB_RESOURCES,
    params:
        results=lambda wildcards, input: Path(input.train_feats).parents[2],
        out=lambda wildcards, output: Path(output.scores).parent,
    shell:
        "python -m asrscale decode --settings {input.settings} --model {input.model} --lm {input.lm}"
        " --data {params.results}/data/test --feats {params.results}/feats/test"
        " --dev-data {params.results}/data/dev --dev-feats {params.results}/feats/dev"
        " --train-feats {params.results}/feats/train --out {params.out} > {log} 2>&1"
