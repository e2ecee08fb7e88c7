"""curricula: curriculum learning for neural rankers.

The importable, unit-tested library behind the Snakemake pipeline. Every stage's logic lives here;
rules and workflow scripts only read inputs and parameters, call these functions and write outputs.
"""

__version__ = "0.1.0"
