localrules:
    gather,
    report,


RUN_DIRS = sorted({run_dir(*run) for run in study_runs()})
# each run of the report: the algorithm and variant it stands for, and the folder it was trained in
REPORTED_RUNS = [
    {"algorithm": run[1], "variant": run[2], "run": run_dir(*run)}
    for run in study_runs()
]


rule gather:
    input:
        expand(
            "{run}/{file}",
            run=RUN_DIRS,
            file=["metrics.tsv", "run.json", "test/scores.json"],
        ),
    output:
        runs=report(
            "results/{corpus}/studies/{study}/runs.tsv",
            caption="../report/runs.rst",
            category="Tables",
        ),
        epochs="results/{corpus}/studies/{study}/epochs.tsv",
        intervals="results/{corpus}/studies/{study}/intervals.tsv",
        staleness="results/{corpus}/studies/{study}/staleness.tsv",
        sweeps="results/{corpus}/studies/{study}/sweeps.tsv",
        exchanges="results/{corpus}/studies/{study}/exchanges.tsv",
    log:
        "logs/{corpus}/gather/{study}.log",
    conda:
        "../../envs/report.yaml"
    params:
        runs=as_json(REPORTED_RUNS),
        sweeps=as_json(sweep_points()),
        target=config["report"]["target_dev_loss"] or "",
    shell:
        "python -m asrscale gather --out results/{wildcards.corpus}/studies/{wildcards.study}"
        " --target-dev-loss '{params.target}' --runs {params.runs} --sweeps {params.sweeps} > {log} 2>&1"


rule report:
    input:
        runs=f"results/{CORPUS}/studies/{{study}}/runs.tsv",
        epochs=f"results/{CORPUS}/studies/{{study}}/epochs.tsv",
        staleness=f"results/{CORPUS}/studies/{{study}}/staleness.tsv",
        sweeps=f"results/{CORPUS}/studies/{{study}}/sweeps.tsv",
        exchanges=f"results/{CORPUS}/studies/{{study}}/exchanges.tsv",
        skipped=skipped_reports(),
    output:
        html="reports/{study}.html",
        figures=report(
            directory(f"results/{CORPUS}/studies/{{study}}/figures"),
            patterns=["{name}.png"],
            caption="../report/figures.rst",
            category="Figures",
            subcategory="{name}",
        ),
    log:
        f"logs/{CORPUS}/report/{{study}}.log",
    conda:
        "../../envs/report.yaml"
    params:
        title=config["report"]["title"],
        config=lambda wildcards: as_json(config),
        results=lambda wildcards, input: Path(input.runs).parent,
    shell:
        "python -m asrscale report --results {params.results} --figures {output.figures}"
        " --title {params.title:q} --skipped {input.skipped} --config {params.config} --out {output.html} > {log} 2>&1"
