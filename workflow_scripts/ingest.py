from curricula.data.ingest import load_configured, write_ingest
from curricula.plumbing.logs import logged

with logged(snakemake.log[0]):
    data = load_configured(snakemake.params.dataset, snakemake.params.seed)
    write_ingest(data, dict(snakemake.output.items()))
