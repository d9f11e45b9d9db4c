# Every stage's settings and every run's, each in a file written from the configuration by the
# study resolver (src/asrscale/config/study.py); `asrscale <stage> --settings` reads it. A change
# of settings rewrites the file, and so reruns what reads it (and only that). These rules run in
# Snakemake's own process (profiles/default: force-use-threads).
localrules:
    corpus_settings,
    study_settings,
    run_settings,


rule corpus_settings:
    output:
        paths.CORPUS_SETTINGS,
    log:
        "logs/{corpus}/settings/{stage}.log",
    params:
        settings=lambda wildcards: STUDY.stage_settings(wildcards.stage),
    run:
        write_settings(output[0], log[0], params.settings)


rule study_settings:
    output:
        paths.STUDY_SETTINGS,
    log:
        "logs/{corpus}/{study}/settings/{stage}.log",
    params:
        settings=lambda wildcards: STUDY.stage_settings(wildcards.stage),
    run:
        write_settings(output[0], log[0], params.settings)


# A tuned run's settings are those its grid chose (its tuning's file, once the grid has trained);
# its settings as configured (params) rewrite it where the configuration changes.
rule run_settings:
    input:
        unpack(tuning_choice),
    output:
        f"{paths.RUN}/settings.json",
    log:
        f"logs/{paths.run_job('settings')}.log",
    params:
        settings=lambda wildcards: STUDY.run_settings(run_of(wildcards)),
    run:
        write_run_settings(wildcards, input, output[0], log[0])
