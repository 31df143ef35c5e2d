"""The rules every path obeys, in one place: the service (app/), the exporter (export/), the batch scorer
(batch/) and the client (client/rsa_client) import them, so that a forecast's timestamps, a naive time's
reading across a daylight-saving change and a future table's check agree to the last bit.

Installable on its own (`pip install ./rsa_core`): numpy and the standard library; `rsa_core.wallclock`
reads naive times with pandas' zone database and `rsa_core.written` reads text dates with pandas (the
exporter, the batch scorer and the client have it; the service, whose image has no pandas, never imports
those modules).

- `rsa_core.calendar`: calendar frequencies (`3MS`: every 3 months, on the 1st) and their month steps.
- `rsa_core.steps`: the instants n steps after (or before) a timestamp, fixed or calendar; a zoned
  model's days and months on its zone's wall clock, shorter steps on the instant.
- `rsa_core.wallclock`: naive wall-clock times of a zone -> UTC instants, across daylight saving.
- `rsa_core.written`: dates as written in files and frames (ISO 8601, `Jan 2015`, `2015Q1`, ISO weeks...),
  one format per column, a day/month order the column leaves open found (pandas, as `wallclock`).
- `rsa_core.future`: a future table's rows checked against the steps after a series' last timestamp.
- `rsa_core.windows`: the last L values of each series right-aligned, a short start filled.
- `rsa_core.frequency`: a series' frequency from its timestamps (the gaps decide; zoned days and months
  on the wall clock), from a pandas alias, or assumed from its start alone (saying what else it fits).
"""
