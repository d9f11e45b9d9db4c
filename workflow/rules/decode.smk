rule decode:
    input:
        model="results/{corpus}/studies/{study}/runs/{world}/{algorithm}/{variant}/P{learners}/seed{seed}/model.pt",
        data="results/{corpus}/data/test/text",
        feats="results/{corpus}/feats/test/feats.scp",
        train_feats="results/{corpus}/feats/train/cmvn.npz",
    output:
        scores="results/{corpus}/studies/{study}/runs/{world}/{algorithm}/{variant}/P{learners}/seed{seed}/test/scores.json",
        hypotheses="results/{corpus}/studies/{study}/runs/{world}/{algorithm}/{variant}/P{learners}/seed{seed}/test/hypotheses.tsv",
    log:
        "logs/{corpus}/{study}/decode/{world}/{algorithm}/{variant}-P{learners}-seed{seed}.log",
    benchmark:
        "benchmarks/{corpus}/{study}/decode/{world}/{algorithm}/{variant}-P{learners}-seed{seed}.tsv"
    conda:
        "../../envs/train.yaml"
    resources:
        **JOB_RESOURCES,
    params:
        out=lambda wildcards, output: Path(output.scores).parent,
        # a GPU where the job has one (decode jobs ask SLURM for none), unless training is kept off GPUs
        device="cpu" if config["train"]["device"] == "cpu" else "auto",
    shell:
        "python -m asrscale decode --model {input.model} --data results/{wildcards.corpus}/data/test"
        " --feats results/{wildcards.corpus}/feats/test --train-feats results/{wildcards.corpus}/feats/train"
        " --device {params.device} --out {params.out} > {log} 2>&1"
