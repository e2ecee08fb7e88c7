from curricula.logs import logged
from curricula.precompute import encode_stage
from curricula.shards import parse_scatteritem

with logged(snakemake.log[0]):
    encode_stage(snakemake.wildcards.kind, snakemake.input.table, snakemake.output.vectors,
                 dict(snakemake.params.dense, threads=snakemake.threads),
                 biencoder_dir=snakemake.input.get("biencoder"),
                 shard=parse_scatteritem(snakemake.wildcards.scatteritem))
