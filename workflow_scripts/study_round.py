from curricula.plumbing.logs import logged
from curricula.stages.study import study_round

with logged(snakemake.log[0]):
    study_round(snakemake.input, snakemake.output[0], **dict(snakemake.params.items()))
