from curricula.plumbing.logs import logged
from curricula.stages.common import gather_table

with logged(snakemake.log[0]):
    gather_table(snakemake.input, snakemake.output[0], table=snakemake.params.table, k=snakemake.params.get("k"))
