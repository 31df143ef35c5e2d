"""The anomaly check's repair (`detect_anomalies` with `repair`), protocol-neutral: which checked points to
forecast again, from which values, until every point is judged from a window that holds no anomaly.

A flagged value sits in the windows of the points after it and moves their forecasts. Replacing every
first-pass flag by its forecast at once carried the spike on: a point one period after a spike was
flagged in the first pass (its seasonal lag read the spike), replaced by that contaminated forecast,
and the point after it read the replacement (issue 45: a quarterly model flagged the point 5 steps
after a spike in 78% of the series). So:

- the points are *judged* in time order, each once its forecast was made from its window's current
  values (values before the checked points are read as sent);
- a judged point whose value is outside the interval is, first, taken for a spike: its value is
  replaced by its forecast (the flagged channels) in the windows of the points after it, which are
  forecast again in the next round; a point whose window would end in replaced values is forecast from
  the window before them, as many steps further ahead (up to the model's horizon), with that step's
  interval: a replacement is a forecast, not an observation, so the last value observed is that many
  steps back;
- the first point that reads a replaced value (`lead` steps after it) tells a spike from a level shift:
  flagged too, on the same side, by at least half as much, the value was the onset of a shift, which
  the windows after it must read as sent (replaced, it kept the old level in them and flagged the points
  after a shift more often than no repair did: M3 quarterly, 99.5% and 77% of the first two points
  against 73% and 24%). The onset and the replacements after it are then undone, and that point is
  judged again from the values as sent, as are the flags on the shift's side after it, until a point of
  that channel is not flagged.

Each round is one batch through the engine. A round forecasts, per series, the points after the last
one judged from the values as they are then, in time order up to the first whose latest forecast it
flags (at most `AHEAD`): those before the next flag are judged from them, and a flag makes the ones after
it, which read its row, wait for the next round. Every round judges at least the first point of each
series not judged yet, so the rounds end, about one per anomaly in a series. (Once a point was forecast
only when every point before it was judged: one point a round after a series' first anomaly, and after
32 rounds the rest kept their first forecasts, the echo of every later spike in a long check.)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["AHEAD", "SHIFT_SHARE", "Repair"]

# Points of a series forecast again in one round at most: a bound on what a flag that comes sooner than
# the latest forecasts say throws away.
AHEAD = 64
# A flag `lead` steps after a replaced value, on the same side and at least this share of its
# difference, makes that value a level shift's onset rather than a spike.
SHIFT_SHARE = 0.5


class _Series:
    """One series' state: its values as the windows read them now, which checked points are judged and
    which forecasts were made from the current values, the spikes replaced (point -> channels, their
    differences)."""

    def __init__(self, values: np.ndarray, first: int, offset: int, least: int) -> None:
        self.sent = values
        self.values = values.copy()
        self.first, self.count, self.offset = first, len(values) - first, offset
        self.least = least  # the fewest rows a window may be cut from (nulls before the series began too)
        self.judged = np.zeros(self.count, bool)
        self.fresh = np.ones(self.count, bool)
        self.replaced = np.zeros(len(values), bool)  # rows a spike's forecast stands in for
        self.spikes: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        # Per channel, the side (+1, −1) of a level shift being absorbed, 0 where none is.
        self.shifting = np.zeros(values.shape[1])


class Repair:
    """The repair of one request's anomaly check. `values[s]` [n, C] as sent, `first[s]` the first
    checked row of series s (its checked points are first .. n − 1), `lead`, the model's `horizon`, the
    window's `length` (the rows a forecast reads) and the fewest rows a window may be cut from
    (`least`, per series: its nulls before it began, `windows.not_started`, count too); the first pass's
    `forecast`, `lo`, `hi`, `width` [N, C] over every checked point of every series (series-major, each
    forecast `lead` steps ahead), which `update` keeps current. Call `next_round()` for the points to
    forecast again (per series, each point's position among its checked points and the step it is
    forecast at, from the window that ends that many steps before it), forecast them from `values(s)`,
    and give the answers to `update`; an empty round means every point is judged."""

    def __init__(
        self,
        values: Sequence[np.ndarray],
        first: Sequence[int],
        lead: int,
        horizon: int,
        length: int,
        least: Sequence[int],
        forecast: np.ndarray,
        lo: np.ndarray,
        hi: np.ndarray,
        width: np.ndarray,
    ) -> None:
        self.lead, self.horizon, self.length = lead, horizon, length
        self.forecast, self.lo, self.hi, self.width = forecast, lo, hi, width
        self.series: list[_Series] = []
        offset = 0
        for v, f, least_rows in zip(values, first, least, strict=True):
            self.series.append(_Series(v, f, offset, least_rows))
            offset += len(v) - f
        self.actual = np.concatenate([s.sent[s.first :] for s in self.series])

    def values(self, s: int) -> np.ndarray:
        """Series s's values as the windows of its next forecasts read them."""
        return self.series[s].values

    def next_round(self) -> list[list[tuple[int, int]]]:
        """Judge every point that can be, then the points to forecast again, each with its step (empty
        when every point is judged): per series, those whose window changed since their forecast, in
        time order, up to the first one its latest forecast flags, at most AHEAD."""
        out = []
        for state in self.series:
            self._judge(state)
            planned: list[tuple[int, int]] = []
            for j in np.flatnonzero(~state.judged & ~state.fresh).tolist():
                planned.append((j, self._step(state, j)))
                if len(planned) == AHEAD or self._outside(state.offset + j).any():
                    break
            out.append(planned)
        return out

    def rounds_at_most(self) -> int:
        """A bound on the rounds: each judges the first point not judged of every series, and a point is
        judged again only when it makes a level shift's onset of the spike `lead` steps before it, which
        takes at least one channel out of that spike each time (C at most)."""
        return max(((state.sent.shape[1] + 1) * state.count for state in self.series), default=0) + 2

    def replaced(self) -> np.ndarray:
        """[N, C] over every checked point of every series (series-major): whether the windows after it
        read the value as its forecast (a spike), not as sent."""
        out = np.zeros(self.actual.shape, bool)
        for state in self.series:
            for j, (channels, _) in state.spikes.items():
                out[state.offset + j] = channels
        return out

    def update(self, s: int, points: Sequence[int], answers: Sequence[np.ndarray]) -> None:
        """Series s's points forecast again: (forecast, lo, hi, width) [len(points), C]."""
        state = self.series[s]
        at = np.asarray(points, np.int64)
        for array, new in zip((self.forecast, self.lo, self.hi, self.width), answers, strict=True):
            array[state.offset + at] = new
        state.fresh[at] = True

    # -- the rules ------------------------------------------------------------------------------------

    def _outside(self, k: int) -> np.ndarray:
        """Per channel, whether checked point k (over every series) is outside its latest interval (a
        missing value, NaN: never)."""
        return (self.actual[k] < self.lo[k]) | (self.actual[k] > self.hi[k])

    def _step(self, state: _Series, j: int) -> int:
        """The step point j is forecast at: `lead`, plus the replaced values its window would end with
        (at most the horizon, and a window of `least` values)."""
        step, t = self.lead, state.first + j
        most = min(self.horizon, t + 1 - state.least)
        while step < most and state.replaced[t - step]:
            step += 1
        return step

    def _stale(self, state: _Series, low: int, high: int) -> None:
        """Rows low .. high (inclusive) changed: the points not yet judged that may read one are to be
        forecast again (a point t reads rows up to t − lead, back to t − horizon + 1 − length)."""
        a = max(low + self.lead - state.first, 0)
        b = min(high + self.horizon + self.length - 1 - state.first + 1, state.count)
        if a < b:
            state.fresh[a:b] &= state.judged[a:b]

    def _judge(self, state: _Series) -> None:
        """Judge the points in time order, up to the first whose forecast is not current."""
        for j in range(state.count):
            if state.judged[j]:
                continue
            if not state.fresh[j]:
                return
            k = state.offset + j
            t = state.first + j
            difference = self.actual[k] - self.forecast[k]
            flags = self._outside(k)
            state.judged[j] = True
            if self._shift(state, j, flags, difference):
                continue
            # A flag on a shift's side, after it, is the shift being absorbed: kept as sent.
            absorbing = flags & (state.shifting != 0) & (np.sign(difference) == state.shifting)
            state.shifting[~absorbing] = 0.0
            spike = flags & ~absorbing
            if spike.any():
                state.values[t, spike] = self.forecast[k, spike]
                state.replaced[t] = True
                state.spikes[j] = (spike, difference.copy())
                self._stale(state, t, t)

    def _shift(self, state: _Series, j: int, flags: np.ndarray, difference: np.ndarray) -> bool:
        """Whether point j, `lead` steps after a replaced spike (the first point whose forecast would
        read it), makes it a level shift's onset; then its replacements are undone and point j is to be
        judged again."""
        onset = j - self.lead
        if onset not in state.spikes:
            return False
        channels, before = state.spikes[onset]
        with np.errstate(invalid="ignore"):
            shift = (
                channels
                & flags
                & (np.sign(difference) == np.sign(before))
                & (np.abs(difference) >= SHIFT_SHARE * np.abs(before))
            )
        if not shift.any():
            return False
        for later in range(onset, j):  # the onset and the replacements after it: part of the shift
            spike = state.spikes.get(later)
            if spike is None:
                continue
            undo = spike[0] & shift
            row = state.first + later
            state.values[row, undo] = state.sent[row, undo]
            spike[0][undo] = False
            if not spike[0].any():
                del state.spikes[later]
                state.replaced[row] = False
        state.shifting[shift] = np.sign(before[shift])
        state.judged[j] = False
        state.fresh[j] = False
        self._stale(state, state.first + onset, state.first + j - 1)
        return True
