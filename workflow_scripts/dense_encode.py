from curricula.logs import logged
from curricula.precompute import encode_stage

with logged(snakemake.log[0]):
    encode_stage(snakemake.wildcards.kind, snakemake.input.table, snakemake.output.vectors,
                 dict(snakemake.params.dense, threads=snakemake.threads),
                 biencoder_dir=snakemake.input.get("biencoder"))
