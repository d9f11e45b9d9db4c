rule decode:
    input:
        model="results/{corpus}/runs/{algorithm}/P{learners}/seed{seed}/model.pt",
        data="results/{corpus}/data/test/text",
        feats="results/{corpus}/feats/test/feats.scp",
        train_feats="results/{corpus}/feats/train/cmvn.npz",
    output:
        scores="results/{corpus}/runs/{algorithm}/P{learners}/seed{seed}/test/scores.json",
        hypotheses="results/{corpus}/runs/{algorithm}/P{learners}/seed{seed}/test/hypotheses.tsv",
    log:
        "logs/{corpus}/decode/{algorithm}-P{learners}-seed{seed}.log",
    benchmark:
        "benchmarks/{corpus}/decode/{algorithm}-P{learners}-seed{seed}.tsv"
    conda:
        "../../envs/train.yaml"
    shell:
        "python -m asrscale decode --model {input.model} --data results/{wildcards.corpus}/data/test"
        " --feats results/{wildcards.corpus}/feats/test --train-feats results/{wildcards.corpus}/feats/train"
        " --out results/{wildcards.corpus}/runs/{wildcards.algorithm}/P{wildcards.learners}/seed{wildcards.seed}/test"
        " > {log} 2>&1"
