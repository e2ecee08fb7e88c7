"""Small command-line helpers around the pipeline: ``python -m curricula.cli outputs config.yaml``."""

from __future__ import annotations

import argparse
import sys

from curricula.config import load_config, results_dir


def outputs(config_files: list[str]) -> int:
    """Print where the configured run's outputs are, stage by stage, and which exist."""
    config = load_config(*config_files)
    root = results_dir(config)
    print(f"Outputs of dataset '{config['dataset']['name']}' are under {root}/")
    for stage in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        files = sorted(f for f in stage.rglob("*") if f.is_file())
        print(f"  {stage.name}/: {len(files)} file(s), e.g. {files[0].relative_to(root) if files else '-'}")
    print(f"Logs: logs/{config['dataset']['name']}/  Benchmarks: benchmarks/{config['dataset']['name']}/")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m curricula.cli", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p_out = sub.add_parser("outputs", help="print where the outputs of a config are")
    p_out.add_argument("config", nargs="+", help="config file(s), later ones overlay earlier ones")
    args = parser.parse_args(argv)
    if args.command == "outputs":
        return outputs(args.config)
    return 2


if __name__ == "__main__":
    sys.exit(main())
