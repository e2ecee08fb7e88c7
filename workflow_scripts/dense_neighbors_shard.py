from curricula.plumbing.gpus import planned_job
from curricula.plumbing.logs import logged
from curricula.plumbing.shards import parse_scatteritem
from curricula.retrieval.gpu_search import neighbors_device
from curricula.retrieval.stages import neighbors_stage

with logged(snakemake.log[0]), planned_job(snakemake.resources, snakemake.config):
    data = {name: snakemake.input[name] for name in ("queries", "qrels", "candidates")}
    neighbors_stage(snakemake.input.queries_vectors, snakemake.input.docs_vectors, data, snakemake.output.neighbors,
                    k=snakemake.params.k, within_split=snakemake.params.within_split, threads=snakemake.threads,
                    shard=parse_scatteritem(snakemake.wildcards.scatteritem),
                    device=neighbors_device(snakemake.config))
