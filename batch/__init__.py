"""Forecasting at scale (issue 37; docs/batch.md): batch scoring of long tables on Ray Data with the
service's own window, interval and clipping code (`batch.score`), and the global read-out's normal
equations accumulated per Ray Data block (`batch.fit`). Ray is imported only where a job runs."""
