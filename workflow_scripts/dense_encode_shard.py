from curricula.plumbing.gpus import planned_job
from curricula.plumbing.logs import logged
from curricula.plumbing.shards import parse_scatteritem
from curricula.retrieval.stages import encode_stage

with logged(snakemake.log[0]), planned_job(snakemake.resources, snakemake.config):
    encode_stage(snakemake.wildcards.kind, snakemake.input.table, snakemake.output.vectors,
                 dict(snakemake.params.dense, threads=snakemake.threads),
                 biencoder_dir=snakemake.input.get("biencoder"),
                 shard=parse_scatteritem(snakemake.wildcards.scatteritem))
