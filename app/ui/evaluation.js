// The backtest and anomalies views of the inspector (app/ui/index.html): /v1 cross_validation and
// detect_anomalies on the history in "Data in", drawn with uPlot. Reuses app.js's helpers
// (window.__rsaUi) and its state (window.__rsaState); what it draws it keeps in state.backtest and
// state.anomalies, read by the browser tests (tests/app/ui).
"use strict";

(() => {
  const ui = window.__rsaUi;
  const state = window.__rsaState;
  const $ = (id) => document.getElementById(id);
  const ACTUAL = "#334e68";
  const FORECAST = "#c2410c";
  const FLAG = "#dc2626";
  state.evaluationPlots = [];

  function syncLevels() {
    const select = $("anomaly-level");
    const levels = state.version && state.version.intervals ? state.version.intervals.levels : [];
    const now = [...select.options].map((o) => Number(o.value));
    if (now.join() === levels.join()) return;
    select.replaceChildren(
      ...levels.map((level) => {
        const option = document.createElement("option");
        option.value = String(level);
        option.textContent = `${level}%`;
        option.selected = level === 99 || level === levels[levels.length - 1];
        return option;
      }),
    );
  }

  // The history in "Data in" as the request's one series; a covariate model's covariates gathered from
  // it by the forecast's own code (app.js's withCovariates), `over` the future values it needs past the
  // history. What is missing throws, said in the panel before any request.
  function historyBody(over) {
    const input = ui.readInput();
    const series = { values: input.values };
    if (input.id != null) series.id = input.id;
    const start = $("start").value.trim() || input.start;
    if (start) series.start = start;
    Object.assign(series, ui.withCovariates(input, state.version, over));
    return { series: [series] };
  }

  // The model's H − the steps each forecast is read for (the horizon asked, or a lead of 1).
  function overHistory(steps) {
    return Math.max(0, state.version.horizon - (Number.isInteger(steps) && steps > 0 ? steps : state.version.horizon));
  }

  function columns(values, version) {
    return version.channels.map((name, c) => (Array.isArray(values) ? values.map((row) => (Array.isArray(row) ? row[c] : row)) : values[name]));
  }

  function times(series, version, n) {
    const t0 = ui.parseTime(series.start, ui.zone());
    if (t0 == null) return { timed: false, x: Array.from({ length: n }, (_, i) => i) };
    const step = ui.stepper(version);
    return { timed: true, x: Array.from({ length: n }, (_, i) => step(t0, i)) };
  }

  function showEvaluationError(error) {
    const where = error.field ? `${error.field}: ` : "";
    ui.showError("evaluation", `${where}${error.message}`, error.field);
  }

  function plot(container, name, timed, seriesOpts, data, bands, width, legend = true) {
    const box = document.createElement("div");
    box.className = "chart";
    box.dataset.channel = name;
    container.append(box);
    const zone = ui.zone();
    const u = new uPlot(
      {
        title: name,
        width,
        height: 220,
        tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), zone || "Etc/UTC"),
        scales: { x: { time: timed } },
        series: [{ label: timed ? `time (${zone || "UTC"})` : "step", value: timed ? (u, ts) => ui.formatTime(ts, zone) : (u, v) => v }, ...seriesOpts],
        bands,
        axes: [{ size: 44, space: 90, values: timed ? (u, splits) => ui.timeTicks(splits, zone) : undefined }, { size: 56, values: (u, splits) => splits.map(ui.formatTick) }],
        cursor: { drag: { x: true, y: false }, bind: { mousedown: ui.panOnShift } },
        // A backtest draws three lines per cutoff: a legend of them all would dwarf the chart.
        legend: { show: legend, live: true },
        plugins: [ui.wheelZoom()],
      },
      data,
      box,
    );
    state.evaluationPlots.push(u);
    return u;
  }

  function clearPlots(containerId) {
    state.evaluationPlots = state.evaluationPlots.filter((u) => {
      if (u.root.parentElement && u.root.parentElement.parentElement === $(containerId)) {
        u.destroy();
        return false;
      }
      return true;
    });
    $(containerId).replaceChildren();
  }

  // -- the backtest --------------------------------------------------------------------------------
  async function runBacktest() {
    ui.clearErrors(["evaluation"]);
    if (!state.version) return ui.showError("evaluation", "choose a model first");
    const horizon = $("horizon").value.trim();
    let body;
    try {
      body = historyBody(overHistory(horizon === "" ? null : Number(horizon)));
    } catch (error) {
      return ui.showError("evaluation", error.message);
    }
    if (horizon !== "") body.horizon = Number(horizon);
    body.n_windows = Number($("n-windows").value || 1);
    const step = $("step-size").value.trim();
    if (step !== "") body.step_size = Number(step);
    const levels = [...$("levels").querySelectorAll("input:checked")].map((box) => Number(box.value));
    if (levels.length) body.level = levels;
    return evaluate("cross_validation", body, "backtesting…", "backtest", renderBacktest);
  }

  // Sends `body` to the version's `op` route (`busy` said meanwhile) and shows the answer in the view
  // `${what}-view` (`render(series, answer, version)`), keeping it in state[what].
  async function evaluate(op, body, busy, what, render) {
    const version = state.version;
    $("evaluation-status").textContent = busy;
    try {
      const answer = await (await ui.api("POST", ui.versionPath(op), body)).json();
      state[what] = { request: body, response: answer };
      $(`${what}-view`).hidden = false;
      render(body.series[0], answer, version);
    } catch (error) {
      showEvaluationError(error);
    } finally {
      $("evaluation-status").textContent = "";
    }
  }

  function metricsList(answer) {
    const m = answer.metrics;
    const rows = [
      ["windows", `${answer.n_windows} of ${answer.horizon} steps, ${answer.step_size} apart`],
      ["MAE", m.mae],
      ["MSE", m.mse],
      ["MASE", m.mase],
      ["sMAPE", m.smape == null ? null : `${m.smape.toFixed(2)}%`],
      ...Object.entries(m.coverage).map(([level, v]) => [`coverage ${level}%`, v == null ? null : `${(100 * v).toFixed(1)}%`]),
    ];
    // A covariate model's future steps past the history that the windows read as the training mean
    // (rows not given after the target: the answer reads none of those steps).
    const unsent = answer.series.flatMap((s) => s.windows.filter((w) => w.future_unsent));
    if (unsent.length) {
      const steps = unsent.reduce((sum, w) => sum + w.future_unsent, 0);
      rows.push(["future not sent", `${steps} steps in ${unsent.length} windows, read as the training mean`]);
    }
    $("backtest-metrics").replaceChildren(
      ...rows.flatMap(([term, value]) => {
        const dt = document.createElement("dt");
        dt.textContent = term;
        const dd = document.createElement("dd");
        dd.dataset.term = term;
        dd.textContent = typeof value === "number" ? value.toPrecision(4) : value == null ? "–" : value;
        return [dt, dd];
      }),
    );
  }

  function renderBacktest(series, answer, version) {
    metricsList(answer);
    clearPlots("backtest-charts");
    const container = $("backtest-charts");
    const result = answer.series[0];
    const values = columns(series.values, version);
    const first = Math.max(0, result.windows[0].cutoff - answer.horizon);
    const n = values[0].length;
    const { timed, x } = times(series, version, n);
    const xs = x.slice(first);
    const level = answer.level && answer.level.length ? answer.level[0] : null;
    const width = ui.chartWidth(container);
    answer.channels.forEach((name, c) => {
      const data = [xs, values[c].slice(first).map(Number)];
      const opts = [{ label: "actual", stroke: ACTUAL, width: 1.25, value: ui.formatValue }];
      const bands = [];
      result.windows.forEach((w, j) => {
        const line = new Array(xs.length).fill(null);
        const lo = new Array(xs.length).fill(null);
        const hi = new Array(xs.length).fill(null);
        w.forecast.forEach((row, k) => {
          line[w.cutoff - first + k] = row[c];
          if (level != null) {
            lo[w.cutoff - first + k] = w[`lo-${level}`][k][c];
            hi[w.cutoff - first + k] = w[`hi-${level}`][k][c];
          }
        });
        data.push(line);
        opts.push({ label: `cutoff ${w.cutoff}`, stroke: FORECAST, width: 1.5, value: ui.formatValue });
        if (level != null) {
          data.push(lo, hi);
          const faint = "rgba(194, 65, 12, 0.35)";
          opts.push({ label: `lo-${level} @${w.cutoff}`, stroke: faint, width: 0.5, value: ui.formatValue, show: true });
          opts.push({ label: `hi-${level} @${w.cutoff}`, stroke: faint, width: 0.5, value: ui.formatValue, show: true });
          bands.push({ series: [data.length - 1, data.length - 2], fill: "rgba(194, 65, 12, 0.15)" });
        }
      });
      plot(container, name, timed, opts, data, bands, width, false);
    });
  }

  // -- anomalies -----------------------------------------------------------------------------------
  async function runAnomalies() {
    ui.clearErrors(["evaluation"]);
    if (!state.version) return ui.showError("evaluation", "choose a model first");
    syncLevels();
    let body;
    try {
      body = historyBody(overHistory(1)); // one-step forecasts: lead 1
    } catch (error) {
      return ui.showError("evaluation", error.message);
    }
    body.level = Number($("anomaly-level").value);
    const last = $("anomaly-last").value.trim();
    if (last !== "") body.last = Number(last);
    return evaluate("detect_anomalies", body, "checking…", "anomalies", renderAnomalies);
  }

  function renderAnomalies(series, answer, version) {
    clearPlots("anomalies-charts");
    const container = $("anomalies-charts");
    const result = answer.series[0];
    const n = columns(series.values, version)[0].length;
    const { timed, x } = times(series, version, n);
    const xs = result.index.map((i) => x[i]);
    const unsent = (result.future_unsent || []).filter((u) => u > 0);
    const note = unsent.length ? ` ${unsent.length} of these forecasts read up to ${Math.max(...unsent)} future steps past the history as the training mean (not sent).` : "";
    $("anomalies-summary").textContent = `${result.anomalies} of ${result.index.length * answer.channels.length} values flagged at level ${answer.level}% (one-step forecasts, last ${result.index.length} points).${note}`;
    const width = ui.chartWidth(container);
    answer.channels.forEach((name, c) => {
      const pick = (key) => result[key].map((row) => row[c]);
      const actual = pick("actual");
      const flagged = result.anomaly.map((row, k) => (row[c] ? actual[k] : null));
      const data = [xs, actual, pick("forecast"), pick("lo"), pick("hi"), flagged];
      const opts = [
        { label: "actual", stroke: ACTUAL, width: 1.25, value: ui.formatValue },
        { label: "forecast", stroke: FORECAST, width: 1.25, value: ui.formatValue },
        { label: `lo-${answer.level}`, stroke: "rgba(194, 65, 12, 0.4)", width: 0.5, value: ui.formatValue },
        { label: `hi-${answer.level}`, stroke: "rgba(194, 65, 12, 0.4)", width: 0.5, value: ui.formatValue },
        { label: "anomaly", stroke: FLAG, width: 0, points: { show: true, size: 9, fill: FLAG, stroke: FLAG }, value: ui.formatValue },
      ];
      plot(container, name, timed, opts, data, [{ series: [4, 3], fill: "rgba(194, 65, 12, 0.15)" }], width);
    });
  }

  async function loadHistory() {
    const response = await fetch("/ui/static/examples/backtest_request.json");
    const text = await response.text();
    ui.useText(text);
    const example = JSON.parse(text); // its backtest settings, into the fields they belong to
    $("horizon").value = example.horizon;
    $("n-windows").value = example.n_windows;
    $("step-size").value = example.step_size;
  }

  $("run-backtest").addEventListener("click", runBacktest);
  $("run-anomalies").addEventListener("click", runAnomalies);
  $("load-history").addEventListener("click", () => loadHistory().catch(showEvaluationError));
  $("anomaly-level").addEventListener("focus", syncLevels);
  $("model").addEventListener("change", () => setTimeout(syncLevels, 0));
  $("version").addEventListener("change", () => setTimeout(syncLevels, 0));
  // The first model arrives after this script runs: its levels as soon as it is chosen.
  const waitForVersion = () => (state.version ? syncLevels() : setTimeout(waitForVersion, 100));
  waitForVersion();
})();
