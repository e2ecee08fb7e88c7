from curricula.plumbing.gpus import planned_job
from curricula.plumbing.logs import logged
from curricula.retrieval.stages import biencoder_stage

with logged(snakemake.log[0]), planned_job(snakemake.resources, snakemake.config):
    data = {name: snakemake.input[name] for name in ("queries", "docs", "qrels")}
    biencoder_stage(data, snakemake.output.biencoder, dict(snakemake.params.dense, threads=snakemake.threads),
                    snakemake.params.seed)
