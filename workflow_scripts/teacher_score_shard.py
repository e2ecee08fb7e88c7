from curricula.logs import logged
from curricula.shards import parse_scatteritem
from curricula.teacher import teacher_config, teacher_score_stage

with logged(snakemake.log[0]):
    cfg = teacher_config(dict(snakemake.params.teacher, threads=snakemake.threads), snakemake.params.seed)
    teacher_score_stage(snakemake.input, snakemake.input.model, snakemake.output.scores, cfg,
                        snakemake.params.relevant_min, shard=parse_scatteritem(snakemake.wildcards.scatteritem))
