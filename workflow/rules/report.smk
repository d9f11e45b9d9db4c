localrules:
    gather,
    report,


RUN_DIRS = [run_dir(*run) for run in study_runs()]


rule gather:
    input:
        expand(
            "{run}/{file}",
            run=RUN_DIRS,
            file=["metrics.tsv", "run.json", "test/scores.json"],
        ),
    output:
        runs=report(
            "results/{corpus}/runs.tsv",
            caption="../report/runs.rst",
            category="Tables",
        ),
        epochs="results/{corpus}/epochs.tsv",
        intervals="results/{corpus}/intervals.tsv",
    log:
        "logs/{corpus}/gather.log",
    conda:
        "../../envs/report.yaml"
    params:
        runs=RUN_DIRS,
    shell:
        "{ASRSCALE} gather --out results/{wildcards.corpus} {params.runs} > {log} 2>&1"


rule report:
    input:
        runs="results/{corpus}/runs.tsv",
        epochs="results/{corpus}/epochs.tsv",
        intervals="results/{corpus}/intervals.tsv",
    output:
        html="reports/{corpus}.html",
        figures=report(
            directory("results/{corpus}/figures"),
            patterns=["{name}.png"],
            caption="../report/figures.rst",
            category="Figures",
            subcategory="{name}",
        ),
    log:
        "logs/{corpus}/report.log",
    conda:
        "../../envs/report.yaml"
    params:
        title=config["report"]["title"],
    shell:
        "{ASRSCALE} report --results results/{wildcards.corpus} --figures {output.figures}"
        " --title '{params.title}' --out {output.html} > {log} 2>&1"
