"""How many seeds a selection-noise grid needs to tell a cut of the SD of the paired differences from none
(issue 45 item 1; docs/selection.md): the Pitman-Morgan test's power per true SD ratio and number of seeds, at the
correlation of the two rules' paired differences across seeds (``analyses/selection_noise.py``'s ``r with reference``).

    PYTHONPATH=. .venv/bin/python analyses/variance_ratio_power.py --rho 0.63 --ratios 0.75,0.5 \\
        --seeds 8,16,24,32,48,64 [--draws 2000]

Prints a Markdown table, one row per ratio, one column per number of seeds (:func:`curricula.statistics.paired.
pitman_morgan_power`, bivariate normal pairs; a ratio of 1 gives the test's level).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from curricula.statistics.paired import pitman_morgan_power


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rho", type=float, required=True, help="correlation of the two rules' paired differences")
    parser.add_argument("--ratios", default="0.75,0.5", help="true SD ratios, comma-separated")
    parser.add_argument("--seeds", default="8,16,24,32,48,64", help="numbers of seeds, comma-separated")
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--alpha", type=float, default=0.05)
    args = parser.parse_args(argv)
    seeds = [int(n) for n in args.seeds.split(",")]
    print(f"| SD ratio (rho {args.rho}) | " + " | ".join(f"{n} seeds" for n in seeds) + " |")
    print("|---|" + "---|" * len(seeds))
    for ratio in (float(r) for r in args.ratios.split(",")):
        powers = [pitman_morgan_power(ratio, args.rho, n, args.draws, args.alpha) for n in seeds]
        print(f"| {ratio} | " + " | ".join(f"{p:.2f}" for p in powers) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
