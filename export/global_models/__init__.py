"""The global models: one model over many series (docs/panels.md, docs/architecture.md). Each module is
imported by its own path; this package imports none of them, so that the batch fit, the benchmarks and
the exporter's other modules load only what they use (and never the command line)."""
