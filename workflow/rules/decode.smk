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


# Decoding in two jobs, each on what it needs: the model's log-probabilities of the dev and test
# sets once (minutes, on a GPU where training has them), then the beam search over the LM grid on
# CPUs alone, a process a core (the profile's set-threads: decode), the log-probabilities removed
# once it has scored them.
rule log_probs:
    input:
        settings=fill(paths.STUDY_SETTINGS, stage="decode"),
        model=f"{paths.RUN}/model.pt",
        data=[fill(paths.DATA, subset=name) for name in ["dev", *STUDY.test_sets]],
        feats=[fill(paths.FEATURES, subset=name) for name in ["dev", *STUDY.test_sets]],
        train_feats=fill(paths.FEATURES, subset="train"),
    output:
        temp(directory(paths.LOG_PROBS)),
    log:
        f"logs/{paths.run_job('log-probs')}.log",
    benchmark:
        f"logs/benchmarks/{paths.run_job('log-probs')}.tsv"
    conda:
        "../../envs/train.yaml"
    resources:
        gres=ONE_GPU,  # the model's forward passes, where training has GPUs
    shell:
        "python -m asrscale log-probs --settings {input.settings} --model {input.model} --data {input.data}"
        " --feats {input.feats} --train-feats {input.train_feats} --out {output} > {log} 2>&1"


rule decode:
    input:
        settings=fill(paths.STUDY_SETTINGS, stage="decode"),
        log_probs=paths.LOG_PROBS,
        lm=STUDY.language_model,
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
    threads: lambda wildcards: job_cores()
    params:
        folder=lambda wildcards, output: Path(output[0]).parents[1],
        test_sets=STUDY.test_sets,
    shell:
        "python -m asrscale decode --settings {input.settings} --log-probs {input.log_probs} --lm {input.lm}"
        " --test-sets {params.test_sets} --processes {threads} --out {params.folder} > {log} 2>&1"
