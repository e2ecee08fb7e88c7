from curricula.plumbing.logs import logged
from curricula.retrieval.stages import positive_ranks_stage

with logged(snakemake.log[0]):
    data = {name: snakemake.input[name] for name in ("queries", "qrels")}
    positive_ranks_stage(snakemake.input.neighbors, data, snakemake.output.summary, k=snakemake.params.k,
                         relevant_min=snakemake.params.relevant_min)
