localrules:
    gather,
    report,
    results,
    record,


rule gather:
    input:
        expand(
            "{run}/{file}",
            run=sorted({STUDY.folder(run) for run in STUDY.runs()}),
            file=[
                "metrics.tsv",
                "run.json",
                *(
                    f"{name}/{file}"
                    for name in STUDY.test_sets
                    for file in paths.SCORES
                ),
            ],
        ),
        settings=fill(paths.STUDY_SETTINGS, stage="gather"),
        tunings=[STUDY.tuning_file(tuned) for tuned in STUDY.tunings()],
    output:
        runs=report(
            fill(paths.TABLE, table="runs"),
            caption="../report/runs.rst",
            category="Tables",
        ),
        tables=[fill(paths.TABLE, table=table) for table in paths.TABLES[1:]],
    log:
        "logs/{corpus}/gather/{study}.log",
    conda:
        "../../envs/report.yaml"
    params:
        folder=lambda wildcards, output: Path(output.runs).parent,
    shell:
        "python -m asrscale gather --settings {input.settings} --out {params.folder} > {log} 2>&1"


rule report:
    input:
        settings=fill(paths.STUDY_SETTINGS, corpus=STUDY.corpus, stage="report"),
        tables=[
            fill(paths.TABLE, corpus=STUDY.corpus, table=table)
            for table in paths.TABLES
        ],
        lm=fill(paths.LANGUAGE_MODEL_STATISTICS, corpus=STUDY.corpus),
        published=paths.PUBLISHED_SPEEDUPS,
        skipped=skipped_reports(),
    output:
        html=report(paths.REPORT, caption="../report/report.rst", category="Report"),
        figures=report(
            directory(fill(paths.FIGURES, corpus=STUDY.corpus)),
            patterns=["{name}.png"],
            caption="../report/figures.rst",
            category="Figures",
            subcategory="{name}",
        ),
    log:
        f"logs/{STUDY.corpus}/report/{{study}}.log",
    conda:
        "../../envs/report.yaml"
    shell:
        "python -m asrscale report --settings {input.settings} --tables {input.tables} --figures {output.figures}"
        " --lm-statistics {input.lm} --published-speedups {input.published} --skipped {input.skipped}"
        " --out {output.html} > {log} 2>&1"


# RESULTS.md beside the study's tables, as icefall's and ESPnet's recipes keep one
rule results:
    input:
        settings=fill(paths.STUDY_SETTINGS, stage="report"),
        tables=[fill(paths.TABLE, table=table) for table in paths.TABLES],
    output:
        report(paths.RESULTS, caption="../report/results.rst", category="Report"),
    log:
        "logs/{corpus}/results/{study}.log",
    conda:
        "../../envs/report.yaml"
    shell:
        "python -m asrscale study-results --settings {input.settings} --tables {input.tables} --out {output} > {log} 2>&1"


# A study's record (not made by `all`: `snakemake ... record`), written beside the study's results;
# copy it to records/<study> to keep it in the repository (records/index.yaml lists the kept ones).
# `asrscale rerender --record <folder>` makes its report again from it.
rule record:
    input:
        settings=fill(
            paths.STUDY_SETTINGS, corpus=STUDY.corpus, study=STUDY.name, stage="report"
        ),
        tables=[
            fill(paths.TABLE, corpus=STUDY.corpus, study=STUDY.name, table=table)
            for table in paths.TABLES
        ],
        lm=fill(paths.LANGUAGE_MODEL_STATISTICS, corpus=STUDY.corpus, study=STUDY.name),
        published=paths.PUBLISHED_SPEEDUPS,
        skipped=skipped_reports(),
    output:
        directory(f"results/{STUDY.corpus}/studies/{STUDY.name}/record"),
    log:
        f"logs/{STUDY.corpus}/record/{STUDY.name}.log",
    conda:
        "../../envs/report.yaml"
    shell:
        "python -m asrscale record --settings {input.settings} --tables {input.tables} --lm-statistics {input.lm}"
        " --published-speedups {input.published} --skipped {input.skipped} --out {output} > {log} 2>&1"
