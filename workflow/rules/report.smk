localrules:
    gather,
    report,


rule gather:
    input:
        expand(
            "{run}/{file}",
            run=sorted({STUDY.folder(run) for run in STUDY.runs()}),
            file=["metrics.tsv", "run.json", "test/scores.json"],
        ),
        settings="results/{corpus}/studies/{study}/settings/gather.json",
    output:
        runs=report(
            "results/{corpus}/studies/{study}/runs.tsv",
            caption="../report/runs.rst",
            category="Tables",
        ),
        epochs="results/{corpus}/studies/{study}/epochs.tsv",
        staleness="results/{corpus}/studies/{study}/staleness.tsv",
        sweeps="results/{corpus}/studies/{study}/sweeps.tsv",
        exchanges="results/{corpus}/studies/{study}/exchanges.tsv",
        confusions="results/{corpus}/studies/{study}/confusions.tsv",
        learners="results/{corpus}/studies/{study}/learners.tsv",
    log:
        "logs/{corpus}/gather/{study}.log",
    conda:
        "../../envs/report.yaml"
    shell:
        "python -m asrscale gather --settings {input.settings}"
        " --out results/{wildcards.corpus}/studies/{wildcards.study} > {log} 2>&1"


rule report:
    input:
        settings=f"results/{STUDY.corpus}/studies/{{study}}/settings/report.json",
        runs=f"results/{STUDY.corpus}/studies/{{study}}/runs.tsv",
        epochs=f"results/{STUDY.corpus}/studies/{{study}}/epochs.tsv",
        staleness=f"results/{STUDY.corpus}/studies/{{study}}/staleness.tsv",
        sweeps=f"results/{STUDY.corpus}/studies/{{study}}/sweeps.tsv",
        exchanges=f"results/{STUDY.corpus}/studies/{{study}}/exchanges.tsv",
        confusions=f"results/{STUDY.corpus}/studies/{{study}}/confusions.tsv",
        learners=f"results/{STUDY.corpus}/studies/{{study}}/learners.tsv",
        skipped=skipped_reports(),
    output:
        html="reports/{study}.html",
        figures=report(
            directory(f"results/{STUDY.corpus}/studies/{{study}}/figures"),
            patterns=["{name}.png"],
            caption="../report/figures.rst",
            category="Figures",
            subcategory="{name}",
        ),
    log:
        f"logs/{STUDY.corpus}/report/{{study}}.log",
    conda:
        "../../envs/report.yaml"
    params:
        results=lambda wildcards, input: Path(input.runs).parent,
    shell:
        "python -m asrscale report --settings {input.settings} --results {params.results} --figures {output.figures}"
        " --skipped {input.skipped} --out {output.html} > {log} 2>&1"
