"""`python -m export.panel`, the documented command: the global models' command line lives in
export/global_models/cli.py; this module only runs it."""

from export.global_models.cli import cli

if __name__ == "__main__":
    cli()
