rule language_model:
    input:
        own_lm_file,
        settings=fill(paths.CORPUS_SETTINGS, stage="language-model"),
        train_data=fill(paths.DATA, subset="train"),
        dev_data=fill(paths.DATA, subset="dev"),
        tokens=paths.TOKENS,
    output:
        paths.LANGUAGE_MODEL,
    log:
        "logs/{corpus}/language-model.log",
    conda:
        "../../envs/train.yaml"
    shell:
        "python -m asrscale language-model --settings {input.settings} --data {input.train_data}"
        " --dev-data {input.dev_data} --tokens {input.tokens} --out {output} > {log} 2>&1"


rule language_model_statistics:
    input:
        lm=STUDY.language_model,
        train_data=fill(paths.DATA, subset="train"),
        dev_data=fill(paths.DATA, subset="dev"),
        test_data=[fill(paths.DATA, subset=name) for name in STUDY.test_sets],
    output:
        paths.LANGUAGE_MODEL_STATISTICS,
    log:
        "logs/{corpus}/{study}/language-model-statistics.log",
    conda:
        "../../envs/train.yaml"
    shell:
        "python -m asrscale lm-statistics --lm {input.lm} --train-data {input.train_data} --dev-data {input.dev_data}"
        " --test-data {input.test_data} --out {output} > {log} 2>&1"


rule decode:
    input:
        settings=fill(paths.STUDY_SETTINGS, stage="decode"),
        model=f"{paths.RUN}/model.pt",
        lm=STUDY.language_model,
        test_data=[fill(paths.DATA, subset=name) for name in STUDY.test_sets],
        test_feats=[fill(paths.FEATURES, subset=name) for name in STUDY.test_sets],
        dev_data=fill(paths.DATA, subset="dev"),
        dev_feats=fill(paths.FEATURES, subset="dev"),
        train_feats=fill(paths.FEATURES, subset="train"),
    output:
        # each test set's, in <run>/<test set>/
        [
            f"{paths.RUN}/{name}/{file}"
            for name in STUDY.test_sets
            for file in paths.SCORES
        ],
    log:
        f"logs/{paths.run_job('decode')}.log",
    benchmark:
        f"logs/benchmarks/{paths.run_job('decode')}.tsv"
    conda:
        "../../envs/train.yaml"
    resources:
        gres=ONE_GPU,  # the beam search's acoustic model, where training has GPUs
    params:
        folder=lambda wildcards, output: Path(output[0]).parents[1],
    shell:
        "python -m asrscale decode --settings {input.settings} --model {input.model} --lm {input.lm}"
        " --data {input.test_data} --feats {input.test_feats} --dev-data {input.dev_data}"
        " --dev-feats {input.dev_feats} --train-feats {input.train_feats} --out {params.folder} > {log} 2>&1"
