"""Calendar frequencies (`3MS`: every 3 months, on the 1st) and their month steps: `rsa_core.calendar`'s,
the one copy that the service, the exporter, the batch scorer and the client share, named here where the
service's modules have always found them."""

from rsa_core.calendar import CalendarStep, calendar_step

__all__ = ["CalendarStep", "calendar_step"]
