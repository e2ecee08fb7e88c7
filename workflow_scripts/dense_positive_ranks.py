from curricula.plumbing.logs import logged
from curricula.stages.dense import dense_positive_ranks

with logged(snakemake.log[0]):
    dense_positive_ranks(snakemake.input, snakemake.output, k=snakemake.params.k,
                         relevant_min=snakemake.params.relevant_min)
